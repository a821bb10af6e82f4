/**
 * The contract between the gateway and a provider adapter.
 *
 * Adapters are plain synchronous functions on the gateway's hot path: they build the upstream request,
 * translate the answer (whole or streamed) into chat-completions, and map provider errors. They do no I/O;
 * the gateway does the fetch, the relaying and the capture.
 */
import type { Usage } from "../domain/usage.ts"
import type { ChatRequest } from "./chatCompletions.ts"

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
   * The caller's request body as received (the text `request` was parsed from). Pass-through adapters forward it
   * with only the model edited when that can be done safely, instead of serialising the request again.
   */
  readonly requestText?: string | undefined
  /** the same body as the caller's bytes, when they are exactly `requestText`'s UTF-8: forwarded spliced (body.ts) */
  readonly requestBytes?: Buffer | undefined
  /** caller headers the provider's own API defines (`anthropic-version`, `anthropic-beta`), passed on unchanged */
  readonly passHeaders?: Readonly<Record<string, string>> | undefined
  /** the decision's id: adapters that answer for a provider mint ids from it (a translated Responses answer's id) */
  readonly ledgerId?: string | undefined
}

export interface UpstreamRequest {
  readonly url: string
  readonly headers: Record<string, string>
  /** JSON text, or its UTF-8 bytes (a pass-through adapter's caller body, see body.ts) */
  readonly body: string | Buffer
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

/**
 * A provider error in chat-completions terms (every surface renders it in its own shape), keeping the provider's
 * HTTP status. `raw` is the provider's own body, relayed as it is where the caller speaks the provider's API.
 */
export interface ProviderError {
  readonly status: number
  readonly body: ErrorBody
  readonly raw?: string | undefined
}

/**
 * A complete answer: the JSON text sent to the caller and its usage; `captured` is what the capture keeps when that
 * differs from what the caller got (embeddings without their vectors).
 */
export interface Answer {
  readonly text: string
  readonly usage: Usage | null
  readonly captured?: string | undefined
}

/** A streamed answer as assembled so far; `error` is set when the provider failed mid-stream. */
export interface StreamAnswer extends Answer {
  readonly error: ProviderError | null
}

/**
 * Translates one upstream stream into the surface's server-sent events.
 * Bytes may be split anywhere (inside an SSE line, a UTF-8 character or a binary frame).
 */
export interface StreamTranslator {
  /** feeds upstream bytes; returns the SSE text to write to the caller now (often "") */
  push(bytes: Uint8Array): string
  /** the upstream ended: returns the remaining frames (chat completions: ending with `data: [DONE]`) */
  end(): string
  /** the provider failed mid-stream (the gateway's 502/504): the frames that end the stream with that error */
  fail(error: ProviderError): string
  /** the caller has the whole answer (its terminal event was relayed), even if the upstream has not ended yet */
  readonly complete: boolean
  /** the answer so far in the surface's format (also usable after an abort, for partial captures) */
  assembled(): StreamAnswer
  /**
   * The answer is larger than a capture keeps: from now on keep only what its end needs (finish, usage, the last few
   * events), so its assembly stays within the limit; the caller's relay goes on unchanged.
   */
  truncate(): void
}

/** Response headers of the upstream, as undici gives them (lower-case names). */
export type UpstreamHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export interface ProviderAdapter<Request = ChatRequest> {
  /** Builds the upstream HTTP request. Throws `UnsupportedRequest` for input the provider cannot take. */
  prepare(request: Request, ctx: CallContext): UpstreamRequest
  /**
   * Translates a successful (2xx) non-streamed upstream body (some providers count tokens in a header); may throw on
   * a body that is not the provider's JSON (answer 502).
   */
  response(bodyText: string, ctx: CallContext, headers?: UpstreamHeaders): Answer
  stream(ctx: CallContext): StreamTranslator
  /** Maps a non-2xx upstream answer to a provider error, keeping the status (some providers name the error in a header). */
  error(status: number, bodyText: string, headers?: UpstreamHeaders): ProviderError
}

/** A request the provider cannot take (e.g. an image URL where only inline bytes are accepted): a 400 for the caller. */
export class UnsupportedRequest extends Error {
  readonly status: number = 400
  readonly body: ErrorBody
  constructor(message: string, param: string | null = null, code = "unsupported_for_provider") {
    super(message)
    this.name = "UnsupportedRequest"
    this.body = { error: { message, type: "invalid_request_error", param, code } }
  }
}
