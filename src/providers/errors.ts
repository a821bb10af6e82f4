/** Building chat-completions error bodies from whatever a provider returned. */
import type { ProviderError } from "./types.ts"

/** The chat-completions error type for an HTTP status, for providers whose body does not say. */
export const errorTypeFor = (status: number): string => {
  switch (status) {
    case 400:
    case 404:
    case 409:
    case 413:
    case 422:
      return "invalid_request_error"
    case 401:
      return "authentication_error"
    case 403:
      return "permission_error"
    case 408:
    case 504:
      return "timeout_error"
    case 429:
      return "rate_limit_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

export const providerError = (
  status: number,
  message: string,
  type: string = errorTypeFor(status),
  code: string | null = null,
  param: string | null = null
): ProviderError => ({ status, body: { error: { message, type, param, code } } })

/** The body as JSON, or undefined when it is not JSON (proxies and load balancers answer HTML or text). */
export const parseJsonBody = (text: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

const MAX_TEXT_MESSAGE = 500

/** A readable message from an error body of unknown shape. */
export const fallbackMessage = (status: number, body: Record<string, unknown> | undefined, text: string): string => {
  for (const key of ["message", "detail", "error"]) {
    const value = body?.[key]
    if (typeof value === "string" && value) return value
  }
  const trimmed = text.trim()
  if (body === undefined && trimmed) return trimmed.slice(0, MAX_TEXT_MESSAGE)
  return `provider returned HTTP ${status}`
}

export const stringOrNull = (value: unknown): string | null =>
  typeof value === "string" ? value : typeof value === "number" ? String(value) : null
