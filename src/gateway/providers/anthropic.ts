/**
 * Anthropic Messages API (`POST {base}/v1/messages`), translated both ways.
 */
import type { Usage } from "../../domain/capture.ts"
import {
  type ChatRequest,
  type FinishReason,
  maxTokensOf,
  parseArguments,
  parseDataUrl,
  stopSequencesOf,
  systemTexts,
  type ToolChoice,
  usageFrom
} from "./chat.ts"
import { fallbackMessage, parseJsonBody, providerError } from "./errors.ts"
import { SseDecoder } from "./sse.ts"
import { ChunkWriter, CompletionAssembler, translatedStream } from "./stream.ts"
import { type BlockWriter, toTurns } from "./turns.ts"
import type { Answer, CallContext, ProviderAdapter, ProviderError, StreamTranslator } from "./types.ts"

const API_VERSION = "2023-06-01"
/** Anthropic requires max_tokens; chat-completions callers often leave it out. */
const DEFAULT_MAX_TOKENS = 4096

type Block =
  | { type: "text"; text: string }
  | { type: "image"; source: { type: "base64"; media_type: string; data: string } | { type: "url"; url: string } }
  | { type: "tool_use"; id: string; name: string; input: object }
  | { type: "tool_result"; tool_use_id: string; content: string }

const blocks: BlockWriter<Block> = {
  provider: "anthropic",
  text: (text) => ({ type: "text", text }),
  image: (url) => {
    const inline = parseDataUrl(url)
    return {
      type: "image",
      source: inline ? { type: "base64", media_type: inline.mediaType, data: inline.base64 } : { type: "url", url }
    }
  },
  toolCall: (call) => ({ type: "tool_use", id: call.id, name: call.function.name, input: parseArguments(call.function.arguments) }),
  toolResult: (callId, _name, text) => ({ type: "tool_result", tool_use_id: callId, content: text })
}

const toolChoice = (choice: ToolChoice | undefined, parallel: boolean | undefined): object | undefined => {
  const base = choice === undefined || choice === "auto"
    ? { type: "auto" }
    : choice === "required"
    ? { type: "any" }
    : choice === "none"
    ? { type: "none" }
    : { type: "tool", name: choice.function.name }
  if (parallel === false && base.type !== "none") return { ...base, disable_parallel_tool_use: true }
  return choice === undefined ? undefined : base
}

const requestBody = (request: ChatRequest, ctx: CallContext): Record<string, unknown> => {
  const body: Record<string, unknown> = {
    model: ctx.model,
    max_tokens: maxTokensOf(request) ?? DEFAULT_MAX_TOKENS,
    messages: toTurns(request.messages, blocks).map((turn) => ({ role: turn.role, content: turn.blocks }))
  }
  const system = systemTexts(request.messages)
  if (system.length > 0) body.system = system.join("\n\n")
  if (request.temperature != null) body.temperature = request.temperature
  if (request.top_p != null) body.top_p = request.top_p
  const stop = stopSequencesOf(request)
  if (stop) body.stop_sequences = stop
  if (request.tools && request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description ? { description: tool.function.description } : {}),
      input_schema: tool.function.parameters ?? { type: "object", properties: {} }
    }))
    const choice = toolChoice(request.tool_choice, request.parallel_tool_calls)
    if (choice) body.tool_choice = choice
  }
  if (request.user) body.metadata = { user_id: request.user }
  if (ctx.stream) body.stream = true
  return body
}

const finishReason = (stopReason: string | null | undefined): FinishReason | null => {
  switch (stopReason) {
    case undefined:
    case null:
      return null
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
    default: // end_turn, stop_sequence, pause_turn
      return "stop"
  }
}

interface AnthropicUsage {
  input_tokens?: number | null
  output_tokens?: number | null
  cache_read_input_tokens?: number | null
  cache_creation_input_tokens?: number | null
}

const toUsage = (raw: AnthropicUsage): Usage =>
  usageFrom({
    input: raw.input_tokens ?? 0,
    output: raw.output_tokens ?? 0,
    cacheRead: raw.cache_read_input_tokens ?? undefined,
    cacheWrite: raw.cache_creation_input_tokens ?? undefined
  })

type ResponseBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: string }

interface MessageResponse {
  id: string
  model: string
  content: Array<ResponseBlock>
  stop_reason: string | null
  usage: AnthropicUsage
}

