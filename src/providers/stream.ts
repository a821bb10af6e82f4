/**
 * Streamed answers in chat-completions terms: assembling chunks into one chat.completion (for the capture), the
 * `AnswerSink` a translated provider's stream is written to, and its chat-completions implementation (`ChunkWriter`,
 * chat.completion.chunk frames). The Responses and Messages surfaces have sinks of their own.
 */
import type { Usage } from "../domain/usage.ts"
import {
  type ChatCompletion,
  type ChatRequest,
  completionId,
  type FinishReason,
  nowSeconds,
  toOpenAIUsage,
  type ToolCall
} from "./chatCompletions.ts"
import { providerError } from "./errors.ts"
import type { CallContext, ProviderAdapter, ProviderError, StreamAnswer, StreamTranslator } from "./types.ts"

/** A chat.completion.chunk delta as OpenAI-type providers send it. */
export interface ChunkDelta {
  readonly role?: string
  readonly content?: string | null
  readonly refusal?: string | null
  readonly reasoning_content?: string | null
  /** the signature closing the reasoning (Anthropic thinking) */
  readonly reasoning_signature?: string | null
  readonly tool_calls?: ReadonlyArray<{
    readonly index: number
    readonly id?: string
    readonly function?: { readonly name?: string; readonly arguments?: string }
    readonly extra_content?: ToolCall["extra_content"]
  }>
}

interface ToolCallState {
  id: string
  name: string
  arguments: string
  extra: ToolCall["extra_content"] | undefined
}

class ChoiceState {
  content = ""
  reasoning = ""
  signature = ""
  refusal: string | null = null
  readonly toolCalls: Array<ToolCallState> = []
  finish: FinishReason | null = null
  logprobs: Array<unknown> | null = null
}

/** Accumulates a streamed answer; `completion()` may be called at any point, mid-stream included. */
export class CompletionAssembler {
  id: string
  model: string
  readonly created: number
  usage: Usage | null = null
  error: ProviderError | null = null
  /** past the capture limit: text, reasoning, arguments and logprobs are no longer kept (finish and usage are) */
  truncated = false
  private readonly choices: Array<ChoiceState> = []

  constructor(model: string) {
    this.id = completionId()
    this.model = model
    this.created = nowSeconds()
  }

  add(
    index: number,
    delta: ChunkDelta | undefined,
    finish: FinishReason | null | undefined,
    logprobs?: { readonly content?: ReadonlyArray<unknown> | null } | null
  ): void {
    const choice = (this.choices[index] ??= new ChoiceState())
    if (finish) choice.finish = finish
    if (this.truncated) return
    if (delta) {
      if (delta.content) choice.content += delta.content
      if (delta.reasoning_content) choice.reasoning += delta.reasoning_content
      if (delta.reasoning_signature) choice.signature = delta.reasoning_signature
      if (delta.refusal) choice.refusal = (choice.refusal ?? "") + delta.refusal
      if (delta.tool_calls) for (const call of delta.tool_calls) this.addToolCall(choice, call)
    }
    if (logprobs?.content) (choice.logprobs ??= []).push(...logprobs.content)
  }

  private addToolCall(choice: ChoiceState, call: NonNullable<ChunkDelta["tool_calls"]>[number]): void {
    const state = (choice.toolCalls[call.index] ??= { id: "", name: "", arguments: "", extra: undefined })
    if (call.id) state.id = call.id
    // names arrive whole (some compatible servers repeat them in every delta)
    if (call.function?.name) state.name = call.function.name
    if (call.function?.arguments) state.arguments += call.function.arguments
    if (call.extra_content) state.extra = call.extra_content
  }

