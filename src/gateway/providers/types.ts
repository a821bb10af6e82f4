/**
 * The contract between the gateway and a provider adapter.
 *
 * Adapters are plain synchronous functions on the gateway's hot path: they build the upstream request,
 * translate the answer (whole or streamed) into chat-completions, and map provider errors. They do no I/O;
 * the gateway does the fetch, the relaying and the capture.
 */
import type { Usage } from "../../domain/capture.ts"
import type { ChatRequest } from "./chat.ts"

export interface CallContext {
  /** model name without the routing prefix (Azure: the deployment name) */
  readonly model: string
  /** the caller's provider key (x-service-provider-api-key); undefined when the caller sent none */
  readonly apiKey: string | undefined
  /** provider base URL, no trailing slash (OpenAI-type: up to and including `/v1`) */
  readonly baseUrl: string
  readonly stream: boolean
  /** the caller asked for stream_options.include_usage, so it is shown the usage chunk */
  readonly includeUsage: boolean
  /** Azure OpenAI `api-version` */
  readonly apiVersion?: string | undefined
  /**
   * The caller's request body as received (the text `request` was parsed from). OpenAI-wire adapters forward it
   * with only the model edited when that can be done safely, instead of serialising the request again.
   */
  readonly requestText?: string | undefined
}

export interface UpstreamRequest {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
}

/** The chat-completions error body. */
export interface ErrorBody {
  readonly error: {
    readonly message: string
    readonly type: string
    readonly param: string | null
    readonly code: string | null
  }
}

/** A provider error in chat-completions terms, keeping the provider's HTTP status. */
export interface ProviderError {
  readonly status: number
  readonly body: ErrorBody
}

/** A complete answer: the chat.completion JSON text (sent to the caller, and captured) and its usage. */
export interface Answer {
  readonly text: string
  readonly usage: Usage | null
}

/** A streamed answer as assembled so far; `error` is set when the provider failed mid-stream. */
export interface StreamAnswer extends Answer {
  readonly error: ProviderError | null
}

/**
 * Translates one upstream stream into chat.completion.chunk server-sent events.
 * Bytes may be split anywhere (inside an SSE line, a UTF-8 character or a binary frame).
 */
export interface StreamTranslator {
  /** feeds upstream bytes; returns the SSE text to write to the caller now (often "") */
  push(bytes: Uint8Array): string
  /** the upstream ended: returns the remaining frames, ending with `data: [DONE]` */
  end(): string
  /** the answer so far as one chat.completion (also usable after an abort, for partial captures) */
  assembled(): StreamAnswer
}

/** Response headers of the upstream, as undici gives them (lower-case names). */
export type UpstreamHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export interface ProviderAdapter {
  /** Builds the upstream HTTP request. Throws `UnsupportedRequest` for input the provider cannot take. */
  prepare(request: ChatRequest, ctx: CallContext): UpstreamRequest
  /** Translates a successful (2xx) non-streamed upstream body; may throw on a body that is not the provider's JSON (answer 502). */
  response(bodyText: string, ctx: CallContext): Answer
  stream(ctx: CallContext): StreamTranslator
  /** Maps a non-2xx upstream answer to the chat-completions error shape, keeping the status (some providers name the error in a header). */
  error(status: number, bodyText: string, headers?: UpstreamHeaders): ProviderError
}

/** A request the provider cannot take (e.g. an image URL where only inline bytes are accepted): a 400 for the caller. */
export class UnsupportedRequest extends Error {
  readonly status = 400
  readonly body: ErrorBody
  constructor(message: string, param: string | null = null) {
    super(message)
    this.name = "UnsupportedRequest"
    this.body = { error: { message, type: "invalid_request_error", param, code: "unsupported_for_provider" } }
  }
}
