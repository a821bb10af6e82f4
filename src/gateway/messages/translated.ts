/**
 * Messages for providers that do not speak it (Gemini, Bedrock's other models, the OpenAI family): the request is
 * read into the chat form the gateway translates to every provider, and the answer — whole, or streamed through
 * `MessagesSink` — is written back as a Message with Anthropic's events.
 */
import { type Usage } from "../../domain/usage.ts"
import type { ChatCompletion, ChatMessage, ChatRequest, ContentPart, FinishReason, ToolCall, ToolChoice } from "../../providers/chatCompletions.ts"
import { UnsupportedRequest } from "../../providers/index.ts"
import { type AnswerSink, AssemblingSink } from "../../providers/stream.ts"
import type { CallContext, ProviderError, StreamAnswer } from "../../providers/types.ts"
import { anthropicErrorBody } from "./errors.ts"
import { messagesEvent } from "./relay.ts"
import type { ContentBlock, MessagesRequest } from "./request.ts"

// --- request -------------------------------------------------------------------------------------------------

const textOfBlocks = (content: string | ReadonlyArray<ContentBlock> | undefined): string =>
  typeof content === "string"
    ? content
    : (content ?? []).map((block) => (block.type === "text" ? String((block as { text: string }).text) : "")).join("")

/** `thinking.budget_tokens`, or the effort Claude Code states, as a chat reasoning effort. */
const reasoningEffort = (request: MessagesRequest): string | undefined => {
  const effort = request.output_config?.effort
  if (request.thinking?.type === "disabled") return undefined
  if (effort !== undefined) return effort
  const budget = request.thinking?.budget_tokens
  if (request.thinking?.type === "enabled" && budget !== undefined) return budget <= 2048 ? "low" : budget <= 8192 ? "medium" : "high"
  return request.thinking?.type === "adaptive" ? "medium" : undefined
}

const toolChoice = (choice: MessagesRequest["tool_choice"]): ToolChoice | undefined => {
  switch (choice?.type) {
    case "auto":
      return "auto"
    case "any":
      return "required"
    case "none":
      return "none"
    case "tool":
      return { type: "function", function: { name: choice.name ?? "" } }
    default:
      return undefined
  }
}

/** One Messages turn as chat messages: an assistant's reasoning, text and tool calls; a user's text, images and tool results. */
const toChatMessages = (role: string, content: string | ReadonlyArray<ContentBlock>, index: number): Array<ChatMessage> => {
  if (typeof content === "string") return [{ role, content }]
  const parts: Array<ContentPart> = []
  const toolCalls: Array<ToolCall> = []
  const results: Array<ChatMessage> = []
  let reasoning = ""
  let signature = ""
  content.forEach((block, j) => {
    const param = `messages[${index}].content[${j}]`
    switch (block.type) {
      case "text":
        parts.push({ type: "text", text: String((block as { text: string }).text) })
        return
      case "image": {
        const source = (block as Extract<ContentBlock, { type: "image" }>).source
        const url = source.type === "base64" ? `data:${source.media_type};base64,${source.data}` : source.url
        parts.push({ type: "image_url", image_url: { url } })
        return
      }
      case "tool_use": {
        const call = block as Extract<ContentBlock, { type: "tool_use" }>
        toolCalls.push({ id: call.id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) } })
        return
      }
      case "tool_result": {
        const result = block as Extract<ContentBlock, { type: "tool_result" }>
        results.push({ role: "tool", tool_call_id: result.tool_use_id, content: textOfBlocks(result.content) })
        return
      }
      case "thinking": {
        const thinking = block as Extract<ContentBlock, { type: "thinking" }>
        reasoning += thinking.thinking
        if (thinking.signature) signature = thinking.signature
        return
      }
      case "redacted_thinking":
        return // only Anthropic can read it
      case "document":
        throw new UnsupportedRequest(`content block type "document" is not supported for this provider`, `${param}.type`)
      default:
        // server tools' calls and results ran at Anthropic; what they said is text to this provider
        parts.push({ type: "text", text: JSON.stringify(block) })
    }
  })
  const messages: Array<ChatMessage> = [...results]
  if (parts.length > 0 || toolCalls.length > 0 || reasoning !== "") {
    messages.push({
      role,
      content: parts.length === 0 ? null : parts,
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      ...(reasoning !== "" ? { reasoning_content: reasoning } : {}),
      ...(signature !== "" ? { reasoning_signature: signature } : {})
    })
  }
  return messages
}

