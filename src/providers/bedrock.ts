/**
 * Amazon Bedrock Converse API (`{base}/model/{modelId}/converse`, `/converse-stream`) with a Bedrock API key
 * as bearer token, translated both ways. ConverseStream answers in the AWS event-stream binary framing.
 */
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { type Usage, usageFrom } from "../domain/usage.ts"
import {
  type ChatRequest,
  type FinishReason,
  maxTokensOf,
  parseArguments,
  parseDataUrl,
  stopSequencesOf,
  systemTexts,
  type ToolChoice
} from "./chatCompletions.ts"
import { DEFAULT_MAX_TOKENS, thinkingBudget } from "./anthropic.ts"
import { errorTypeFor, fallbackMessage, parseJsonBody, providerError } from "./errors.ts"
import { type AnswerSink, CompletionAssembler, type EventDecoder, translatedAdapter, translatedStream, type TranslatedAdapter } from "./stream.ts"
import { type BlockWriter, toTurns } from "./turns.ts"
import { type CallContext, type ProviderError, type StreamTranslator, UnsupportedRequest } from "./types.ts"

const utf8Decoder = new TextDecoder()
const utf8Encoder = new TextEncoder()
const toUtf8 = (input: Uint8Array | string): string => typeof input === "string" ? input : utf8Decoder.decode(input)
const fromUtf8 = (input: string): Uint8Array => utf8Encoder.encode(input)

/** Decodes one complete event-stream message (framing is done by EventStreamDecoder). */
const eventStreamCodec = new EventStreamCodec(toUtf8, fromUtf8)

type Block =
  | { text: string }
  | { image: { format: string; source: { bytes: string } } }
  | { toolUse: { toolUseId: string; name: string; input: object } }
  | { toolResult: { toolUseId: string; content: Array<{ text: string }> } }
  | { reasoningContent: { reasoningText: { text: string; signature: string } } }

const IMAGE_FORMATS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
  "image/gif": "gif",
  "image/webp": "webp"
}

const blocks: BlockWriter<Block> = {
  provider: "bedrock",
  text: (text) => ({ text }),
  image: (url, param) => {
    const inline = parseDataUrl(url)
    if (!inline) throw new UnsupportedRequest("bedrock takes images as base64 data: URLs only", param)
    const format = IMAGE_FORMATS[inline.mediaType]
    if (!format) throw new UnsupportedRequest(`bedrock does not take images of type ${inline.mediaType}`, param)
    return { image: { format, source: { bytes: inline.base64 } } }
  },
  toolCall: (call) => ({
    toolUse: { toolUseId: call.id, name: call.function.name, input: parseArguments(call.function.arguments) }
  }),
  toolResult: (callId, _name, text) => ({ toolResult: { toolUseId: callId, content: [{ text }] } }),
  reasoning: (text, signature) => ({ reasoningContent: { reasoningText: { text, signature } } })
}

/** Bedrock has no "none": the tools stay declared (tool blocks in the history require them), without a choice. */
const toolChoice = (choice: ToolChoice | undefined): object | undefined => {
  if (choice === undefined || choice === "none") return undefined
  if (choice === "auto") return { auto: {} }
  if (choice === "required") return { any: {} }
  return { tool: { name: choice.function.name } }
}

/** Anthropic models on Bedrock, by id, inference profile (`us.anthropic.…`) or ARN. */
export const bedrockModelIsClaude = (model: string): boolean => /(?:^|[./])anthropic\./.test(model)

const requestBody = (request: ChatRequest, ctx: CallContext): Record<string, unknown> => {
  const body: Record<string, unknown> = {
    messages: toTurns(request.messages, blocks).map((turn) => ({ role: turn.role, content: turn.blocks }))
  }
  const system = systemTexts(request.messages)
  if (system.length > 0) body.system = system.map((text) => ({ text }))
  const inference: Record<string, unknown> = {}
  const maxTokens = maxTokensOf(request)
  if (maxTokens !== undefined) inference.maxTokens = maxTokens
  const stop = stopSequencesOf(request)
  if (stop) inference.stopSequences = stop
  // Claude on Bedrock thinks through Anthropic's own field; other models have none
  const budget = bedrockModelIsClaude(ctx.model) ? thinkingBudget(request) : undefined
  if (budget !== undefined) {
    body.additionalModelRequestFields = { thinking: { type: "enabled", budget_tokens: budget } }
    if (maxTokens === undefined || maxTokens <= budget) inference.maxTokens = budget + (maxTokens ?? DEFAULT_MAX_TOKENS)
  } else {
    if (request.temperature != null) inference.temperature = request.temperature
    if (request.top_p != null) inference.topP = request.top_p
  }
  if (Object.keys(inference).length > 0) body.inferenceConfig = inference
  if (request.tools && request.tools.length > 0) {
    const choice = toolChoice(request.tool_choice)
    body.toolConfig = {
      tools: request.tools.map((tool) => ({
        toolSpec: {
          name: tool.function.name,
          ...(tool.function.description ? { description: tool.function.description } : {}),
          inputSchema: { json: tool.function.parameters ?? { type: "object", properties: {} } }
        }
      })),
      ...(choice ? { toolChoice: choice } : {})
    }
  }
  return body
}

