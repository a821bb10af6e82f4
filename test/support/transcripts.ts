/**
 * Transcripts written as Claude Code and Codex write them (the entry shapes of claude-code 2.1 and codex 0.169, as
 * read off their real transcripts), for tests and benchmarks that need many, odd or broken ones without running the
 * clients: a conversation of prompts, tool calls, tool results and answers, with the provider's ids and usage.
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

export interface Exchange {
  /** what the user asks */
  readonly prompt: string
  /** a shell command the model runs first, with its output */
  readonly command?: { readonly run: string; readonly output: string }
  readonly answer: string
}

const iso = (ms: number) => new Date(ms).toISOString()
const id = (prefix: string) => `${prefix}${Crypto.randomBytes(12).toString("base64url")}`

const claudeUsage = { input_tokens: 1200, cache_creation_input_tokens: 64, cache_read_input_tokens: 512, output_tokens: 40, service_tier: "standard" }

/**
 * A Claude Code session's lines: per exchange a prompt, (a tool_use answer and its result), the answer — each
 * answer split over two entries (thinking, then text or tool_use) as Claude Code writes blocks, sharing one message
 * id; attachments and bookkeeping entries in between, as the client writes them. The message ids, in order.
 */
export const claudeSession = (options: { readonly sessionId?: string; readonly cwd: string; readonly start: number; readonly exchanges: ReadonlyArray<Exchange> }) => {
  const sessionId = options.sessionId ?? Crypto.randomUUID()
  const lines: Array<string> = []
  const messageIds: Array<string> = []
  let at = options.start
  let parent: string | null = null
  const base = () => ({ isSidechain: false, userType: "external", cwd: options.cwd, sessionId, version: "2.1.331", gitBranch: "main" })
  const push = (entry: Record<string, unknown>) => {
    const uuid = Crypto.randomUUID()
    lines.push(JSON.stringify({ parentUuid: parent, ...entry, uuid, timestamp: iso(at += 7), ...base() }))
    parent = uuid
  }
  const answer = (blocks: ReadonlyArray<Record<string, unknown>>, stop: string) => {
    const msg = id("msg_01")
    messageIds.push(msg)
    const message = (content: ReadonlyArray<Record<string, unknown>>, stopReason: string | null) => ({
      id: msg, type: "message", role: "assistant", model: "claude-sonnet-4-6", content, stop_reason: stopReason, stop_sequence: null, usage: claudeUsage
    })
    push({ type: "assistant", requestId: id("req_"), message: message([{ type: "thinking", thinking: "Let me see.", signature: "sig" }], null) })
    push({ type: "assistant", requestId: id("req_"), message: message(blocks, stop) })
  }
  for (const exchange of options.exchanges) {
    lines.push(JSON.stringify({ type: "queue-operation", operation: "enqueue", timestamp: iso(at), sessionId, content: exchange.prompt }))
    push({ type: "user", message: { role: "user", content: exchange.prompt } })
    push({ type: "attachment", attachment: { type: "date_change" } })
    if (exchange.command !== undefined) {
      const toolUse = id("toolu_01")
      answer([{ type: "tool_use", id: toolUse, name: "Bash", input: { command: exchange.command.run } }], "tool_use")
      push({ type: "user", message: { role: "user", content: [{ tool_use_id: toolUse, type: "tool_result", content: exchange.command.output, is_error: false }] } })
    }
    answer([{ type: "text", text: exchange.answer }], "end_turn")
    lines.push(JSON.stringify({ type: "last-prompt", lastPrompt: exchange.prompt, sessionId }))
  }
  return { sessionId, lines, messageIds }
}

const codexUsage = { input_tokens: 2400, cached_input_tokens: 128, cache_write_input_tokens: 0, output_tokens: 30, reasoning_output_tokens: 0, total_tokens: 2430 }

/** A Codex rollout's lines: session meta, turn context, then per exchange the items and a usage record per call. */
export const codexSession = (options: { readonly sessionId?: string; readonly cwd: string; readonly start: number; readonly exchanges: ReadonlyArray<Exchange> }) => {
  const sessionId = options.sessionId ?? Crypto.randomUUID()
  const lines: Array<string> = []
  const responseIds: Array<string> = []
  let at = options.start
  let ordinal = 0
  const push = (type: string, payload: Record<string, unknown>) =>
    lines.push(JSON.stringify({ timestamp: iso(at += 5), ordinal: ordinal++, type, payload }))
  const call = () => {
    const responseId = id("resp_")
    responseIds.push(responseId)
    push("token_usage_record", { thread_id: sessionId, session_id: sessionId, response_id: responseId, usage: codexUsage })
    push("event_msg", { type: "token_count", info: { last_token_usage: codexUsage } })
  }
  push("session_meta", { id: sessionId, session_id: sessionId, cwd: options.cwd, cli_version: "0.169.0", model_provider: "openai", base_instructions: { text: "You are a coding agent." } })
  push("turn_context", { cwd: options.cwd, model: "gpt-5" })
  for (const exchange of options.exchanges) {
    push("response_item", { type: "message", role: "user", content: [{ type: "input_text", text: exchange.prompt }] })
    if (exchange.command !== undefined) {
      const callId = id("call_")
      push("response_item", { type: "function_call", name: "exec_command", arguments: JSON.stringify({ cmd: exchange.command.run }), call_id: callId })
      call()
      push("response_item", { type: "function_call_output", call_id: callId, output: exchange.command.output })
    }
    push("response_item", { type: "message", role: "assistant", content: [{ type: "output_text", text: exchange.answer }] })
    call()
  }
  return { sessionId, lines, responseIds }
}

/** Writes a session's lines where its client keeps them under `home`; returns the file's path. */
export const writeTranscript = (home: string, client: "claude-code" | "codex", session: { readonly sessionId: string; readonly lines: ReadonlyArray<string> }) => {
  const path = client === "claude-code"
    ? Path.join(home, ".claude", "projects", "-work-project", `${session.sessionId}.jsonl`)
    : Path.join(home, ".codex", "sessions", "2026", "11", "26", `rollout-2026-11-26T10-00-00-${session.sessionId}.jsonl`)
  Fs.mkdirSync(Path.dirname(path), { recursive: true })
  Fs.writeFileSync(path, session.lines.map((line) => `${line}\n`).join(""))
  return path
}