/** A Messages request in the chat form. Throws `UnsupportedRequest` for what the chat form cannot carry. */
export const messagesToChat = (request: MessagesRequest, ctx: CallContext): ChatRequest => {
  const messages: Array<ChatMessage> = []
  const system = typeof request.system === "string" ? request.system : textOfBlocks(request.system as ReadonlyArray<ContentBlock> | undefined)
  if (system) messages.push({ role: "system", content: system })
  request.messages.forEach((message, i) => messages.push(...toChatMessages(message.role, message.content, i)))
  const tools = (request.tools ?? []).filter((tool) => tool.type === undefined || tool.type === "custom")
  const effort = reasoningEffort(request)
  const choice = toolChoice(request.tool_choice)
  return {
    model: ctx.model,
    messages,
    ...(request.max_tokens !== undefined ? { max_tokens: request.max_tokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.top_p !== undefined ? { top_p: request.top_p } : {}),
    ...(request.stop_sequences !== undefined ? { stop: request.stop_sequences } : {}),
    ...(tools.length > 0
      ? {
        tools: tools.map((tool) => ({
          type: "function" as const,
          function: { name: tool.name, ...(tool.description ? { description: tool.description } : {}), parameters: tool.input_schema ?? { type: "object" } }
        }))
      }
      : {}),
    ...(choice !== undefined ? { tool_choice: choice } : {}),
    ...(request.tool_choice?.disable_parallel_tool_use ? { parallel_tool_calls: false } : {}),
    ...(effort !== undefined ? { reasoning_effort: effort } : {}),
    ...(request.metadata?.user_id ? { user: request.metadata.user_id } : {}),
    ...(ctx.stream ? { stream: true } : {})
  }
}

// --- answer --------------------------------------------------------------------------------------------------

const STOP_REASONS: Record<FinishReason, string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  function_call: "tool_use",
  content_filter: "refusal"
}

/** Usage in Anthropic's terms: input without the cache reads and writes. */
const anthropicUsage = (usage: Usage | null) => ({
  input_tokens: usage === null ? 0 : usage.prompt_tokens - (usage.cached_tokens ?? 0) - (usage.cache_write_tokens ?? 0),
  output_tokens: usage?.completion_tokens ?? 0,
  cache_read_input_tokens: usage?.cached_tokens ?? 0,
  cache_creation_input_tokens: usage?.cache_write_tokens ?? 0
})

/** The id of a translated answer: Anthropic's form, from the decision's id. */
const messageId = (ctx: CallContext, fallback: string): string =>
  ctx.ledgerId === undefined ? fallback : `msg_ldg_${ctx.ledgerId.replaceAll("-", "")}`

/** A chat completion as a Message. */
export const completionToMessage = (completion: ChatCompletion, usage: Usage | null, ctx: CallContext): string => {
  const message = completion.choices[0]?.message
  const content: Array<object> = []
  if (message?.reasoning_content) content.push({ type: "thinking", thinking: message.reasoning_content, signature: message.reasoning_signature ?? "" })
  const text = message?.content ?? message?.refusal ?? ""
  if (text) content.push({ type: "text", text })
  for (const call of message?.tool_calls ?? []) {
    let input: unknown
    try {
      input = JSON.parse(call.function.arguments || "{}")
    } catch {
      input = { arguments: call.function.arguments }
    }
    content.push({ type: "tool_use", id: call.id, name: call.function.name, input })
  }
  const finish = completion.choices[0]?.finish_reason
  return JSON.stringify({
    id: messageId(ctx, completion.id),
    type: "message",
    role: "assistant",
    model: completion.model,
    content,
    stop_reason: finish ? STOP_REASONS[finish] : null,
    stop_sequence: null,
    usage: anthropicUsage(usage)
  })
}