const finishReason = (stopReason: string | undefined): FinishReason | null => {
  switch (stopReason) {
    case undefined:
      return null
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "content_filtered":
    case "guardrail_intervened":
      return "content_filter"
    default: // end_turn, stop_sequence
      return "stop"
  }
}

interface BedrockUsage {
  inputTokens?: number
  outputTokens?: number
  cacheReadInputTokens?: number
  cacheWriteInputTokens?: number
}

const toUsage = (raw: BedrockUsage): Usage =>
  usageFrom({
    input: raw.inputTokens ?? 0,
    output: raw.outputTokens ?? 0,
    cacheRead: raw.cacheReadInputTokens,
    cacheWrite: raw.cacheWriteInputTokens
  })

interface ConverseResponse {
  output?: {
    message?: {
      content?: Array<{
        text?: string
        toolUse?: { toolUseId: string; name: string; input?: unknown }
        reasoningContent?: { reasoningText?: { text?: string; signature?: string } }
      }>
    }
  }
  stopReason?: string
  usage?: BedrockUsage
}

const completion = (bodyText: string, ctx: CallContext) => {
  const converse = JSON.parse(bodyText) as ConverseResponse
  const answer = new CompletionAssembler(ctx.model)
  let tools = 0
  for (const block of converse.output?.message?.content ?? []) {
    if (block.text !== undefined) answer.add(0, { content: block.text }, undefined)
    else if (block.reasoningContent?.reasoningText?.text) {
      const reasoning = block.reasoningContent.reasoningText
      answer.add(0, { reasoning_content: reasoning.text ?? null, reasoning_signature: reasoning.signature ?? null }, undefined)
    } else if (block.toolUse) {
      const call = block.toolUse
      answer.add(0, { tool_calls: [{ index: tools++, id: call.toolUseId, function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) } }] }, undefined)
    }
  }
  answer.add(0, undefined, finishReason(converse.stopReason))
  answer.usage = converse.usage ? toUsage(converse.usage) : null
  return { completion: answer.completion(), usage: answer.usage }
}

/** Exception events carry their type, not a status: the status the same error has as a response. */
const STATUS_BY_EXCEPTION: Record<string, number> = {
  validationException: 400,
  accessDeniedException: 403,
  resourceNotFoundException: 404,
  modelTimeoutException: 408,
  modelStreamErrorException: 424,
  throttlingException: 429,
  internalServerException: 500,
  serviceUnavailableException: 503
}

/** `ThrottlingException`, from `ThrottlingException:http://…` (the header) or `com.amazon.coral#ThrottlingException` (`__type`). */
const exceptionName = (value: string) => {
  const colon = value.indexOf(":")
  const name = colon === -1 ? value : value.slice(0, colon)
  return name.slice(name.lastIndexOf("#") + 1) || null
}

/**
 * `{"message": ...}`; the error type as Bedrock names it: the `x-amzn-errortype` header of HTTP errors (where the
 * AWS SDKs read it), `__type` in the body, or the exception type of a stream event.
 */
const bedrockError = (status: number, bodyText: string, type?: string): ProviderError => {
  const body = parseJsonBody(bodyText)
  const message = body?.message ?? body?.Message
  const code = type ?? (typeof body?.__type === "string" ? exceptionName(body.__type) : null)
  return providerError(
    status,
    typeof message === "string" && message ? message : fallbackMessage(status, body, bodyText),
    errorTypeFor(status),
    code
  )
}

/**
 * Splits the AWS event-stream (length-prefixed, CRC-checked binary messages) into events. Exceptions are
 * reported under their exception type (e.g. `throttlingException`); a broken frame stops decoding with an `error`.
 */
export class EventStreamDecoder implements EventDecoder {
  private readonly onEvent: (event: string, data: string) => void
  private buffer: Uint8Array = new Uint8Array(0)
  private broken = false

