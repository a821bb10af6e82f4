/**
 * The capture record: what the gateway hands to the capture stream for one model call.
 *
 * It carries the call as exchanged with the caller (request and assembled response as raw JSON text,
 * credential headers never included) plus attribution and timings. Parsing it into a decision happens
 * in the builder, off the caller's path, so the gateway never re-serialises bodies it already holds as text.
 */
import { Schema } from "effect"
import {
  type AnthropicUsage,
  fromAnthropicUsage,
  fromOpenAIUsage,
  fromResponsesUsage,
  type OpenAIUsage,
  type ResponsesUsage,
  Usage
} from "./usage.ts"

/**
 * 2: the capture names the API it speaks (`api`) and may carry a chained call's earlier turns (`context`). Version 1
 * captures are chat completions and are still read.
 */
export const CAPTURE_VERSION = 2 as const

/**
 * The API a call was made on, which is the format of the capture's request and response: chat completions, the
 * OpenAI Responses API, Anthropic Messages, or embeddings (the OpenAI shape).
 */
export const CaptureApi = Schema.Literals(["chat", "responses", "messages", "embeddings"])
export type CaptureApi = typeof CaptureApi.Type

/** Provider families the gateway speaks; named OpenAI-compatible upstreams use `openai_compatible`. */
export const ProviderType = Schema.Literals(["openai", "azure", "anthropic", "gemini", "bedrock", "openai_compatible"])
export type ProviderType = typeof ProviderType.Type

/** The error the caller received, in chat-completions terms. */
export const CaptureError = Schema.Struct({
  status: Schema.Number,
  type: Schema.String,
  code: Schema.NullOr(Schema.String),
  message: Schema.String
})
export type CaptureError = typeof CaptureError.Type

/** The coding assistants whose transcripts `ledger watch` reads. */
export const WatchedClient = Schema.Literals(["claude-code", "codex"])
export type WatchedClient = typeof WatchedClient.Type

/**
 * Where a capture came from when not from a call through the gateway: a model turn `ledger watch` read from a coding
 * assistant's transcript, with the client, its version, and the directory and git branch it worked in.
 */
export const CaptureSource = Schema.Struct({
  kind: Schema.Literal("watcher"),
  client: WatchedClient,
  client_version: Schema.NullOr(Schema.String),
  cwd: Schema.NullOr(Schema.String),
  git_branch: Schema.NullOr(Schema.String)
})
export type CaptureSource = typeof CaptureSource.Type

export const Capture = Schema.Struct({
  v: Schema.Literals([1, CAPTURE_VERSION]),
  /** absent in version 1 captures, which are all chat completions (`captureApi`) */
  api: Schema.optional(CaptureApi),
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
  /** the request body as the caller sent it (JSON text, in the format of `api`; a WebSocket turn's `response.create`) */
  request: Schema.String,
  /**
   * A call continuing a `previous_response_id` chain the gateway kept itself (translated providers, WebSocket turns):
   * the items of the turns before it (a JSON array of Responses items), which its request does not repeat
   */
  context: Schema.optional(Schema.NullOr(Schema.String)),
  /**
   * the response as delivered, in the format of `api` (JSON text; for streams, the assembled answer; embeddings
   * without their vectors); null on error
   */
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
  upstream_ms: Schema.Number,
  /** absent for calls through the gateway */
  source: Schema.optional(CaptureSource)
})
export type Capture = typeof Capture.Type

/** The API of a capture: version 1 captures are chat completions. */
export const captureApi = (capture: Pick<Capture, "api">): CaptureApi => capture.api ?? "chat"

/**
 * The usage the ledger records for a capture: the gateway's, or else the usage the response carries in the format of
 * its API. The gateway leaves `usage` null on answers it relays untranslated (the usage is in the response, and
 * reading it there is the builder's work, off the caller's path).
 */
export const captureUsage = (capture: Pick<Capture, "api" | "usage" | "response">): Usage | null => {
  if (capture.usage !== null || capture.response === null) return capture.usage
  let response: { usage?: unknown } | null
  try {
    response = JSON.parse(capture.response) as { usage?: unknown } | null
  } catch {
    return null
  }
  const usage = response?.usage
  switch (captureApi(capture)) {
    case "chat":
    case "embeddings":
      return fromOpenAIUsage(usage as OpenAIUsage | undefined)
    case "responses":
      return fromResponsesUsage(usage as ResponsesUsage | undefined)
    case "messages":
      return fromAnthropicUsage(usage as AnthropicUsage | undefined)
  }
}

export const decodeCapture = Schema.decodeUnknownEffect(Schema.fromJsonString(Capture))