type OpenBlock = { readonly kind: "text" | "thinking" } | { readonly kind: "tool"; readonly call: number }

/**
 * Writes a translated stream as Anthropic events: message_start, one content block per run of text, thinking or a
 * tool call (content_block_start, deltas, content_block_stop), then message_delta with the stop reason and the
 * usage, and message_stop.
 */
export class MessagesSink extends AssemblingSink implements AnswerSink {
  private readonly ctx: CallContext
  private started = false
  private open: OpenBlock | undefined
  private blocks = 0
  /** content block index of each tool call */
  private readonly toolBlocks: Array<number> = []
  constructor(ctx: CallContext) {
    super(ctx.model)
    this.ctx = ctx
  }

  private event(type: string, body: object): string {
    return messagesEvent(type, JSON.stringify({ type, ...body }))
  }

  start(id?: string, model?: string): string {
    if (this.started) return ""
    this.started = true
    if (id) this.assembly.id = id
    if (model) this.assembly.model = model
    return this.event("message_start", {
      message: {
        id: messageId(this.ctx, this.assembly.id),
        type: "message",
        role: "assistant",
        model: this.assembly.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: anthropicUsage(null)
      }
    })
  }

  private close(): string {
    if (this.open === undefined) return ""
    this.open = undefined
    return this.event("content_block_stop", { index: this.blocks - 1 })
  }

  /** Opens a text or thinking block unless one of that kind is open. */
  private block(kind: "text" | "thinking"): string {
    if (this.open?.kind === kind) return ""
    const opening = this.start() + this.close()
    this.open = { kind }
    const block = kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "", signature: "" }
    return opening + this.event("content_block_start", { index: this.blocks++, content_block: block })
  }

  text(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { content: text }, undefined)
    return this.block("text") + this.event("content_block_delta", { index: this.blocks - 1, delta: { type: "text_delta", text } })
  }

  reasoning(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { reasoning_content: text }, undefined)
    return this.block("thinking") + this.event("content_block_delta", { index: this.blocks - 1, delta: { type: "thinking_delta", thinking: text } })
  }

  reasoningSignature(signature: string): string {
    this.assembly.add(0, { reasoning_signature: signature }, undefined)
    return this.block("thinking") + this.event("content_block_delta", { index: this.blocks - 1, delta: { type: "signature_delta", signature } })
  }

  toolCall(index: number, id: string, name: string, args: string, extra?: ToolCall["extra_content"]): string {
    this.assembly.add(0, { tool_calls: [{ index, id, function: { name, arguments: args }, ...(extra ? { extra_content: extra } : {}) }] }, undefined)
    let out = this.start() + this.close()
    this.open = { kind: "tool", call: index }
    this.toolBlocks[index] = this.blocks
    out += this.event("content_block_start", { index: this.blocks++, content_block: { type: "tool_use", id, name, input: {} } })
    if (args) out += this.event("content_block_delta", { index: this.blocks - 1, delta: { type: "input_json_delta", partial_json: args } })
    return out
  }

  toolArguments(index: number, fragment: string): string {
    if (!fragment) return ""
    this.assembly.add(0, { tool_calls: [{ index, function: { arguments: fragment } }] }, undefined)
    const block = this.toolBlocks[index]
    if (block === undefined) return ""
    return this.event("content_block_delta", { index: block, delta: { type: "input_json_delta", partial_json: fragment } })
  }

  fail(error: ProviderError): string {
    this.assembly.error = error
    this.complete = true
    return messagesEvent("error", anthropicErrorBody(error))
  }

  end(): string {
    if (this.complete) return ""
    this.complete = true
    const finish = this.assembly.completion().choices[0]?.finish_reason
    return this.start() + this.close() +
      this.event("message_delta", {
        delta: { stop_reason: finish ? STOP_REASONS[finish] : "end_turn", stop_sequence: null },
        usage: anthropicUsage(this.assembly.usage)
      }) +
      this.event("message_stop", {})
  }

  answer(): StreamAnswer {
    return {
      text: completionToMessage(this.assembly.completion(), this.assembly.usage, this.ctx),
      usage: this.assembly.usage,
      error: this.assembly.error
    }
  }
}