  constructor(onEvent: (event: string, data: string) => void) {
    this.onEvent = onEvent
  }

  push(bytes: Uint8Array): void {
    if (this.broken) return
    let buffer = bytes
    if (this.buffer.length > 0) {
      buffer = new Uint8Array(this.buffer.length + bytes.length)
      buffer.set(this.buffer)
      buffer.set(bytes, this.buffer.length)
    }
    let offset = 0
    while (buffer.length - offset >= 4) {
      const length = new DataView(buffer.buffer, buffer.byteOffset + offset, 4).getUint32(0)
      if (buffer.length - offset < length) break
      try {
        this.dispatch(eventStreamCodec.decode(buffer.subarray(offset, offset + length)))
      } catch (cause) {
        this.broken = true
        this.onEvent("error", JSON.stringify({ message: `unreadable event-stream frame: ${String(cause)}` }))
        return
      }
      offset += length
    }
    // keep the partial frame; copied, so the caller's chunk can be released
    this.buffer = buffer.slice(offset)
  }

  end(): void {
    // an incomplete trailing frame means the upstream was cut; the assembled answer shows no finish reason
  }

  private dispatch(message: ReturnType<EventStreamCodec["decode"]>): void {
    const header = (name: string): string => String(message.headers[name]?.value ?? "")
    switch (header(":message-type")) {
      case "event":
        return this.onEvent(header(":event-type"), toUtf8(message.body))
      case "exception":
        return this.onEvent(header(":exception-type"), toUtf8(message.body))
      case "error":
        return this.onEvent("error", JSON.stringify({ message: header(":error-message"), __type: header(":error-code") }))
    }
  }
}

interface StreamEvent {
  contentBlockIndex: number
  start?: { toolUse?: { toolUseId: string; name: string } }
  delta?: { text?: string; toolUse?: { input?: string }; reasoningContent?: { text?: string; signature?: string } }
  stopReason?: string
  usage?: BedrockUsage
}

const streamTo = (_ctx: CallContext, writer: AnswerSink): StreamTranslator => {
  /** tool-call index of each toolUse content block, by block index */
  const toolIndex: Array<number> = []
  let tools = 0
  return translatedStream(writer, (onEvent) => new EventStreamDecoder(onEvent), (name, data) => {
    switch (name) {
      case "messageStart":
        return writer.start()
      case "contentBlockStart": {
        const event = JSON.parse(data) as StreamEvent
        const toolUse = event.start?.toolUse
        if (!toolUse) return ""
        toolIndex[event.contentBlockIndex] = tools
        return writer.toolCall(tools++, toolUse.toolUseId, toolUse.name, "")
      }
      case "contentBlockDelta": {
        const event = JSON.parse(data) as StreamEvent
        const delta = event.delta
        if (delta?.text !== undefined) return writer.text(delta.text)
        if (delta?.reasoningContent?.text) return writer.reasoning(delta.reasoningContent.text)
        if (delta?.reasoningContent?.signature) return writer.reasoningSignature(delta.reasoningContent.signature)
        const index = toolIndex[event.contentBlockIndex]
        if (delta?.toolUse?.input && index !== undefined) return writer.toolArguments(index, delta.toolUse.input)
        return ""
      }
      case "messageStop": {
        const reason = finishReason((JSON.parse(data) as StreamEvent).stopReason)
        return reason ? writer.finish(reason) : ""
      }
      case "metadata": {
        const usage = (JSON.parse(data) as StreamEvent).usage
        if (usage) writer.usage(toUsage(usage))
        return ""
      }
      case "error":
        return writer.fail(bedrockError(500, data))
      default: // an exception (named by its type); events added to the API later are skipped
        return name.endsWith("Exception") ? writer.fail(bedrockError(STATUS_BY_EXCEPTION[name] ?? 500, data, name)) : ""
    }
  })
}

export const bedrock: TranslatedAdapter = translatedAdapter({
  prepare(request, ctx) {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "application/vnd.amazon.eventstream" : "application/json"
    }
    if (ctx.apiKey) headers.authorization = `Bearer ${ctx.apiKey}`
    const operation = ctx.stream ? "converse-stream" : "converse"
    return {
      url: `${ctx.baseUrl}/model/${encodeURIComponent(ctx.model)}/${operation}`,
      headers,
      body: JSON.stringify(requestBody(request, ctx))
    }
  },
  completion,
  streamTo,
  error: (status, bodyText, headers) => {
    const header = headers?.["x-amzn-errortype"]
    return bedrockError(status, bodyText, typeof header === "string" ? exceptionName(header) ?? undefined : undefined)
  }
})
