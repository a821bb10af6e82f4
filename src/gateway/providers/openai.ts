/**
 * OpenAI, and the shared implementation of every provider that speaks the chat-completions wire format
 * (Azure OpenAI, OpenAI-compatible upstreams): the request and answer pass through; only the model name,
 * the address and the credential header change.
 */
import { fromOpenAIUsage, type OpenAIUsage } from "../../domain/usage.ts"
import type { ChatRequest, FinishReason } from "./chat.ts"
import { errorTypeFor, fallbackMessage, parseJsonBody, providerError, stringOrNull } from "./errors.ts"
import { SseDecoder } from "./sse.ts"
import { type ChunkDelta, CompletionAssembler, DONE_FRAME } from "./stream.ts"
import type { Answer, CallContext, ProviderAdapter, ProviderError, StreamAnswer, StreamTranslator } from "./types.ts"

/** Where an OpenAI-wire provider is reached and how the caller's key is presented. */
export interface OpenAIWireEndpoint {
  url(ctx: CallContext): string
  authHeaders(apiKey: string): Record<string, string>
}

export const bearerAuth = (apiKey: string): Record<string, string> => ({ authorization: `Bearer ${apiKey}` })

export const chatCompletionsUrl = (ctx: CallContext): string => `${ctx.baseUrl}/chat/completions`

/** A chat-completions error object (`{"error": {...}}` body or mid-stream event) → the error we relay. */
const wireError = (status: number, error: Record<string, unknown>, fallback: string): ProviderError =>
  providerError(
    status,
    typeof error.message === "string" && error.message ? error.message : fallback,
    typeof error.type === "string" && error.type ? error.type : errorTypeFor(status),
    stringOrNull(error.code),
    stringOrNull(error.param)
  )

export const openAIWireError = (status: number, bodyText: string): ProviderError => {
  const body = parseJsonBody(bodyText)
  const error = body?.error
  // some compatible servers (Ollama) answer {"error": "message"}; fallbackMessage reads that
  if (typeof error === "object" && error !== null) {
    return wireError(status, error as Record<string, unknown>, fallbackMessage(status, undefined, ""))
  }
  return providerError(status, fallbackMessage(status, body, bodyText))
}

/** A chunk whose `choices` is empty: the usage chunk, or Azure's prompt-filter chunk (which callers do see). */
const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/

const isUsageOnlyChunk = (data: string): boolean => {
  if (!EMPTY_CHOICES.test(data)) return false
  try {
    const chunk = JSON.parse(data) as { usage?: unknown }
    return chunk.usage != null
  } catch {
    return false
  }
}

interface WireChunk {
  readonly id?: string
  readonly model?: string
  readonly choices?: ReadonlyArray<{
    readonly index?: number
    readonly delta?: ChunkDelta
    readonly finish_reason?: FinishReason | null
    readonly logprobs?: { readonly content?: ReadonlyArray<unknown> | null } | null
  }>
  readonly usage?: OpenAIUsage | null
  readonly error?: Record<string, unknown>
}

/**
 * Relays the upstream events as they are, except the usage chunk the gateway asked for on the caller's
 * behalf. Events are kept as text and parsed only when the answer is assembled, off the relay path.
 */
class OpenAIWireStream implements StreamTranslator {
  private readonly sse: SseDecoder
  private readonly hideUsage: boolean
  private readonly assembly: CompletionAssembler
  private readonly events: Array<string> = []
  private assembledCount = 0
  /** the upstream's id and model are taken from its first chunk */
  private identified = false
  private out = ""
  private doneSent = false

  /** the caller has [DONE] */
  get complete(): boolean {
    return this.doneSent
  }

  constructor(ctx: CallContext) {
    this.hideUsage = !ctx.includeUsage
    this.assembly = new CompletionAssembler(ctx.model)
    this.sse = new SseDecoder((_event, data) => this.relay(data))
  }

  private relay(data: string): void {
    if (data === "[DONE]") {
      if (!this.doneSent) this.out += DONE_FRAME
      this.doneSent = true
      return
    }
    this.events.push(data)
    if (this.hideUsage && isUsageOnlyChunk(data)) return
    this.out += `data: ${data}\n\n`
  }

  private take(): string {
    const text = this.out
    this.out = ""
    return text
  }

