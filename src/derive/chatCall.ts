/**
 * The normalised view of a call every derivation module works on (`ChatCall`), and the defensive reading of a
 * chat-completions capture into it. The other APIs' captures are read into the same view (read.ts).
 *
 * Callers send whatever their SDK produces and providers answer in slightly different dialects, so nothing here
 * assumes a field exists or has the expected type: odd input degrades to empty parts plus a note in `problems`,
 * never an exception.
 */
import type { Capture } from "../domain/capture.ts"
import { truncationOf } from "../domain/truncation.ts"
import { parseJson } from "./text.ts"

export interface ToolCall {
  readonly id: string
  readonly name: string
  /** the arguments as the model wrote them (JSON text, possibly invalid) */
  readonly arguments: string
}

/** A document attached as a `file` content part. */
export interface FileInput {
  readonly name: string
  /** the payload (base64 data) or, for an uploaded file, its id */
  readonly data: string
}

export interface ChatMessage {
  /** position in the request's messages (or input items) */
  readonly index: number
  /** where in the request it is, for evidence: `messages[3]`, `system`, `input[5]`, `instructions` */
  readonly source: string
  /** the role as sent: system, developer, user, assistant, tool, ... */
  readonly role: string
  readonly text: string
  /** `image_url` parts: http(s) URLs or data URIs */
  readonly images: ReadonlyArray<string>
  readonly files: ReadonlyArray<FileInput>
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly toolCallId: string | undefined
  /** for tool messages: the tool that produced the result, from the matching call or the message's `name` */
  readonly toolName: string | undefined
}

export interface TokenLogprob {
  readonly token: string
  readonly logprob: number
}

export interface ChatAnswer {
  /** the answer text, without any `<think>` preamble */
  readonly text: string
  /** reasoning the provider returned (`reasoning_content`, `reasoning` or a `<think>` block); "" when none */
  readonly reasoning: string
  /** the `refusal` field; "" when none */
  readonly refusal: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  /** normalised to chat-completions names: stop, length, tool_calls, content_filter */
  readonly finishReason: string | undefined
  /** `choices[0].logprobs.content`, when the caller asked for log-probabilities */
  readonly logprobs: ReadonlyArray<TokenLogprob> | undefined
}

/** An embeddings call: what was embedded (the vectors are never captured). */
export interface EmbeddingsCall {
  readonly inputs: number
  readonly characters: number
  readonly dimensions: number | undefined
}

export interface ChatCall {
  readonly messages: ReadonlyArray<ChatMessage>
  /** the provider's id of the answer (`chatcmpl-…`, `resp_…`, `msg_…`): later calls name it to continue it */
  readonly responseId?: string | undefined
  /** the response this call continues (`previous_response_id`): its earlier turns are not in `messages` */
  readonly continues?: string | undefined
  /** set for an embeddings call, which has no answer of its own */
  readonly embeddings?: EmbeddingsCall | undefined
  /** names of the tools the request offered */
  readonly toolsOffered: ReadonlyArray<string>
  /** `response_format.type`: text, json_object or json_schema */
  readonly responseFormat: string
  /** `response_format.json_schema.name`, when given */
  readonly schemaName: string | undefined
  readonly answer: ChatAnswer
  /** why parts of the capture could not be read */
  readonly problems: ReadonlyArray<string>
}

export const isInstruction = (message: ChatMessage): boolean =>
  message.role === "system" || message.role === "developer"

export type Json = Record<string, unknown>

export const asRecord = (value: unknown): Json | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined

export const asArray = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

export const asString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** Providers translated by the gateway already use chat-completions names; these cover stragglers. */
export const FINISH_REASONS: Record<string, string> = {
  stop: "stop",
  end_turn: "stop",
  stop_sequence: "stop",
  length: "length",
  max_tokens: "length",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  tool_use: "tool_calls",
  content_filter: "content_filter",
  safety: "content_filter",
  recitation: "content_filter"
}

