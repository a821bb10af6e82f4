/**
 * The fake Anthropic Messages API (also the Anthropic models of the fake Bedrock's InvokeModel, which answers the
 * same messages and events).
 */
import * as Crypto from "node:crypto"
import { FAKE_CACHE_READ_TOKENS, FAKE_CACHE_WRITE_TOKENS, FAKE_REASONING, pieces, type Prompt, type Script } from "./script.ts"

/** Of the cache writes, those with a one-hour lifetime (Anthropic prices them at 2x input, the rest at 1.25x). */
export const FAKE_CACHE_WRITE_1H_TOKENS = 16
export const FAKE_THINKING_SIGNATURE = "sig_fake_EqQBCgIYAhIM"

const textOf = (content: any): string =>
  typeof content === "string" ? content : (content ?? []).filter((b: any) => b?.type === "text").map((b: any) => b.text).join("")

const blocksOf = (message: any): Array<any> =>
  typeof message?.content === "string" ? [{ type: "text", text: message.content }] : message?.content ?? []

/** What the user wrote in a turn: what Claude Code's harness adds to it is not what the user asked. */
const askedIn = (message: any): string =>
  blocksOf(message).filter((b) => b.type === "text" && !b.text.trimStart().startsWith("<system-reminder>")).map((b) => b.text).join("")

/** The last turn (Claude Code places `system` turns after the user's; they are context, not the ask). */
export const readAnthropic = (body: any, length: number): Prompt => {
  const messages: Array<any> = body.messages ?? []
  const last = messages.findLast((message) => message.role !== "system")
  const result = blocksOf(last).find((b) => b.type === "tool_result")
  const asked = messages.findLastIndex((message) => message.role === "user" && askedIn(message) !== "")
  const results = messages.slice(asked + 1).flatMap(blocksOf).filter((b) => b.type === "tool_result").length
  return {
    userText: askedIn(last),
    toolResult: result ? textOf(result.content) || JSON.stringify(result.content) : null,
    toolNames: (body.tools ?? []).map((t: any) => t.name),
    bodyLength: length,
    loop: { ask: asked === -1 ? "" : askedIn(messages[asked]), results }
  }
}

/** The usage an answer reports; the stream's message_start has it with one output token so far. */
export const anthropicUsage = (s: Script, outputTokens = s.usage.output) => ({
  input_tokens: s.usage.input,
  cache_creation_input_tokens: FAKE_CACHE_WRITE_TOKENS,
  cache_read_input_tokens: FAKE_CACHE_READ_TOKENS,
  cache_creation: {
    ephemeral_5m_input_tokens: FAKE_CACHE_WRITE_TOKENS - FAKE_CACHE_WRITE_1H_TOKENS,
    ephemeral_1h_input_tokens: FAKE_CACHE_WRITE_1H_TOKENS
  },
  output_tokens: outputTokens
})

const anthropicStop = { stop: "end_turn", length: "max_tokens", tool: "tool_use", refuse: "refusal" } as const

/** The id of the `n`th answer of this process: unique, as Anthropic's are (clients and the ledger key on it). */
export const anthropicMessageId = (n: number) => `msg_fake_${RUN}_${n}`
const RUN = Crypto.randomBytes(4).toString("hex")

export const anthropicMessage = (s: Script, model: string, id = "msg_fake") => ({
  id,
  type: "message",
  role: "assistant",
  model,
  content: [
    ...(s.reasoning ? [{ type: "thinking", thinking: s.reasoning, signature: FAKE_THINKING_SIGNATURE }] : []),
    ...(s.text ? [{ type: "text", text: s.text }] : []),
    ...s.toolCalls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.args }))
  ],
  stop_reason: anthropicStop[s.finish],
  stop_sequence: null,
  usage: anthropicUsage(s)
})

/** A stream's events in order, as Anthropic sends them (the SSE framing, or Bedrock's chunks, wrap them). */
export function* anthropicEvents(s: Script, model: string, id?: string): Generator<{ type: string; [key: string]: unknown }> {
  const { content: _content, stop_reason: _stop, ...message } = anthropicMessage(s, model, id)
  yield { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: anthropicUsage(s, 1) } }
  let index = 0
  if (s.reasoning) {
    yield { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }
    yield { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: s.reasoning ?? FAKE_REASONING } }
    yield { type: "content_block_delta", index, delta: { type: "signature_delta", signature: FAKE_THINKING_SIGNATURE } }
    yield { type: "content_block_stop", index: index++ }
  }
  yield { type: "ping" }
  if (s.text) {
    yield { type: "content_block_start", index, content_block: { type: "text", text: "" } }
    for (const [i, piece] of pieces(s.text).entries()) {
      yield { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }
      if (i === 0 && s.streamError) {
        yield { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
        return
      }
    }
    yield { type: "content_block_stop", index: index++ }
  }
  for (const call of s.toolCalls) {
    const args = JSON.stringify(call.args)
    yield { type: "content_block_start", index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } }
    yield { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }
    yield { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(0, 4) } }
    yield { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(4) } }
    yield { type: "content_block_stop", index: index++ }
  }
  // the current API repeats the input and cache counts as cumulative totals: they must be merged, not added
  const { cache_creation: _split, ...final } = anthropicUsage(s)
  yield { type: "message_delta", delta: { stop_reason: anthropicStop[s.finish], stop_sequence: null }, usage: final }
  yield { type: "message_stop" }
}

export function* anthropicStream(s: Script, model: string, id?: string): Generator<string> {
  for (const event of anthropicEvents(s, model, id)) {
    yield event.type === "ping" ? "event: ping\ndata: {\"type\": \"ping\"}\n\n" : `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
  }
}

export const anthropicErrorType = (status: number): string =>
  ({ 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error" })[status] ?? "api_error"

export const anthropicErrorBody = (status: number) =>
  ({ type: "error", error: { type: anthropicErrorType(status), message: `fake anthropic error ${status}` }, request_id: "req_fake" })

/** `count_tokens`: deterministic, from the body's size. */
export const anthropicTokenCount = (length: number) => ({ input_tokens: 8 + Math.ceil(length / 4) })
