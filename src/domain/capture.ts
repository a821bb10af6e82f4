/**
 * The capture record: what the gateway hands to the capture stream for one model call.
 *
 * It carries the call as exchanged with the caller (request and assembled response as raw JSON text,
 * credential headers never included) plus attribution and timings. Parsing it into a decision happens
 * in the builder, off the caller's path, so the gateway never re-serialises bodies it already holds as text.
 */
import { Schema } from "effect"

export const CAPTURE_VERSION = 1 as const

/** Provider families the gateway speaks; named OpenAI-compatible upstreams use `openai_compatible`. */
export const ProviderType = Schema.Literals(["openai", "azure", "anthropic", "gemini", "bedrock", "openai_compatible"])
export type ProviderType = typeof ProviderType.Type

/** Token usage normalised to chat-completions names; provider-specific cache counts mapped in. */
export const Usage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.Number,
  /** input tokens served from the provider's prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens, Gemini cachedContentTokenCount) */
  cached_tokens: Schema.optional(Schema.Number),
  /** input tokens written to the prompt cache (Anthropic cache_creation_input_tokens) */
  cache_write_tokens: Schema.optional(Schema.Number),
  /** reasoning tokens, when the provider reports them */
  reasoning_tokens: Schema.optional(Schema.Number)
})
export type Usage = typeof Usage.Type

/** The error the caller received, in chat-completions terms. */
export const CaptureError = Schema.Struct({
  status: Schema.Number,
  type: Schema.String,
  code: Schema.NullOr(Schema.String),
  message: Schema.String
})
export type CaptureError = typeof CaptureError.Type

export const Capture = Schema.Struct({
  v: Schema.Literal(CAPTURE_VERSION),
  /** uuid v7 minted by the gateway; the decision's id and the idempotency key end to end */
  ledger_id: Schema.String,
  tenant_id: Schema.String,
  workspace_id: Schema.String,
  user_id: Schema.String,
  /** credential id of the gateway key used */
  key_id: Schema.String,
  agent_id: Schema.String,
  agent_name: Schema.NullOr(Schema.String),
  execution_id: Schema.NullOr(Schema.String),
  /** routing prefix as the caller wrote it: `openai`, `azure`, ..., or an upstream name such as `ollama` */
  provider: Schema.String,
  provider_type: ProviderType,
  /** model name without the provider prefix */
  model: Schema.String,
  stream: Schema.Boolean,
  /** the chat-completions request body as the caller sent it (JSON text) */
  request: Schema.String,
  /** the chat-completions response as delivered (JSON text; for streams, the assembled completion); null on error */
  response: Schema.NullOr(Schema.String),
  error: Schema.NullOr(CaptureError),
  /** HTTP status returned to the caller */
  status: Schema.Number,
  /** the caller disconnected before the answer was complete */
  aborted: Schema.Boolean,
  /** usage as the gateway read it; null when the provider reported none or when it is left in `response` (captureUsage) */
  usage: Schema.NullOr(Usage),
  /** epoch milliseconds */
  started_at: Schema.Number,
  first_token_at: Schema.NullOr(Schema.Number),
  ended_at: Schema.Number,
  /** time spent waiting on the provider, ms (the rest of ended_at - started_at is gateway overhead) */
  upstream_ms: Schema.Number
})
export type Capture = typeof Capture.Type

/** A chat-completions usage object, as OpenAI-type providers report it and the gateway's answers carry it. */
export interface OpenAIUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number }
  completion_tokens_details?: { reasoning_tokens?: number }
}

const count = (value: unknown): number | undefined => (typeof value === "number" && value >= 0 ? value : undefined)

/** A chat-completions usage object → normalised usage; null when there is none (counts that are not numbers are left out). */
export const fromOpenAIUsage = (raw: OpenAIUsage | null | undefined): Usage | null => {
  const prompt = count(raw?.prompt_tokens)
  if (prompt === undefined) return null
  const completion = count(raw!.completion_tokens) ?? 0
  const usage: { -readonly [K in keyof Usage]: Usage[K] } = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: count(raw!.total_tokens) ?? prompt + completion
  }
  const cached = count(raw!.prompt_tokens_details?.cached_tokens)
  if (cached !== undefined) usage.cached_tokens = cached
  const written = count(raw!.prompt_tokens_details?.cache_write_tokens)
  if (written !== undefined) usage.cache_write_tokens = written
  const reasoning = count(raw!.completion_tokens_details?.reasoning_tokens)
  if (reasoning !== undefined) usage.reasoning_tokens = reasoning
  return usage
}

/**
 * The usage the ledger records for a capture: the gateway's, or else the `usage` of the chat-completions response.
 * The gateway leaves `usage` null on answers it relays untranslated (non-streamed answers of OpenAI-type
 * providers): the usage is in the response, and reading it there is the builder's work, off the caller's path.
 */
export const captureUsage = (capture: Pick<Capture, "usage" | "response">): Usage | null => {
  if (capture.usage !== null || capture.response === null) return capture.usage
  try {
    return fromOpenAIUsage((JSON.parse(capture.response) as { usage?: OpenAIUsage } | null)?.usage)
  } catch {
    return null
  }
}

export const decodeCapture = Schema.decodeUnknownEffect(Schema.fromJsonString(Capture))