export interface Content {
  readonly text: string
  readonly images: Array<string>
  readonly files: Array<FileInput>
  readonly refusal: string
}

/**
 * `content` is a string, null, or an array of typed parts (chat's, and the Responses API's `input_text`,
 * `input_image`, `input_file`, `output_text`, `refusal`); some SDKs send a tool result as a bare object.
 */
export const readContent = (content: unknown): Content => {
  if (typeof content === "string") return { text: content, images: [], files: [], refusal: "" }
  if (asRecord(content) !== undefined) return { text: JSON.stringify(content), images: [], files: [], refusal: "" }
  const texts: Array<string> = []
  const refusals: Array<string> = []
  const images: Array<string> = []
  const files: Array<FileInput> = []
  for (const part of asArray(content)) {
    const record = asRecord(part)
    if (record === undefined) {
      if (typeof part === "string") texts.push(part)
      continue
    }
    const text = asString(record.text)
    if (text !== undefined) texts.push(text)
    const refusal = asString(record.refusal)
    if (refusal !== undefined) refusals.push(refusal)
    const image = asString(record.image_url) ?? asString(asRecord(record.image_url)?.url)
    if (image !== undefined) images.push(image)
    // chat's `file` part, or the Responses API's `input_file` part (the same fields at the top)
    const file = asRecord(record.file) ?? (record.type === "input_file" ? record : undefined)
    if (file !== undefined) {
      const data = asString(file.file_data) ?? asString(file.file_id) ?? asString(file.file_url) ?? ""
      files.push({ name: asString(file.filename) ?? asString(file.file_id) ?? "file", data })
    }
  }
  return { text: texts.join("\n"), images, files, refusal: refusals.join("\n") }
}

const readToolCalls = (value: unknown): Array<ToolCall> =>
  asArray(value).flatMap((item, position) => {
    const call = asRecord(item)
    const fn = asRecord(call?.function)
    if (call === undefined || fn === undefined) return []
    const args = fn.arguments
    return [{
      id: asString(call.id) ?? `call_${position}`,
      name: asString(fn.name) ?? "unknown",
      arguments: typeof args === "string" ? args : args === undefined ? "" : JSON.stringify(args)
    }]
  })

const readMessage = (value: unknown, index: number): ChatMessage => {
  const message = asRecord(value) ?? {}
  const content = readContent(message.content)
  const role = asString(message.role) ?? "unknown"
  return {
    index,
    source: `messages[${index}]`,
    role,
    text: content.text,
    images: content.images,
    files: content.files,
    toolCalls: readToolCalls(message.tool_calls),
    toolCallId: asString(message.tool_call_id),
    toolName: role === "tool" ? asString(message.name) : undefined
  }
}

/** Names each tool result after the call it answers (ids are only meaningful within one conversation). */
export const nameToolResults = (messages: ReadonlyArray<ChatMessage>): Array<ChatMessage> => {
  const toolNames = new Map(messages.flatMap((message) => message.toolCalls.map((tool) => [tool.id, tool.name] as const)))
  return messages.map((message) => {
    const called = message.toolCallId === undefined ? undefined : toolNames.get(message.toolCallId)
    return message.role === "tool" && called !== undefined ? { ...message, toolName: called } : message
  })
}

/** Open-weight reasoning models served through OpenAI-compatible upstreams inline their reasoning this way. */
const THINK_BLOCK = /^\s*<think>([\s\S]*?)(?:<\/think>|$)\s*/

const readLogprobs = (value: unknown): Array<TokenLogprob> | undefined => {
  const content = asRecord(value)?.content
  if (!Array.isArray(content)) return undefined
  return content.flatMap((item) => {
    const entry = asRecord(item)
    const logprob = entry?.logprob
    return typeof logprob === "number" && Number.isFinite(logprob)
      ? [{ token: asString(entry?.token) ?? "", logprob }]
      : []
  })
}