  completion(): ChatCompletion {
    const count = Math.max(1, this.choices.length)
    const choices: ChatCompletion["choices"] = []
    for (let index = 0; index < count; index++) {
      const choice = this.choices[index] ?? new ChoiceState()
      const toolCalls = choice.toolCalls.filter((call) => call !== undefined)
      const message: ChatCompletion["choices"][number]["message"] = {
        role: "assistant",
        content: choice.refusal !== null || (toolCalls.length > 0 && !choice.content) ? null : choice.content,
        refusal: choice.refusal
      }
      if (toolCalls.length > 0) {
        message.tool_calls = toolCalls.map((call): ToolCall => ({
          id: call.id,
          type: "function",
          function: { name: call.name, arguments: call.arguments },
          ...(call.extra ? { extra_content: call.extra } : {})
        }))
      }
      if (choice.reasoning) message.reasoning_content = choice.reasoning
      if (choice.signature) message.reasoning_signature = choice.signature
      choices.push({
        index,
        message,
        finish_reason: choice.finish,
        logprobs: choice.logprobs ? { content: choice.logprobs } : null
      })
    }
    return {
      id: this.id,
      object: "chat.completion",
      created: this.created,
      model: this.model,
      choices,
      usage: this.usage ? toOpenAIUsage(this.usage) : null
    }
  }

  answer(): StreamAnswer {
    return { text: JSON.stringify(this.completion()), usage: this.usage, error: this.error }
  }
}

export const DONE_FRAME = "data: [DONE]\n\n"

const FRAME_END = ',"finish_reason":null}]}\n\n'

/**
 * Where a translated provider's stream goes: each call reports one piece of the answer and returns the frames to
 * write to the caller now, in the surface's format. Every sink assembles the answer as it goes (`assembly`, in chat
 * terms) and gives it in the surface's format for the capture (`answer`). One choice.
 */
export interface AnswerSink {
  readonly assembly: CompletionAssembler
  /** the first frames; the provider's message id and model when it reports them */
  start(id?: string, model?: string): string
  text(text: string): string
  reasoning(text: string): string
  /** the signature closing the reasoning so far (Anthropic thinking): the caller needs it to send the reasoning back */
  reasoningSignature(signature: string): string
  /** a new tool call; `index` counts tool calls (not content blocks) from 0 */
  toolCall(index: number, id: string, name: string, args: string, extra?: ToolCall["extra_content"]): string
  toolArguments(index: number, fragment: string): string
  finish(reason: FinishReason): string
  usage(usage: Usage): void
  /** a provider failure mid-stream: the frames that end the stream with it */
  fail(error: ProviderError): string
  /** the closing frames */
  end(): string
  /** the terminal frame has been written */
  readonly complete: boolean
  /** the answer so far, in the surface's format */
  answer(): StreamAnswer
  /** the answer is larger than a capture keeps (StreamTranslator.truncate) */
  truncate(): void
}

/** What every sink does alike: the answer assembled as it goes, its finish reason and usage kept for the end. */
export abstract class AssemblingSink {
  readonly assembly: CompletionAssembler
  complete = false

  constructor(model: string) {
    this.assembly = new CompletionAssembler(model)
  }

  finish(reason: FinishReason): string {
    this.assembly.add(0, undefined, reason)
    return ""
  }

  usage(usage: Usage): void {
    this.assembly.usage = usage
  }

  truncate(): void {
    this.assembly.truncated = true
  }
}

/**
 * Writes chat.completion.chunk frames (one choice) for a translated stream and assembles them as it goes.
 * Each frame is one precomputed prefix plus the serialised delta, so a text delta costs one small stringify.
 */
export class ChunkWriter extends AssemblingSink implements AnswerSink {
  private readonly includeUsage: boolean
  private prefix = ""
  private head = ""

  constructor(model: string, includeUsage: boolean) {
    super(model)
    this.includeUsage = includeUsage
  }

  /** The first frame (role); the provider's message id and model when it reports them. */
  start(id?: string, model?: string): string {
    if (this.prefix) return ""
    if (id) this.assembly.id = id
    if (model) this.assembly.model = model
    this.head = `{"id":${JSON.stringify(this.assembly.id)},"object":"chat.completion.chunk","created":${this.assembly.created},"model":${JSON.stringify(this.assembly.model)}`
    this.prefix = `data: ${this.head},"choices":[{"index":0,"delta":`
    this.assembly.add(0, undefined, undefined)
    return this.prefix + '{"role":"assistant","content":""}' + FRAME_END
  }

