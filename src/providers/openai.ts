/**
 * OpenAI, and the shared implementation of every provider that speaks the chat-completions wire format
 * (Azure OpenAI, OpenAI-compatible upstreams): the request and answer pass through; only the model name,
 * the address and the credential header change.
 */
import { fromOpenAIUsage, type OpenAIUsage } from "../domain/usage.ts"
import { type ChatCompletion, type ChatRequest, type FinishReason, toolCallId } from "./chatCompletions.ts"
import { editedBody, modelEdit, opensObject } from "./body.ts"
import { errorTypeFor, fallbackMessage, parseJsonBody, providerError, stringOrNull } from "./errors.ts"
import { SseDecoder } from "./sse.ts"
import { type AnswerSink, type ChunkDelta, CompletionAssembler, DONE_FRAME, EventRelay, translatedStream, type TranslatedAdapter } from "./stream.ts"
import type { Answer, CallContext, ProviderError, StreamAnswer, StreamTranslator } from "./types.ts"

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
class OpenAIWireStream extends EventRelay {
  private readonly hideUsage: boolean
  private readonly assembly: CompletionAssembler
  private assembledCount = 0
  /** the upstream's id and model are taken from its first chunk */
  private identified = false

  constructor(ctx: CallContext) {
    super((onEvent) => new SseDecoder(onEvent))
    this.hideUsage = !ctx.includeUsage
    this.assembly = new CompletionAssembler(ctx.model)
  }

  /** `complete` once the caller has [DONE] */
  protected relay(_event: string, data: string): void {
    if (data === "[DONE]") return this.done()
    this.keep(data)
    if (this.hideUsage && isUsageOnlyChunk(data)) return
    this.emit(`data: ${data}\n\n`)
  }

  private done(): void {
    if (!this.complete) this.emit(DONE_FRAME)
    this.complete = true
  }

  protected override ended(): void {
    this.done()
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
    // the tail (past the capture limit) is assembled once: finish and usage, and no more text
    if (this.tail !== undefined && this.tail.length > 0) {
      this.assembly.truncated = true
      for (const data of this.tail.splice(0)) {
        try {
          this.assemble(JSON.parse(data) as WireChunk)
        } catch {
          // relayed as received
        }
      }
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

const USAGE_OPTION = '"stream_options":{"include_usage":true},'

/**
 * The caller's body with the routing prefix taken off the model (and, for streams, the usage chunk asked for),
 * without parsing and serialising it again; undefined when it cannot be edited safely.
 */
const forwardedBody = (request: ChatRequest, ctx: CallContext): string | Buffer | undefined => {
  const text = ctx.requestText
  if (text === undefined) return undefined
  const edits = modelEdit(text, request.model, ctx.model)
  if (edits === undefined) return undefined
  if (!ctx.stream || request.stream_options?.include_usage === true) return editedBody(ctx, edits)
  if ("stream_options" in request) return undefined
  // the usage option goes first in the object, before the model key
  return editedBody(ctx, [{ at: text.indexOf("{") + 1, remove: 0, insert: USAGE_OPTION }, ...edits])
}

/**
 * The provider's chat chunks written to another surface's sink (a Messages caller on an OpenAI model). Tool calls
 * are known by their index; a call is new when its first delta (with its id) arrives.
 */
const streamTo = (_ctx: CallContext, sink: AnswerSink): StreamTranslator => {
  const seen = new Set<number>()
  return translatedStream(sink, (onEvent) => new SseDecoder(onEvent), (_event, data) => {
    if (data === "[DONE]") return ""
    const chunk = JSON.parse(data) as WireChunk
    if (chunk.error) return sink.fail(wireError(500, chunk.error, "provider failed mid-stream"))
    let out = chunk.id ? sink.start(chunk.id, chunk.model) : ""
    const choice = chunk.choices?.find((candidate) => (candidate.index ?? 0) === 0)
    const delta = choice?.delta
    if (delta?.reasoning_content) out += sink.reasoning(delta.reasoning_content)
    if (delta?.content) out += sink.text(delta.content)
    if (delta?.refusal) out += sink.text(delta.refusal)
    for (const call of delta?.tool_calls ?? []) {
      if (!seen.has(call.index)) {
        seen.add(call.index)
        out += sink.toolCall(call.index, call.id ?? toolCallId(), call.function?.name ?? "", call.function?.arguments ?? "", call.extra_content)
      } else {
        out += sink.toolArguments(call.index, call.function?.arguments ?? "")
      }
    }
    if (choice?.finish_reason) out += sink.finish(choice.finish_reason)
    const usage = fromOpenAIUsage(chunk.usage)
    if (usage) sink.usage(usage)
    return out
  })
}

/** A whole chat completion, read for another surface. */
const completion = (bodyText: string) => {
  const completion = JSON.parse(bodyText) as ChatCompletion
  if (!Array.isArray(completion?.choices)) throw new Error("the answer is not a chat completion")
  return { completion, usage: fromOpenAIUsage(completion.usage) }
}

/**
 * The adapter of a provider speaking the chat-completions wire format at `endpoint`: passed through for chat
 * completions, and usable by the other surfaces like a translated provider (`streamTo`, `completion`).
 */
export const openAIWire = (endpoint: OpenAIWireEndpoint): TranslatedAdapter => ({
  streamTo,
  completion,
  prepare(request: ChatRequest, ctx: CallContext) {
    // Always ask for the usage chunk: the capture needs it; the stream hides it if the caller did not ask.
    const body = forwardedBody(request, ctx) ??
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
  // here cost ~5 % of the gateway's CPU per call (bench/notes/gateway.md, "Answers relayed untranslated are no longer
  // parsed"). Only its first character is
  // checked: a page from a proxy or portal in the provider's place is a 502, not an answer.
  response: (bodyText: string): Answer => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },

  stream: (ctx: CallContext) => new OpenAIWireStream(ctx),

  error: openAIWireError
})

export const openai: TranslatedAdapter = openAIWire({ url: chatCompletionsUrl, authHeaders: bearerAuth })
