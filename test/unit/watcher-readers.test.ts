/**
 * The watcher's transcript readers and file follower, on transcripts written as the clients write them: turns and
 * their requests, what completes a turn, and the files' troubles — a line cut mid-way and completed later, a corrupt
 * line, unknown entries, a file deleted or replaced, a restart from the saved position.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ClaudeCodeTranscript } from "../../src/watcher/claudeCode.ts"
import { CodexRollout } from "../../src/watcher/codex.ts"
import type { TranscriptReader } from "../../src/watcher/transcript.ts"
import { QUIET_MS, type Root, TranscriptFiles } from "../../src/watcher/TranscriptFiles.ts"
import { tempDir } from "../support/stack.ts"
import { claudeSession, codexSession, type Exchange, writeTranscript } from "../support/transcripts.ts"

const START = Date.UTC(2026, 10, 26, 10)
const EXCHANGES: ReadonlyArray<Exchange> = [
  { prompt: "What is in the logs?", command: { run: "tail -n 5 app.log", output: "ERROR payment-api timeout" }, answer: "The payment-api timed out." },
  { prompt: "Fix it", answer: "Raise the timeout to 30 s." }
]

/** Every turn a reader gives for these lines, and when the file goes quiet. */
const readAll = (reader: TranscriptReader, lines: ReadonlyArray<string>) => {
  let end = 0
  const turns = lines.flatMap((line) => reader.line(line, (end += Buffer.byteLength(line) + 1)))
  return [...turns, ...reader.idle(end)].map((completed) => completed.turn)
}

const roots = (home: string): ReadonlyArray<Root> => [
  { client: "claude-code", dir: Path.join(home, ".claude", "projects") },
  { client: "codex", dir: Path.join(home, ".codex", "sessions") }
]

describe("Claude Code transcripts", () => {
  it("one turn per message id, blocks joined, the conversation above it as the request", () => {
    const session = claudeSession({ cwd: "/work/project", start: START, exchanges: EXCHANGES })
    const reader = new ClaudeCodeTranscript()
    const turns = readAll(reader, session.lines)
    assert.deepStrictEqual(turns.map((turn) => turn.turn_id), session.messageIds)
    const [asks, reads, answers] = turns
    assert.deepInclude(asks!, { client: "claude-code", client_version: "2.1.331", session_id: session.sessionId, api: "messages", provider: "anthropic", model: "claude-sonnet-4-6", cwd: "/work/project", git_branch: "main" })
    const response = JSON.parse(asks!.response)
    assert.deepStrictEqual(response.content.map((block: { type: string }) => block.type), ["thinking", "tool_use"])
    assert.strictEqual(response.stop_reason, "tool_use")
    assert.strictEqual(response.usage.cache_read_input_tokens, 512)
    assert.deepStrictEqual(JSON.parse(asks!.request).messages, [{ role: "user", content: "What is in the logs?" }])
    const read = JSON.parse(reads!.request).messages
    assert.deepStrictEqual(read.map((message: { role: string }) => message.role), ["user", "assistant", "user"])
    assert.strictEqual(read[1].content.length, 2, "the answer's two entries are one message")
    assert.strictEqual(read[2].content[0].content, "ERROR payment-api timeout")
    assert.strictEqual(JSON.parse(answers!.request).messages.length, 5, "the second prompt sees the whole conversation")
    assert.isBelow(asks!.started_at, asks!.ended_at)
    assert.deepStrictEqual(reader.skipped, { corrupt: 0, unknown: 0 })
  })

  it("a turn completes with its stop reason; one still streaming waits for the conversation to go on or the file to go quiet", () => {
    const session = claudeSession({ cwd: "/w", start: START, exchanges: [{ prompt: "hi", answer: "hello" }] })
    // the answer's last entry without its stop reason: the client was still writing when the file was read
    const last = JSON.parse(session.lines.at(-2)!)
    last.message.stop_reason = null
    const lines = [...session.lines.slice(0, -2), JSON.stringify(last)]
    const reader = new ClaudeCodeTranscript()
    let end = 0
    assert.deepStrictEqual(lines.flatMap((line) => reader.line(line, (end += line.length + 1))), [])
    assert.deepStrictEqual(reader.idle(end).map((completed) => completed.turn.turn_id), session.messageIds)
  })

  it("synthetic answers, corrupt lines and unknown entries are passed over and counted", () => {
    const session = claudeSession({ cwd: "/w", start: START, exchanges: [{ prompt: "hi", answer: "hello" }] })
    const synthetic = JSON.stringify({ type: "assistant", uuid: "s1", sessionId: session.sessionId, timestamp: new Date(START).toISOString(), message: { id: "msg_synthetic", model: "<synthetic>", role: "assistant", content: [{ type: "text", text: "API Error" }] } })
    const reader = new ClaudeCodeTranscript()
    const turns = readAll(reader, ["{not json", ...session.lines, synthetic, JSON.stringify({ type: "brand-new-entry" }), "[1,2]"])
    assert.deepStrictEqual(turns.map((turn) => turn.turn_id), session.messageIds)
    assert.deepStrictEqual(reader.skipped, { corrupt: 2, unknown: 1 })
  })
})