  text(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { content: text }, undefined)
    return this.start() + this.prefix + `{"content":${JSON.stringify(text)}}` + FRAME_END
  }

  reasoning(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { reasoning_content: text }, undefined)
    return this.start() + this.prefix + `{"reasoning_content":${JSON.stringify(text)}}` + FRAME_END
  }

  /** Chat-completions callers have no way to send a signature back: it is kept for the capture only. */
  reasoningSignature(signature: string): string {
    this.assembly.add(0, { reasoning_signature: signature }, undefined)
    return ""
  }

  /** A new tool call; `index` counts tool calls (not content blocks) from 0. */
  toolCall(index: number, id: string, name: string, args: string, extra?: ToolCall["extra_content"]): string {
    const call = { index, id, type: "function" as const, function: { name, arguments: args }, ...(extra ? { extra_content: extra } : {}) }
    this.assembly.add(0, { tool_calls: [call] }, undefined)
    return this.start() + this.prefix + JSON.stringify({ tool_calls: [call] }) + FRAME_END
  }

  toolArguments(index: number, fragment: string): string {
    if (!fragment) return ""
    this.assembly.add(0, { tool_calls: [{ index, function: { arguments: fragment } }] }, undefined)
    return this.start() + this.prefix + `{"tool_calls":[{"index":${index},"function":{"arguments":${JSON.stringify(fragment)}}}]}` + FRAME_END
  }

  override finish(reason: FinishReason): string {
    super.finish(reason)
    return this.start() + this.prefix + `{},"finish_reason":${JSON.stringify(reason)}}]}\n\n`
  }

  /** A provider failure mid-stream, in the shape the OpenAI clients raise as an APIError. */
  fail(error: ProviderError): string {
    this.assembly.error = error
    return `data: ${JSON.stringify(error.body)}\n\n`
  }

  /** The closing frames: the usage chunk when the caller asked for it, then [DONE]. */
  end(): string {
    this.complete = true
    if (!this.includeUsage || !this.assembly.usage) return DONE_FRAME
    const opening = this.start()
    const usage = JSON.stringify(toOpenAIUsage(this.assembly.usage))
    return opening + `data: ${this.head},"choices":[],"usage":${usage}}\n\n` + DONE_FRAME
  }

  answer(): StreamAnswer {
    return this.assembly.answer()
  }
}

/** Decodes upstream bytes into (event name, event data) pairs: SSE, or AWS event-stream frames. */
export interface EventDecoder {
  push(bytes: Uint8Array): void
  end(): void
}

/**
 * The stream translator of a translated provider: decoded upstream events are handed to `handle`, which
 * writes them to the sink and returns the frames to relay. An event that cannot be read ends the answer with an
 * error frame instead of failing the whole relay.
 */
export const translatedStream = (
  sink: AnswerSink,
  decoder: (onEvent: (event: string, data: string) => void) => EventDecoder,
  handle: (event: string, data: string) => string
): StreamTranslator => {
  let out = ""
  const input = decoder((event, data) => {
    try {
      out += handle(event, data)
    } catch (cause) {
      out += sink.fail(providerError(502, `unreadable provider stream event: ${String(cause)}`, "api_error"))
    }
  })
  const take = (): string => {
    const text = out
    out = ""
    return text
  }
  return {
    push(bytes) {
      input.push(bytes)
      return take()
    },
    end() {
      input.end()
      out += sink.end()
      return take()
    },
    fail: (error) => sink.fail(error),
    get complete() {
      return sink.complete
    },
    assembled: () => sink.answer(),
    truncate: () => sink.truncate()
  }
}

/** The parts a translated provider defines; its chat-completions `response` and `stream` follow from them. */
export const translatedAdapter = (parts: Omit<TranslatedAdapter, "response" | "stream">): TranslatedAdapter => ({
  ...parts,
  response: (bodyText, ctx) => {
    const { completion, usage } = parts.completion(bodyText, ctx)
    return { text: JSON.stringify(completion), usage }
  },
  stream: (ctx) => parts.streamTo(ctx, new ChunkWriter(ctx.model, ctx.includeUsage))
})