const response = (bodyText: string, ctx: CallContext): Answer => {
  const message = JSON.parse(bodyText) as MessageResponse
  const answer = new CompletionAssembler(message.model ?? ctx.model)
  if (message.id) answer.id = message.id
  let tools = 0
  for (const block of message.content ?? []) {
    if (block.type === "text") answer.add(0, { content: (block as { text: string }).text }, undefined)
    else if (block.type === "thinking") answer.add(0, { reasoning_content: (block as { thinking: string }).thinking }, undefined)
    else if (block.type === "tool_use") {
      const call = block as { id: string; name: string; input: unknown }
      answer.add(0, { tool_calls: [{ index: tools++, id: call.id, function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) } }] }, undefined)
    }
  }
  answer.add(0, undefined, finishReason(message.stop_reason))
  answer.usage = message.usage ? toUsage(message.usage) : null
  return { text: JSON.stringify(answer.completion()), usage: answer.usage }
}

/** Mid-stream error events carry only the error type; the status it would have had. */
const STATUS_BY_TYPE: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529
}

const anthropicError = (status: number, bodyText: string): ProviderError => {
  const body = parseJsonBody(bodyText)
  const error = body?.error as { type?: string; message?: string } | undefined
  if (error && typeof error === "object" && typeof error.message === "string") {
    return providerError(status, error.message, error.type ?? undefined, error.type ?? null)
  }
  return providerError(status, fallbackMessage(status, body, bodyText))
}

interface StreamEvent {
  type: string
  index: number
  message?: { id?: string; model?: string; usage?: AnthropicUsage }
  content_block?: { type: string; id: string; name: string; text?: string }
  delta?: { type?: string; text: string; thinking: string; partial_json: string; stop_reason?: string | null }
  usage?: AnthropicUsage
  error?: { type?: string }
}

/**
 * message_start → role chunk; content_block_start (tool_use) → tool call with its id and name;
 * content_block_delta → text / reasoning / tool argument chunks; message_delta → finish reason and final usage.
 */
const stream = (ctx: CallContext): StreamTranslator => {
  const writer = new ChunkWriter(ctx.model, ctx.includeUsage)
  const usage: AnthropicUsage = {}
  /** tool-call index of each tool_use content block, by block index */
  const toolIndex: Array<number> = []
  let tools = 0
  const mergeUsage = (raw: AnthropicUsage | undefined): void => {
    if (!raw) return
    for (const key of Object.keys(raw) as Array<keyof AnthropicUsage>) if (raw[key] != null) usage[key] = raw[key]
    writer.usage(toUsage(usage))
  }
  return translatedStream(writer, (onEvent) => new SseDecoder(onEvent), (_event, data) => {
    const event = JSON.parse(data) as StreamEvent
    switch (event.type) {
      case "message_start":
        mergeUsage(event.message?.usage)
        return writer.start(event.message?.id, event.message?.model)
      case "content_block_start": {
        const block = event.content_block
        if (block?.type === "tool_use") {
          toolIndex[event.index] = tools
          return writer.toolCall(tools++, block.id, block.name, "")
        }
        if (block?.type === "text") return writer.text(block.text ?? "")
        return ""
      }
      case "content_block_delta": {
        const delta = event.delta
        switch (delta?.type) {
          case "text_delta":
            return writer.text(delta.text)
          case "thinking_delta":
            return writer.reasoning(delta.thinking)
          case "input_json_delta": {
            const index = toolIndex[event.index]
            return index === undefined ? "" : writer.toolArguments(index, delta.partial_json)
          }
          default: // signature_delta, citations_delta
            return ""
        }
      }
      case "message_delta": {
        mergeUsage(event.usage)
        const reason = finishReason(event.delta?.stop_reason)
        return reason ? writer.finish(reason) : ""
      }
      case "error": {
        return writer.fail(anthropicError(STATUS_BY_TYPE[event.error?.type ?? ""] ?? 500, data))
      }
      default: // ping, content_block_stop, message_stop
        return ""
    }
  })
}

export const anthropic: ProviderAdapter = {
  prepare(request, ctx) {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "text/event-stream" : "application/json",
      "anthropic-version": API_VERSION
    }
    if (ctx.apiKey) headers["x-api-key"] = ctx.apiKey
    return { url: `${ctx.baseUrl}/v1/messages`, headers, body: JSON.stringify(requestBody(request, ctx)) }
  },
  response,
  stream,
  error: anthropicError
}