export const NO_ANSWER: ChatAnswer = {
  text: "",
  reasoning: "",
  refusal: "",
  toolCalls: [],
  finishReason: undefined,
  logprobs: undefined
}

const readAnswer = (response: Json): ChatAnswer => {
  const choice = asRecord(asArray(response.choices)[0]) ?? {}
  const message = asRecord(choice.message) ?? {}
  const content = readContent(message.content)
  const think = THINK_BLOCK.exec(content.text)
  const reasoning = asString(message.reasoning_content) ?? asString(message.reasoning) ?? think?.[1] ?? ""
  const finish = asString(choice.finish_reason)?.toLowerCase()
  return {
    text: think === null ? content.text : content.text.slice(think[0].length),
    reasoning: reasoning.trim(),
    refusal: asString(message.refusal) ?? content.refusal,
    toolCalls: readToolCalls(message.tool_calls),
    finishReason: finish === undefined ? undefined : FINISH_REASONS[finish] ?? finish,
    logprobs: readLogprobs(choice.logprobs)
  }
}

const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

/**
 * A capture's request and response as JSON objects (the response undefined when there is none, as on errors), with a
 * note in `problems` for either that is not one, and for an answer the gateway kept only part of.
 */
export const readExchange = (capture: Pick<Capture, "request" | "response">, problems: Array<string>) => {
  const request = asRecord(parseJson(capture.request))
  if (request === undefined) problems.push("request is not a JSON object")
  const response = capture.response === null ? undefined : asRecord(parseJson(capture.response))
  if (capture.response !== null && response === undefined) problems.push("response is not a JSON object")
  const truncation = truncationOf(response)
  if (truncation !== undefined) {
    problems.push(
      `the answer was ${megabytes(truncation.response_bytes)}; the capture kept ${megabytes(truncation.limit_bytes)} of it (LEDGER_CAPTURE_MAX_ANSWER_BYTES)`
    )
  }
  return { request, response }
}

/** A chat-completions capture as the call view. */
export const readChatCall = (capture: Capture): ChatCall => {
  const problems: Array<string> = []
  const { request, response } = readExchange(capture, problems)
  const rawMessages = request?.messages
  if (request !== undefined && !Array.isArray(rawMessages)) problems.push("request has no messages array")
  const messages = nameToolResults(asArray(rawMessages).map(readMessage))

  const toolsOffered = asArray(request?.tools).flatMap((tool) => {
    const name = asString(asRecord(asRecord(tool)?.function)?.name)
    return name === undefined ? [] : [name]
  })
  const responseFormat = asRecord(request?.response_format)

  let answer = NO_ANSWER
  if (response !== undefined) {
    if (asArray(response.choices).length === 0) problems.push("response has no choices")
    else answer = readAnswer(response)
  }

  return {
    messages,
    responseId: asString(response?.id),
    toolsOffered,
    responseFormat: asString(responseFormat?.type) ?? "text",
    schemaName: asString(asRecord(responseFormat?.json_schema)?.name),
    answer,
    problems
  }
}

/**
 * Coding agents wrap what their harness adds to a user turn in a tag of its own (Claude Code's
 * `<system-reminder>`, Codex's `<environment_context>`, `<user_instructions>`): context, not what the person asked.
 */
const HARNESS_BLOCK = /<(system-reminder|environment_context|user_instructions|user_shell_command|turn_aborted|skills_instructions|command-[a-z-]+)>[\s\S]*?<\/\1>/g

/** A user turn's text without the blocks a coding agent's harness added to it. */
export const askedText = (text: string): string => (text.includes("<") ? text.replace(HARNESS_BLOCK, "").trim() : text)

/** The text of the last user message that asks something: the ask this call answers. */
export const lastUserText = (call: ChatCall): string => {
  for (let i = call.messages.length - 1; i >= 0; i--) {
    const message = call.messages[i]!
    if (message.role !== "user") continue
    const asked = askedText(message.text)
    if (asked !== "") return asked
  }
  return ""
}
