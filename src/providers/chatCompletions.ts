/**
 * The chat-completions wire format (the gateway's common interface) and the small helpers every adapter
 * shares to read requests and write answers in it. Types cover the fields the adapters read or write;
 * other fields pass through untouched where the provider speaks the same format.
 */
import type { OpenAIUsage, Usage } from "../domain/usage.ts"

export interface ContentPart {
  readonly type: string
  readonly text?: string
  /** assistant `refusal` parts */
  readonly refusal?: string
  readonly image_url?: { readonly url: string; readonly detail?: string }
}

export interface ToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
  /** Gemini's thought signature, in the place Google's own OpenAI-compatible endpoint puts it */
  readonly extra_content?: { readonly google?: { readonly thought_signature?: string } }
}

export interface ChatMessage {
  readonly role: string
  readonly content?: string | ReadonlyArray<ContentPart> | null
  readonly name?: string
  readonly tool_calls?: ReadonlyArray<ToolCall>
  readonly tool_call_id?: string
  /** an assistant turn's reasoning, as the model produced it (sent back where the provider wants it) */
  readonly reasoning_content?: string
  /** the provider's signature of that reasoning (Anthropic thinking): required to send it back */
  readonly reasoning_signature?: string
}

export interface ToolDefinition {
  readonly type: "function"
  readonly function: { readonly name: string; readonly description?: string; readonly parameters?: object }
}

export type ToolChoice = "none" | "auto" | "required" | { readonly type: "function"; readonly function: { readonly name: string } }

export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly stream?: boolean | null
  readonly stream_options?: { readonly include_usage?: boolean } | null
  readonly max_tokens?: number | null
  readonly max_completion_tokens?: number | null
  readonly temperature?: number | null
  readonly top_p?: number | null
  readonly stop?: string | ReadonlyArray<string> | null
  readonly n?: number | null
  readonly seed?: number | null
  readonly presence_penalty?: number | null
  readonly frequency_penalty?: number | null
  readonly user?: string
  readonly tools?: ReadonlyArray<ToolDefinition>
  readonly tool_choice?: ToolChoice
  readonly parallel_tool_calls?: boolean
  readonly response_format?: {
    readonly type: string
    readonly json_schema?: { readonly name?: string; readonly schema?: object }
  }
  /** `low`, `medium`, `high`, ...: the model thinks first (Anthropic thinking, Gemini thinking budget) */
  readonly reasoning_effort?: string | null
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "function_call"

export interface AssistantMessage {
  role: "assistant"
  content: string | null
  refusal: string | null
  tool_calls?: Array<ToolCall>
  /** the model's reasoning where the provider returns it (the field name DeepSeek, vLLM and others use) */
  reasoning_content?: string
  /** the provider's signature of that reasoning (Anthropic thinking) */
  reasoning_signature?: string
}

export interface Choice {
  index: number
  message: AssistantMessage
  finish_reason: FinishReason | null
  logprobs: { content: Array<unknown> } | null
}

export interface ChatCompletion {
  id: string
  object: "chat.completion"
  created: number
  model: string
  choices: Array<Choice>
  usage?: OpenAIUsage | null
}

/** Text of a message content: the string itself, or its text parts joined. */
export const textOf = (content: ChatMessage["content"]): string => {
  if (typeof content === "string") return content
  if (!content) return ""
  let text = ""
  for (const part of content) if (part.type === "text" && part.text) text += part.text
  return text
}

/** The system prompt: every system/developer message, in order (providers take it apart from the turns). */
export const systemTexts = (messages: ReadonlyArray<ChatMessage>): Array<string> => {
  const texts: Array<string> = []
  for (const message of messages) {
    if (message.role !== "system" && message.role !== "developer") continue
    const text = textOf(message.content)
    if (text) texts.push(text)
  }
  return texts
}

export const maxTokensOf = (request: ChatRequest): number | undefined =>
  request.max_completion_tokens ?? request.max_tokens ?? undefined

export const stopSequencesOf = (request: ChatRequest): ReadonlyArray<string> | undefined =>
  request.stop == null ? undefined : typeof request.stop === "string" ? [request.stop] : request.stop

/** Tool-call arguments as an object; providers that take structured input refuse a string. */
export const parseArguments = (args: string): object => {
  if (!args) return {}
  try {
    const value: unknown = JSON.parse(args)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : { value }
  } catch {
    return { arguments: args }
  }
}

/** A tool result as the object Gemini requires: JSON objects as they are, anything else wrapped. */
export const resultObject = (text: string): object => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value
  } catch {
    // plain text result
  }
  return { result: text }
}

/** Names of the tool calls the assistant issued, by id: tool results only carry the id. */
export const toolNamesById = (messages: ReadonlyArray<ChatMessage>): Map<string, string> => {
  const names = new Map<string, string>()
  for (const message of messages) {
    if (message.tool_calls) for (const call of message.tool_calls) names.set(call.id, call.function.name)
  }
  return names
}

export interface InlineImage {
  readonly mediaType: string
  readonly base64: string
}

/** `data:image/png;base64,....` → its media type and payload; null for any other URL. */
export const parseDataUrl = (url: string): InlineImage | null => {
  if (!url.startsWith("data:")) return null
  const comma = url.indexOf(",")
  const meta = url.slice(5, comma)
  if (comma < 0 || !meta.endsWith(";base64")) return null
  return { mediaType: meta.slice(0, -7), base64: url.slice(comma + 1) }
}

/** Normalised usage → the chat-completions usage object, with the cache counts in the details. */
export const toOpenAIUsage = (usage: Usage): OpenAIUsage => {
  const out: OpenAIUsage = {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens
  }
  if (usage.cached_tokens !== undefined || usage.cache_write_tokens !== undefined) {
    out.prompt_tokens_details = {}
    if (usage.cached_tokens !== undefined) out.prompt_tokens_details.cached_tokens = usage.cached_tokens
    if (usage.cache_write_tokens !== undefined) out.prompt_tokens_details.cache_write_tokens = usage.cache_write_tokens
  }
  if (usage.reasoning_tokens !== undefined) out.completion_tokens_details = { reasoning_tokens: usage.reasoning_tokens }
  return out
}

/** Seconds since the epoch, as chat-completions `created`. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

/** An id for answers whose provider returns none. */
export const completionId = (): string => `chatcmpl-${crypto.randomUUID().replaceAll("-", "")}`

export const toolCallId = (): string => `call_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`