describe("Codex rollouts", () => {
  it("one turn per usage record: the items the model produced since the call before, the rest as its input", () => {
    const session = codexSession({ cwd: "/work/project", start: START, exchanges: EXCHANGES })
    const reader = new CodexRollout()
    const turns = readAll(reader, session.lines)
    assert.deepStrictEqual(turns.map((turn) => turn.turn_id), session.responseIds)
    const [asks, reads] = turns
    assert.deepInclude(asks!, { client: "codex", client_version: "0.169.0", session_id: session.sessionId, api: "responses", provider: "openai", provider_type: "openai", model: "gpt-5", cwd: "/work/project" })
    assert.deepStrictEqual(JSON.parse(asks!.response).output.map((item: { type: string }) => item.type), ["function_call"])
    const request = JSON.parse(reads!.request)
    assert.strictEqual(request.instructions, "You are a coding agent.")
    assert.deepStrictEqual(request.input.map((item: { type: string }) => item.type), ["message", "function_call", "function_call_output"])
    assert.deepStrictEqual(JSON.parse(reads!.response).usage, {
      input_tokens: 2400, input_tokens_details: { cached_tokens: 128 }, output_tokens: 30, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 2430
    })
  })

  it("older versions without usage records: the token count closes a call, and the turn is named by session and number", () => {
    const session = codexSession({ cwd: "/w", start: START, exchanges: [{ prompt: "hi", answer: "hello" }] })
    const reader = new CodexRollout()
    const turns = readAll(reader, session.lines.filter((line) => !line.includes("token_usage_record")))
    assert.deepStrictEqual(turns.map((turn) => turn.turn_id), [`${session.sessionId}:1`])
  })
})

describe("following transcript files", () => {
  it.effect("a line cut mid-way is read once it is whole; a corrupt line is skipped; nothing is read twice", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const state = Path.join(home, "state.json")
      const session = claudeSession({ cwd: "/w", start: START, exchanges: EXCHANGES })
      const path = writeTranscript(home, "claude-code", { sessionId: session.sessionId, lines: [] })
      const files = new TranscriptFiles(roots(home), state)
      const text = session.lines.map((line) => `${line}\n`).join("")
      const cut = text.indexOf(session.messageIds[2]!) // inside the last answer's first entry
      Fs.writeFileSync(path, `${text.slice(0, cut)}`)
      const before = files.scan(START, 100)
      assert.deepStrictEqual(before.map((found) => found.turn.turn_id), session.messageIds.slice(0, 2))
      files.taken(before)
      Fs.appendFileSync(path, `${text.slice(cut)}{"half a line\n`)
      const after = files.scan(START, 100)
      assert.deepStrictEqual(after.map((found) => found.turn.turn_id), session.messageIds.slice(2))
      files.taken(after)
      assert.deepStrictEqual(files.scan(START + QUIET_MS, 100), [], "quiet now, and nothing is left")
      assert.deepInclude(files.counts, { files: 1, corrupt: 1 })
    }))

  it.effect("a turn the service would refuse (its id too long) is kept back and counted", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const session = claudeSession({ cwd: "/w", start: START, exchanges: EXCHANGES })
      const long = "msg_" + "x".repeat(300)
      writeTranscript(home, "claude-code", { ...session, lines: session.lines.map((line) => line.replaceAll(session.messageIds[0]!, long)) })
      const files = new TranscriptFiles(roots(home), Path.join(home, "state.json"))
      assert.deepStrictEqual(files.scan(START, 100).map((found) => found.turn.turn_id), session.messageIds.slice(1))
      assert.deepInclude(files.counts, { invalid: 1 })
    }))

  it.effect("after a restart only what completed past the saved position is sent; a replaced file is read anew, a deleted one forgotten", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const state = Path.join(home, "state.json")
      const claude = claudeSession({ cwd: "/w", start: START, exchanges: EXCHANGES })
      const codex = codexSession({ cwd: "/w", start: START, exchanges: EXCHANGES })
      const claudePath = writeTranscript(home, "claude-code", { ...claude, lines: claude.lines.slice(0, 7) })
      const codexPath = writeTranscript(home, "codex", codex)

      const first = new TranscriptFiles(roots(home), state)
      const sent = first.scan(START, 100)
      assert.strictEqual(sent.length, 1 + codex.responseIds.length)
      first.taken(sent)
      first.save()

      Fs.writeFileSync(claudePath, claude.lines.map((line) => `${line}\n`).join(""))
      const second = new TranscriptFiles(roots(home), state)
      assert.deepStrictEqual(second.scan(START, 100).map((found) => found.turn.turn_id), claude.messageIds.slice(1), "the rest of the Claude session only")

      // replaced: the same name, another file — its turns are read from its start
      const other = codexSession({ cwd: "/w", start: START, exchanges: [{ prompt: "again", answer: "yes" }] })
      Fs.rmSync(codexPath)
      writeTranscript(home, "codex", { sessionId: codex.sessionId, lines: other.lines })
      assert.deepStrictEqual(second.scan(START, 100).map((found) => found.turn.turn_id), other.responseIds)
      Fs.rmSync(claudePath)
      second.scan(START, 100)
      assert.deepInclude(second.counts, { files: 1, deleted: 1, restarted: 1 })
    }))
})