  push(bytes: Uint8Array): string {
    this.sse.push(bytes)
    return this.take()
  }

  end(): string {
    this.sse.end()
    if (!this.doneSent) this.out += DONE_FRAME
    this.doneSent = true
    return this.take()
  }

  /** The shape OpenAI itself ends a failed stream with, which the OpenAI clients raise as an APIError. */
  fail(error: ProviderError): string {
    this.assembly.error = error
    return `data: ${JSON.stringify(error.body)}\n\n`
  }

  assembled(): StreamAnswer {
    for (; this.assembledCount < this.events.length; this.assembledCount++) {
      let chunk: WireChunk
      try {
        chunk = JSON.parse(this.events[this.assembledCount]!) as WireChunk
      } catch {
        continue // relayed as received; nothing to assemble from it
      }
      this.assemble(chunk)
    }
    return this.assembly.answer()
  }

  private assemble(chunk: WireChunk): void {
    if (chunk.error) {
      this.assembly.error = wireError(500, chunk.error, "provider failed mid-stream")
      return
    }
    if (!this.identified && chunk.id) {
      this.identified = true
      this.assembly.id = chunk.id
      if (chunk.model) this.assembly.model = chunk.model
    }
    if (chunk.choices) {
      for (const choice of chunk.choices) {
        this.assembly.add(choice.index ?? 0, choice.delta, choice.finish_reason, choice.logprobs)
      }
    }
    const usage = fromOpenAIUsage(chunk.usage)
    if (usage) this.assembly.usage = usage
  }
}

const MODEL_KEY = '"model"'
const USAGE_OPTION = '"stream_options":{"include_usage":true},'

/**
 * The caller's body text with the routing prefix taken off the model (and, for streams, the usage chunk asked
 * for), without parsing and serialising it again; undefined when the text cannot be edited safely. Quotes inside
 * JSON strings are escaped, so when `"model"` occurs once in the text it is the top-level key.
 */
const editedBody = (text: string, request: ChatRequest, ctx: CallContext): string | undefined => {
  const key = text.indexOf(MODEL_KEY)
  if (key === -1 || key !== text.lastIndexOf(MODEL_KEY)) return undefined
  const written = `${MODEL_KEY}:${JSON.stringify(request.model)}`
  if (!text.startsWith(written, key)) return undefined
  let body = text.slice(0, key) + `${MODEL_KEY}:${JSON.stringify(ctx.model)}` + text.slice(key + written.length)
  if (ctx.stream && request.stream_options?.include_usage !== true) {
    if ("stream_options" in request) return undefined
    const open = body.indexOf("{")
    body = body.slice(0, open + 1) + USAGE_OPTION + body.slice(open + 1)
  }
  return body
}

/** Whether the first character after any whitespace (or a byte-order mark) is `{`. */
const opensObject = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x7b) return true
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09 && c !== 0xfeff) return false
  }
  return false
}

/** The adapter of a provider speaking the chat-completions wire format at `endpoint`. */
export const openAIWire = (endpoint: OpenAIWireEndpoint): ProviderAdapter => ({
  prepare(request: ChatRequest, ctx: CallContext) {
    // Always ask for the usage chunk: the capture needs it; the stream hides it if the caller did not ask.
    const body = (ctx.requestText === undefined ? undefined : editedBody(ctx.requestText, request, ctx)) ??
      JSON.stringify(
        ctx.stream
          ? { ...request, model: ctx.model, stream_options: { ...request.stream_options, include_usage: true } }
          : { ...request, model: ctx.model }
      )
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "text/event-stream" : "application/json",
      ...(ctx.apiKey ? endpoint.authHeaders(ctx.apiKey) : {})
    }
    return { url: endpoint.url(ctx), headers, body }
  },

  // Relayed as received, not parsed: the usage stays in the answer for the builder (captureUsage). Parsing it
  // here cost ~5 % of the gateway's CPU per call (bench/RESULTS.md, "Gateway"). Only its first character is
  // checked: a page from a proxy or portal in the provider's place is a 502, not an answer.
  response: (bodyText: string): Answer => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },

  stream: (ctx: CallContext) => new OpenAIWireStream(ctx),

  error: openAIWireError
})

export const openai: ProviderAdapter = openAIWire({ url: chatCompletionsUrl, authHeaders: bearerAuth })
