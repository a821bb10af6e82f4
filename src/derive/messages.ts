/**
 * An Anthropic Messages capture as the call view: the system prompt and the turns of the request (content blocks:
 * text, images, documents, tool_use, tool_result), and the answer's blocks (text, thinking, tool_use) with its stop
 * reason.
 */
import type { Capture } from "../domain/capture.ts"
import {
  asArray,
  asRecord,
  asString,
  type ChatAnswer,
  type ChatCall,
  type ChatMessage,
  type FileInput,
  type Json,
  nameToolResults,
  NO_ANSWER,
  readExchange,
  type ToolCall
} from "./chatCall.ts"

const STOP_REASONS: Record<string, string> = {
  end_turn: "stop",
  stop_sequence: "stop",
  pause_turn: "stop",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  tool_use: "tool_calls"
}

/** A block's text; a tool result's content may itself be blocks. */
const blockText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : asArray(content).map((block) => asString(asRecord(block)?.text) ?? "").filter((text) => text !== "").join("\n")

const toolUse = (block: Json, position: number): ToolCall => ({
  id: asString(block.id) ?? `toolu_${position}`,
  name: asString(block.name) ?? "unknown",
  arguments: block.input === undefined ? "" : JSON.stringify(block.input)
})

/** One request turn: its own message, preceded by a tool message for each tool_result block it carries. */
const readTurn = (value: unknown, index: number): Array<ChatMessage> => {
  const turn = asRecord(value) ?? {}
  const role = asString(turn.role) ?? "unknown"
  const source = `messages[${index}]`
  const base = { index, source, role, toolCallId: undefined, toolName: undefined }
  if (typeof turn.content === "string") return [{ ...base, text: turn.content, images: [], files: [], toolCalls: [] }]
  const texts: Array<string> = []
  const images: Array<string> = []
  const files: Array<FileInput> = []
  const toolCalls: Array<ToolCall> = []
  const results: Array<ChatMessage> = []
  asArray(turn.content).forEach((item, position) => {
    const block = asRecord(item)
    switch (block?.type) {
      case "text":
        texts.push(asString(block.text) ?? "")
        return
      case "image": {
        const from = asRecord(block.source)
        const url = from?.type === "base64" ? `data:${asString(from.media_type) ?? "image"};base64,${asString(from.data) ?? ""}` : asString(from?.url)
        if (url !== undefined) images.push(url)
        return
      }
      case "document": {
        const from = asRecord(block.source)
        files.push({ name: asString(block.title) ?? asString(from?.url) ?? "document", data: asString(from?.data) ?? asString(from?.url) ?? "" })
        return
      }
      case "tool_use":
      case "server_tool_use":
        toolCalls.push(toolUse(block, position))
        return
      case "tool_result":
        results.push({
          ...base,
          source: `${source}.content[${position}]`,
          role: "tool",
          text: blockText(block.content),
          images: [],
          files: [],
          toolCalls: [],
          toolCallId: asString(block.tool_use_id)
        })
        return
    }
  })
  const own = texts.length > 0 || images.length > 0 || files.length > 0 || toolCalls.length > 0
  return own ? [...results, { ...base, text: texts.join("\n"), images, files, toolCalls }] : results
}

const readAnswer = (message: Json): ChatAnswer => {
  const texts: Array<string> = []
  const reasoning: Array<string> = []
  const toolCalls: Array<ToolCall> = []
  asArray(message.content).forEach((item, position) => {
    const block = asRecord(item)
    if (block?.type === "text") texts.push(asString(block.text) ?? "")
    else if (block?.type === "thinking") reasoning.push(asString(block.thinking) ?? "")
    else if (block?.type === "redacted_thinking") reasoning.push("(redacted thinking)")
    else if (block?.type === "tool_use" || block?.type === "server_tool_use") toolCalls.push(toolUse(block, position))
  })
  const stop = asString(message.stop_reason)
  const text = texts.join("")
  return {
    text,
    reasoning: reasoning.filter((part) => part.trim() !== "").join("\n\n").trim(),
    // Anthropic says it refused through the stop reason; what it wrote is the refusal
    refusal: stop === "refusal" ? text || "the model refused (stop_reason refusal)" : "",
    toolCalls,
    finishReason: stop === undefined ? undefined : stop === "refusal" ? "stop" : STOP_REASONS[stop] ?? stop,
    logprobs: undefined
  }
}

export const readMessagesCall = (capture: Capture): ChatCall => {
  const problems: Array<string> = []
  const { request, response } = readExchange(capture, problems)
  if (request !== undefined && !Array.isArray(request.messages)) problems.push("request has no messages array")
  const system = typeof request?.system === "string" ? request.system : blockText(request?.system)
  const messages: Array<ChatMessage> = system === ""
    ? []
    : [{ index: -1, source: "system", role: "system", text: system, images: [], files: [], toolCalls: [], toolCallId: undefined, toolName: undefined }]
  asArray(request?.messages).forEach((turn, index) => messages.push(...readTurn(turn, index)))

  const answer = response === undefined ? NO_ANSWER : readAnswer(response)
  const format = asRecord(asRecord(request?.output_config)?.format) ?? asRecord(request?.output_format)
  return {
    responseId: asString(response?.id),
    messages: nameToolResults(messages),
    toolsOffered: asArray(request?.tools).flatMap((tool) => asString(asRecord(tool)?.name) ?? []),
    responseFormat: format?.type === "json_schema" ? "json_schema" : "text",
    schemaName: undefined,
    answer,
    problems
  }
}
