/**
 * Anthropic Messages API (`POST {base}/v1/messages`), translated both ways from chat completions (and, through the
 * chat form, from the other surfaces: bridge.ts).
 */
import { type AnthropicUsage, fromAnthropicUsage, mergeAnthropicUsage } from "../domain/usage.ts"
import {
  type ChatMessage,
  type ChatRequest,
  type FinishReason,
  maxTokensOf,
  parseArguments,
  parseDataUrl,
  stopSequencesOf,
  systemTexts,
  type ToolChoice
} from "./chatCompletions.ts"
import { fallbackMessage, parseJsonBody, providerError } from "./errors.ts"
import { SseDecoder } from "./sse.ts"
import { type AnswerSink, CompletionAssembler, translatedAdapter, translatedStream, type TranslatedAdapter } from "./stream.ts"
import { type BlockWriter, toTurns } from "./turns.ts"
import type { CallContext, ProviderError, StreamTranslator } from "./types.ts"

export const ANTHROPIC_VERSION = "2023-06-01"
/** Anthropic requires max_tokens; chat-completions callers often leave it out. */
export const DEFAULT_MAX_TOKENS = 4096

type Block =
  | { type: "text"; text: string }
  | { type: "image"; source: { type: "base64"; media_type: string; data: string } | { type: "url"; url: string } }
  | { type: "tool_use"; id: string; name: string; input: object }
  | { type: "tool_result"; tool_use_id: string; content: string }
  | { type: "thinking"; thinking: string; signature: string }

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
  toolResult: (callId, _name, text) => ({ type: "tool_result", tool_use_id: callId, content: text }),
  reasoning: (thinking, signature) => ({ type: "thinking", thinking, signature })
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

/** Thinking budget (tokens) for a reasoning effort; Anthropic's minimum is 1024. */
const THINKING_BUDGET: Record<string, number> = { minimal: 1024, low: 2048, medium: 8192, high: 16_384, xhigh: 32_768, max: 32_768 }

/**
 * Extended thinking for a request that asks for reasoning, where Anthropic allows it: not with a forced tool choice,
 * and not when the assistant turn being continued issued tool calls without the signed thinking it came with
 * (Anthropic refuses a tool loop whose thinking was dropped).
 */
export const thinkingBudget = (request: ChatRequest): number | undefined => {
  const budget = THINKING_BUDGET[request.reasoning_effort ?? ""]
  const forcedTool = request.tool_choice === "required" || typeof request.tool_choice === "object"
  if (budget === undefined || (forcedTool && request.tools?.length)) return undefined
  const last: ChatMessage | undefined = request.messages.findLast((message) => message.role === "assistant")
  if (last?.tool_calls?.length && !last.reasoning_signature) return undefined
  return budget
}

const requestBody = (request: ChatRequest, ctx: CallContext): Record<string, unknown> => {
  const maxTokens = maxTokensOf(request)
  const body: Record<string, unknown> = {
    model: ctx.model,
    max_tokens: maxTokens ?? DEFAULT_MAX_TOKENS,
    messages: toTurns(request.messages, blocks).map((turn) => ({ role: turn.role, content: turn.blocks }))
  }
  const system = systemTexts(request.messages)
  if (system.length > 0) body.system = system.join("\n\n")
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
  const budget = thinkingBudget(request)
  if (budget !== undefined) {
    // the budget is part of max_tokens, and thinking takes no sampling parameters
    body.thinking = { type: "enabled", budget_tokens: budget }
    if (maxTokens === undefined || maxTokens <= budget) body.max_tokens = budget + (maxTokens ?? DEFAULT_MAX_TOKENS)
  } else {
    if (request.temperature != null) body.temperature = request.temperature
    if (request.top_p != null) body.top_p = request.top_p
  }
  if (request.user) body.metadata = { user_id: request.user }
  if (ctx.stream) body.stream = true
  return body
}

export const finishReason = (stopReason: string | null | undefined): FinishReason | null => {
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

type ResponseBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature?: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: string }

interface MessageResponse {
  id: string
  model: string
  content: Array<ResponseBlock>
  stop_reason: string | null
  usage: AnthropicUsage
}