/**
 * The `"usage":{…}` object nearest the end of an event's JSON, found without parsing the event (it may be the size of
 * the whole answer): usage objects hold numbers and objects of numbers, so their end is where their braces balance.
 */
export const trailingUsage = (data: string): Record<string, unknown> | undefined => {
  const key = "\"usage\":"
  const at = data.lastIndexOf(key)
  if (at === -1) return undefined
  const start = at + key.length
  if (data[start] !== "{") return undefined
  let depth = 0
  for (let i = start; i < data.length && i < start + 4096; i++) {
    if (data[i] === "{") depth++
    else if (data[i] === "}" && --depth === 0) {
      try {
        return JSON.parse(data.slice(start, i + 1)) as Record<string, unknown>
      } catch {
        return undefined
      }
    }
  }
  return undefined
}

/** A relayed stream's events, parsed (the ones that are not JSON skipped: they were relayed as received). */
export function* parsedEvents<E>(events: Iterable<string>): Generator<E> {
  for (const data of events) {
    try {
      yield JSON.parse(data) as E
    } catch {
      // nothing to assemble from it
    }
  }
}

/** past the capture limit, a relay keeps the last events of at most this size (the answer's end: finish, usage) */
const TAIL_EVENTS = 8
const TAIL_EVENT_CHARS = 64 * 1024

/**
 * A stream relayed to a caller who speaks the provider's own API: each decoded event is written on as it arrives
 * (`relay` calls `emit`) and kept as text (`keep`), to be parsed only when the capture asks for the answer. Past the
 * capture limit (`truncate`) only the last few small events are kept after those already kept.
 */
export abstract class EventRelay implements StreamTranslator {
  protected readonly events: Array<string> = []
  /** the events kept after `truncate`, newest last */
  protected tail: Array<string> | undefined
  private readonly input: EventDecoder
  private out = ""
  complete = false

  constructor(decoder: (onEvent: (event: string, data: string) => void) => EventDecoder) {
    this.input = decoder((event, data) => this.relay(event, data))
  }

  /** one decoded event: what to write on (`emit`), keep (`events`) and whether the answer is complete */
  protected abstract relay(event: string, data: string): void

  protected emit(frames: string): void {
    this.out += frames
  }

  protected keep(...data: ReadonlyArray<string>): void {
    if (this.tail === undefined) {
      this.events.push(...data)
      return
    }
    for (const event of data) {
      const kept = event.length <= TAIL_EVENT_CHARS ? event : this.oversized(event)
      if (kept !== undefined) this.tail.push(kept)
    }
    if (this.tail.length > TAIL_EVENTS) this.tail.splice(0, this.tail.length - TAIL_EVENTS)
  }

  /**
   * Past the capture limit, an event too large to keep (a final event repeating the whole answer): what to keep of it
   * instead, if anything. Nothing by default.
   */
  protected oversized(_data: string): string | undefined {
    return undefined
  }

  /** every event kept, in order */
  protected kept(): ReadonlyArray<string> {
    return this.tail === undefined ? this.events : [...this.events, ...this.tail]
  }

  truncate(): void {
    this.tail ??= []
  }

  private take(): string {
    const text = this.out
    this.out = ""
    return text
  }

  push(bytes: Uint8Array): string {
    this.input.push(bytes)
    return this.take()
  }

  end(): string {
    this.input.end()
    this.ended()
    return this.take()
  }

  /** the upstream ended, after its last event: a relay may add closing frames (`emit`) */
  protected ended(): void {}

  abstract fail(error: ProviderError): string
  abstract assembled(): StreamAnswer
}

/**
 * A provider reached by translation from chat completions (Anthropic, Gemini, Bedrock). Other surfaces reach it
 * through the chat form: they write its stream to a sink of their own and read its whole answer as a completion.
 */
export interface TranslatedAdapter extends ProviderAdapter<ChatRequest> {
  /** the provider's stream, written to `sink` */
  streamTo(ctx: CallContext, sink: AnswerSink): StreamTranslator
  /** a successful non-streamed answer as a chat completion; may throw on a body that is not the provider's JSON */
  completion(bodyText: string, ctx: CallContext): { readonly completion: ChatCompletion; readonly usage: Usage | null }
}
