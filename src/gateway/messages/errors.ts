/**
 * Errors in the Anthropic Messages shape, `{"type":"error","error":{"type","message"}}`. A provider error that came
 * from Anthropic is relayed as Anthropic wrote it (Claude Code recognises some errors by their wording); the
 * gateway's own errors and other providers' get the Anthropic error type of their status.
 */
import type { ProviderError } from "../../providers/index.ts"

const TYPE_BY_STATUS: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  504: "timeout_error",
  529: "overloaded_error"
}

const ANTHROPIC_TYPES = new Set([...Object.values(TYPE_BY_STATUS), "api_error"])

/** The Anthropic error type for a provider error: its own when it has one, else the one of its status. */
export const anthropicErrorType = (error: ProviderError): string => {
  const type = error.body.error.type
  if (ANTHROPIC_TYPES.has(type)) return type
  return TYPE_BY_STATUS[error.status] ?? (error.status >= 500 ? "api_error" : "invalid_request_error")
}

/** The error's body as an Anthropic client expects it (JSON text). */
export const anthropicErrorBody = (error: ProviderError): string =>
  error.raw ?? JSON.stringify({ type: "error", error: { type: anthropicErrorType(error), message: error.body.error.message } })
