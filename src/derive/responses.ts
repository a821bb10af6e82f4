/**
 * An OpenAI Responses capture (a POST body, or a WebSocket turn's `response.create`) as the call view: the
 * instructions and input items (messages, function and custom tool calls with their outputs, shell calls), and the
 * response's output items with its status.
 *
 * Codex's own item types (`custom_tool_call` for apply_patch, `local_shell_call`, `tool_search_*`, namespaced
 * function calls) are read like function calls: their name (namespaced as `namespace.name`) and their input as the
 * arguments. A call continuing a `previous_response_id` has only its new input here; the builder joins its earlier
 * turns from the decision it continues.
 */
import type { Capture } from "../domain/capture.ts"
import {
  asArray,
  asRecord,
  asString,
  type ChatAnswer,
  type ChatCall,
  type ChatMessage,
  type Json,
  nameToolResults,
  NO_ANSWER,
  readExchange,
  readContent,
  type ToolCall
} from "./chatCall.ts"
import { parseJson } from "./text.ts"

/** Tool calls of any kind: the name, the call id, and the input as written. */
const toolCall = (item: Json, position: number): ToolCall | undefined => {
  const id = asString(item.call_id) ?? asString(item.id) ?? `call_${position}`
  const named = (name: string) => {
    const namespace = asString(item.namespace)
    return namespace === undefined ? name : `${namespace}.${name}`
  }
  switch (item.type) {
    case "function_call":
      return { id, name: named(asString(item.name) ?? "unknown"), arguments: asString(item.arguments) ?? "" }
    case "custom_tool_call":
      return { id, name: named(asString(item.name) ?? "unknown"), arguments: asString(item.input) ?? "" }
    case "local_shell_call":
      return { id, name: "local_shell", arguments: JSON.stringify(asRecord(item.action) ?? {}) }
    case "tool_search_call":
      return { id, name: "tool_search", arguments: JSON.stringify(item.arguments ?? {}) }
    default:
      return undefined
  }
}

const OUTPUT_TYPES = new Set(["function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output"])

const outputText = (item: Json): string => {
  if (item.type === "tool_search_output") {
    return asArray(item.tools).map((tool) => asString(asRecord(tool)?.name) ?? "").filter((name) => name !== "").join(", ")
  }
  return typeof item.output === "string" ? item.output : readContent(item.output).text
}

/** The instructions, the earlier turns the gateway joined to the call (`context`), then its input. */
const readInput = (request: Json | undefined, context: ReadonlyArray<unknown>): Array<ChatMessage> => {
  const messages: Array<ChatMessage> = []
  const message = (index: number, source: string, role: string, text: string, extra: Partial<ChatMessage> = {}): ChatMessage => ({
    index,
    source,
    role,
    text,
    images: [],
    files: [],
    toolCalls: [],
    toolCallId: undefined,
    toolName: undefined,
    ...extra
  })
  const instructions = asString(request?.instructions)
  if (instructions) messages.push(message(-1, "instructions", "system", instructions))
  const input = request?.input
  const items = typeof input === "string" ? [{ type: "message", role: "user", content: input }] : asArray(input)
  ;[...context, ...items].forEach((value, position) => {
    const item = asRecord(value)
    if (item === undefined) return
    const index = position - context.length
    const source = index < 0 ? `previous_response_id[${position}]` : typeof input === "string" ? "input" : `input[${index}]`
    const call = toolCall(item, index)
    if (call !== undefined) {
      // calls right after an assistant message, or after each other, belong to one assistant step
      const last = messages.at(-1)
      if (last?.role === "assistant") messages[messages.length - 1] = { ...last, toolCalls: [...last.toolCalls, call] }
      else messages.push(message(position, source, "assistant", "", { toolCalls: [call] }))
      return
    }
    if (OUTPUT_TYPES.has(asString(item.type) ?? "")) {
      messages.push(message(position, source, "tool", outputText(item), { toolCallId: asString(item.call_id) ?? asString(item.id) }))
      return
    }
    if (item.type === "message" || (item.type === undefined && item.role !== undefined)) {
      const content = readContent(item.content)
      messages.push(message(position, source, asString(item.role) ?? "user", content.text || content.refusal, { images: content.images, files: content.files }))
    }
    // reasoning items, item references and hosted tools' records are not turns
  })
  return messages
}

const INCOMPLETE_REASONS: Record<string, string> = { max_output_tokens: "length", content_filter: "content_filter" }

const readAnswer = (response: Json): ChatAnswer => {
  const texts: Array<string> = []
  const refusals: Array<string> = []
  const reasoning: Array<string> = []
  const toolCalls: Array<ToolCall> = []
  asArray(response.output).forEach((value, position) => {
    const item = asRecord(value)
    if (item === undefined) return
    if (item.type === "message") {
      const content = readContent(item.content)
      if (content.text) texts.push(content.text)
      if (content.refusal) refusals.push(content.refusal)
    } else if (item.type === "reasoning") {
      const parts = [...asArray(item.summary), ...asArray(item.content)].map((part) => asString(asRecord(part)?.text) ?? "")
      reasoning.push(...parts.filter((text) => text.trim() !== ""))
    } else {
      const call = toolCall(item, position)
      if (call !== undefined) toolCalls.push(call)
    }
  })
  const status = asString(response.status)
  const incomplete = asString(asRecord(response.incomplete_details)?.reason)
  return {
    text: texts.join("\n"),
    reasoning: reasoning.join("\n\n").trim(),
    refusal: refusals.join("\n"),
    toolCalls,
    finishReason: status === "incomplete"
      ? INCOMPLETE_REASONS[incomplete ?? ""] ?? "length"
      : status === "completed"
      ? toolCalls.length > 0 ? "tool_calls" : "stop"
      : undefined,
    logprobs: undefined
  }
}

/** Tools the request offered: functions and custom tools (namespaced ones as `namespace.name`), hosted tools by type. */
const toolsOffered = (tools: unknown): Array<string> =>
  asArray(tools).flatMap((value) => {
    const tool = asRecord(value)
    if (tool === undefined) return []
    if (tool.type === "namespace") {
      return asArray(tool.tools).flatMap((inner) => {
        const name = asString(asRecord(inner)?.name)
        return name === undefined ? [] : [`${asString(tool.name) ?? ""}.${name}`]
      })
    }
    return asString(tool.name) ?? asString(tool.type) ?? []
  })

export const readResponsesCall = (capture: Capture): ChatCall => {
  const problems: Array<string> = []
  const { request, response } = readExchange(capture, problems)
  const answer = response === undefined ? NO_ANSWER : readAnswer(response)
  const format = asRecord(asRecord(request?.text)?.format)
  return {
    responseId: asString(response?.id),
    messages: nameToolResults(readInput(request, capture.context == null ? [] : asArray(parseJson(capture.context)))),
    continues: asString(request?.previous_response_id),
    toolsOffered: toolsOffered(request?.tools),
    responseFormat: asString(format?.type) ?? "text",
    schemaName: asString(format?.name),
    answer,
    problems
  }
}