const completion = (bodyText: string, ctx: CallContext) => {
  const message = JSON.parse(bodyText) as MessageResponse
  const answer = new CompletionAssembler(message.model ?? ctx.model)
  if (message.id) answer.id = message.id
  let tools = 0
  for (const block of message.content ?? []) {
    if (block.type === "text") answer.add(0, { content: (block as { text: string }).text }, undefined)
    else if (block.type === "thinking") {
      const thinking = block as { thinking: string; signature?: string }
      answer.add(0, { reasoning_content: thinking.thinking, reasoning_signature: thinking.signature ?? null }, undefined)
    } else if (block.type === "tool_use") {
      const call = block as { id: string; name: string; input: unknown }
      answer.add(0, { tool_calls: [{ index: tools++, id: call.id, function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) } }] }, undefined)
    }
  }
  answer.add(0, undefined, finishReason(message.stop_reason))
  answer.usage = fromAnthropicUsage(message.usage)
  return { completion: answer.completion(), usage: answer.usage }
}

/** Mid-stream error events carry only the error type; the status it would have had. */
export const STATUS_BY_TYPE: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529
}

/** An Anthropic error body → a provider error that keeps the body itself, for callers that speak Messages. */
export const anthropicError = (status: number, bodyText: string): ProviderError => {
  const body = parseJsonBody(bodyText)
  const error = body?.error as { type?: string; message?: string } | undefined
  const mapped = error && typeof error === "object" && typeof error.message === "string"
    ? providerError(status, error.message, error.type ?? undefined, error.type ?? null)
    : providerError(status, fallbackMessage(status, body, bodyText))
  return body?.type === "error" ? { ...mapped, raw: bodyText } : mapped
}

interface StreamEvent {
  type: string
  index: number
  message?: { id?: string; model?: string; usage?: AnthropicUsage }
  content_block?: { type: string; id: string; name: string; text?: string }
  delta?: { type?: string; text: string; thinking: string; signature: string; partial_json: string; stop_reason?: string | null }
  usage?: AnthropicUsage
  error?: { type?: string }
}

/**
 * message_start → start; content_block_start (tool_use) → tool call with its id and name; content_block_delta →
 * text / reasoning (and its signature) / tool argument pieces; message_delta → finish reason and final usage.
 */
const streamTo = (_ctx: CallContext, sink: AnswerSink): StreamTranslator => {
  const usage: AnthropicUsage = {}
  /** tool-call index of each tool_use content block, by block index */
  const toolIndex: Array<number> = []
  let tools = 0
  const mergeUsage = (raw: AnthropicUsage | undefined): void => {
    mergeAnthropicUsage(usage, raw)
    const normalised = fromAnthropicUsage(usage)
    if (normalised) sink.usage(normalised)
  }
  return translatedStream(sink, (onEvent) => new SseDecoder(onEvent), (_event, data) => {
    const event = JSON.parse(data) as StreamEvent
    switch (event.type) {
      case "message_start":
        mergeUsage(event.message?.usage)
        return sink.start(event.message?.id, event.message?.model)
      case "content_block_start": {
        const block = event.content_block
        if (block?.type === "tool_use") {
          toolIndex[event.index] = tools
          return sink.toolCall(tools++, block.id, block.name, "")
        }
        if (block?.type === "text") return sink.text(block.text ?? "")
        return ""
      }
      case "content_block_delta": {
        const delta = event.delta
        switch (delta?.type) {
          case "text_delta":
            return sink.text(delta.text)
          case "thinking_delta":
            return sink.reasoning(delta.thinking)
          case "signature_delta":
            return sink.reasoningSignature(delta.signature)
          case "input_json_delta": {
            const index = toolIndex[event.index]
            return index === undefined ? "" : sink.toolArguments(index, delta.partial_json)
          }
          default: // citations_delta
            return ""
        }
      }
      case "message_delta": {
        mergeUsage(event.usage)
        const reason = finishReason(event.delta?.stop_reason)
        return reason ? sink.finish(reason) : ""
      }
      case "error": {
        return sink.fail(anthropicError(STATUS_BY_TYPE[event.error?.type ?? ""] ?? 500, data))
      }
      default: // ping, content_block_stop, message_stop
        return ""
    }
  })
}

export const anthropic: TranslatedAdapter = translatedAdapter({
  prepare(request, ctx) {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "text/event-stream" : "application/json",
      "anthropic-version": ANTHROPIC_VERSION
    }
    if (ctx.apiKey) headers["x-api-key"] = ctx.apiKey
    return { url: `${ctx.baseUrl}/v1/messages`, headers, body: JSON.stringify(requestBody(request, ctx)) }
  },
  completion,
  streamTo,
  error: anthropicError
})
