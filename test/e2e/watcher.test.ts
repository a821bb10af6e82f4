/**
 * The watcher, end to end with the real clients: Claude Code and Codex run headless straight at the fake providers
 * (no gateway, as on a subscription), with a HOME of the test's own; then `ledger watch --once` reads their
 * transcripts and sends the turns to the gateway, and the builder makes them decisions.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import type { Decision } from "../../src/domain/decision.ts"
import { runClaude, runCodex } from "../support/agent-clis.ts"
import { cleanEnv, ledger, LEDGER_BIN } from "../support/ledger-cli.ts"
import { tcpProxyTo } from "../support/tcp-proxy.ts"
import { claudeSession, codexSession, type Exchange, writeTranscript } from "../support/transcripts.ts"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"
import { tempDir } from "../support/stack.ts"

const PROVIDER_KEY = "sk-provider-watcher-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/WatcherStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

interface Summary {
  readonly accepted: number
  readonly rejected: number
  readonly files: number
  readonly corrupt: number
}

/** `ledger watch --once` over a HOME's transcripts, recording through the stack's gateway. */
const watchOnce = (stack: RecordingStack, home: string, state: string, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const run = yield* ledger([
      "watch", "--once", "--json",
      "--claude", Path.join(home, ".claude", "projects"),
      "--codex", Path.join(home, ".codex", "sessions"),
      "--state", state,
      ...extra
    ], { LEDGER_GATEWAY_URL: stack.gatewayUrl, LEDGER_GATEWAY_KEY: stack.gatewayKey })
    assert.strictEqual(run.code, 0, run.stderr)
    return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Summary
  })

/** Waits until the builders have taken everything in the stream. */
const built = (stack: RecordingStack) =>
  Context.get(stack.context, CaptureStream).stats.pipe(
    Effect.flatMap((stats) => ((stats.lag ?? 0) + stats.pending === 0 ? Effect.void : Effect.fail("behind" as const))),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 400 }),
    Effect.orDie
  )

/** The decisions made from transcript turns (the stream's entries are trimmed once built: read the ledger). */
const watched = (stack: RecordingStack) =>
  Effect.gen(function*() {
    yield* stack.settled
    yield* built(stack)
    const decisions: Array<Decision> = []
    for (const agent_id of ["claude-code", "codex"]) {
      let cursor: string | undefined
      do {
        const page = yield* stack.query.listDecisions(stack.reader, { agent_id, limit: 100, cursor })
        for (const summary of page.data) decisions.push(yield* stack.query.getDecision(stack.reader, summary.ledger_id))
        cursor = page.next_cursor ?? undefined
      } while (cursor !== undefined)
    }
    return decisions.filter((decision) => decision.source !== null)
  }).pipe(Effect.orDie)

/** `ledger watch` following a HOME's transcripts until stopped; its output is collected. */
const following = (home: string, state: string, gatewayUrl: string, gatewayKey: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, [
        LEDGER_BIN, "watch", "--json",
        "--claude", Path.join(home, ".claude", "projects"),
        "--codex", Path.join(home, ".codex", "sessions"),
        "--state", state
      ], { env: cleanEnv({ LEDGER_GATEWAY_URL: gatewayUrl, LEDGER_GATEWAY_KEY: gatewayKey, LEDGER_LOG_LEVEL: "info" }), stdio: ["ignore", "pipe", "pipe"] })
      let output = ""
      child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      return { child, output: () => output }
    }),
    ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
  )

const stopped = (child: ChildProcess) =>
  Effect.callback<number | null>((resume) => {
    if (child.exitCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
    child.kill("SIGTERM")
  })

/** The decisions of these provider answer ids, once each is built; fails the test after 30 s. */
const decisionsOf = (stack: RecordingStack, answerIds: ReadonlyArray<string>, output: () => string) =>
  Effect.gen(function*() {
    const all = yield* watched(stack)
    const found = all.filter((decision) => answerIds.includes(decision.response_id ?? ""))
    return found.length >= answerIds.length ? found : yield* Effect.fail(`${found.length} of ${answerIds.length} built`)
  }).pipe(
    Effect.retry({ schedule: Schedule.spaced("250 millis"), times: 120 }),
    Effect.mapError((message) => new Error(`${message}; the watcher said:\n${output()}`)),
    Effect.orDie
  )

const exchanges = (name: string, count: number): ReadonlyArray<Exchange> =>
  Array.from({ length: count }, (_, n) => ({
    prompt: `${name}: step ${n}`,
    ...(n % 2 === 0 ? { command: { run: `echo ${name}-${n}`, output: `${name}-${n}` } } : {}),
    answer: `${name} step ${n} done`
  }))

const answerOf = (decision: Decision) => decision.logic_trace.filter((step) => step.kind === "answer" || step.kind === "tool_call").at(-1)

describe("ledger watch", () => {
  layer(StackLive, { timeout: 240_000, excludeTestServices: true })((it) => {
    it.effect("Claude Code and Codex on their own: every model turn a priced decision with its answer; two runs two sessions; a second --once adds nothing", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const home = yield* tempDir
        const state = Path.join(yield* tempDir, "watch-state.json")
        const claude = { providerUrl: stack.fake.baseUrls.anthropic, providerKey: PROVIDER_KEY, home }
        const first = yield* runClaude("Say hello to the watcher", claude)
        assert.strictEqual(first.code, 0, first.stderr)
        const second = yield* runClaude("[[run:echo hello-from-claude]]", { ...claude, args: ["--allowedTools", "Bash"] })
        assert.strictEqual(second.code, 0, second.stderr)
        const codex = yield* runCodex("[[run:echo hello-from-codex]]", { providerUrl: stack.fake.baseUrls.openai, providerKey: PROVIDER_KEY, model: "gpt-5", home })
        assert.strictEqual(codex.code, 0, codex.stderr)

        const summary = yield* watchOnce(stack, home, state)
        assert.deepInclude(summary, { accepted: 5, rejected: 0, files: 3, corrupt: 0 }, "3 Claude Code turns, 2 Codex turns")
        const decisions = yield* watched(stack)
        assert.strictEqual(decisions.length, 5)
        for (const decision of decisions) {
          assert.isDefined(answerOf(decision), "the answer is in the trace")
          assert.isAbove(decision.cost_usd ?? 0, 0, `${decision.model} is priced`)
          assert.strictEqual(decision.source?.kind, "watcher")
          assert.strictEqual(decision.source?.cwd, decision.agent_id === "codex" ? Path.join(home, "work") : home, "where the client ran")
        }

        const byClaude = decisions.filter((decision) => decision.agent_id === "claude-code").sort((a, b) => a.created_at.localeCompare(b.created_at))
        assert.strictEqual(byClaude.length, 3)
        for (const decision of byClaude) {
          assert.deepStrictEqual([decision.api, decision.provider, decision.source?.client], ["messages", "anthropic", "claude-code"])
          assert.match(decision.response_id ?? "", /^msg_/)
        }
        const [alone, asked, read] = byClaude
        assert.strictEqual(answerOf(alone!)!.text, "Fake answer to: Say hello to the watcher")
        assert.strictEqual(alone!.execution_id, JSON.parse(first.stdout).session_id, "Claude Code's own session id")
        assert.notStrictEqual(alone!.session_id, asked!.session_id, "two runs, two sessions")
        assert.strictEqual(asked!.session_id, read!.session_id)
        assert.deepInclude(asked!.artifacts, { kind: "command", name: "Bash", language: "shell", content: "echo hello-from-claude" })
        assert.include(read!.artifacts.find((artifact) => artifact.kind === "command")?.result ?? "", "hello-from-claude", "the command's output, read back")

        const byCodex = decisions.filter((decision) => decision.agent_id === "codex")
        assert.strictEqual(byCodex.length, 2, "the turn asking for a command, and the answer")
        for (const decision of byCodex) {
          assert.deepStrictEqual([decision.api, decision.provider, decision.model, decision.source?.client], ["responses", "openai", "gpt-5", "codex"])
          assert.strictEqual(decision.session_id, byCodex[0]!.session_id, "one Codex session")
        }
        assert.isDefined(byCodex.find((decision) => answerOf(decision)?.text?.includes("hello-from-codex")))

        const again = yield* watchOnce(stack, home, state)
        assert.deepInclude(again, { accepted: 0, rejected: 0 }, "nothing new to send")
        // even with its state lost, the watcher records nothing twice
        const fresh = yield* watchOnce(stack, home, Path.join(yield* tempDir, "watch-state.json"))
        assert.strictEqual(fresh.accepted, 5)
        assert.strictEqual((yield* watched(stack)).length, 5)
      }))

    it.effect("a Claude Code run through the gateway that is also watched stays one decision", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const home = yield* tempDir
        const run = yield* runClaude("Say hello through both ways", { gatewayUrl: stack.gatewayUrl, gatewayKey: stack.gatewayKey, providerKey: PROVIDER_KEY, home })
        assert.strictEqual(run.code, 0, run.stderr)
        const ledgerId = yield* stack.ledgerIdOf("Say hello through both ways")
        const viaGateway = yield* stack.decision(ledgerId)

        const summary = yield* watchOnce(stack, home, Path.join(yield* tempDir, "watch-state.json"))
        assert.strictEqual(summary.accepted, 1, "the turn is sent")
        yield* stack.settled
        yield* built(stack)
        const page = yield* stack.query.listSessionDecisions(stack.reader, viaGateway.session_id, {})
        assert.deepStrictEqual(page.data.map((decision) => decision.ledger_id), [ledgerId], "one decision: the gateway's")
        assert.isNull((yield* stack.decision(ledgerId)).source)
      }))

    it.effect("--agent-id and --agent-name name the agent the turns are recorded for", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const home = yield* tempDir
        const session = claudeSession({ cwd: "/work/e", start: Date.now() - 60_000, exchanges: exchanges("e", 2) })
        writeTranscript(home, "claude-code", session)
        const summary = yield* watchOnce(stack, home, Path.join(yield* tempDir, "watch-state.json"), ["--agent-id", "my-assistant", "--agent-name", "My assistant"])
        assert.strictEqual(summary.accepted, session.messageIds.length)
        yield* stack.settled
        yield* built(stack)
        const page = yield* stack.query.listDecisions(stack.reader, { agent_id: "my-assistant" })
        assert.strictEqual(page.data.length, session.messageIds.length)
        const agents = yield* stack.query.listAgents(stack.reader, {})
        assert.strictEqual(agents.data.find((agent) => agent.agent_id === "my-assistant")?.agent_name, "My assistant")
      }))

    it.effect("the service away while it follows the transcripts, a line cut mid-way, a corrupt line, a file deleted: nothing lost, nothing doubled", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const home = yield* tempDir
        const proxy = yield* tcpProxyTo(stack.gatewayUrl, 80)
        yield* proxy.stop
        const watcher = yield* following(home, Path.join(yield* tempDir, "watch-state.json"), proxy.url, stack.gatewayKey)
        const start = Date.now()
        const a = claudeSession({ cwd: "/work/a", start, exchanges: exchanges("a", 4) })
        const aPath = writeTranscript(home, "claude-code", a)
        const b = codexSession({ cwd: "/work/b", start, exchanges: exchanges("b", 3) })
        writeTranscript(home, "codex", b)
        // c is being written: half a line, then a corrupt line, then the rest
        const c = claudeSession({ cwd: "/work/c", start, exchanges: exchanges("c", 2) })
        const cText = c.lines.map((line) => `${line}\n`).join("")
        const cut = cText.indexOf(c.messageIds[1]!)
        const cPath = writeTranscript(home, "claude-code", { sessionId: c.sessionId, lines: [] })
        Fs.writeFileSync(cPath, cText.slice(0, cut))
        yield* Effect.sleep("3 seconds")
        Fs.appendFileSync(cPath, `${cText.slice(cut)}{"type":"assistant","message":\n`)
        yield* Effect.sleep("2 seconds")
        assert.strictEqual((yield* watched(stack)).filter((d) => a.messageIds.includes(d.response_id ?? "")).length, 0, "nothing through while the service is away")
        yield* proxy.start

        const first = [...a.messageIds, ...b.responseIds, ...c.messageIds]
        const recorded = yield* decisionsOf(stack, first, watcher.output)
        assert.strictEqual(recorded.length, first.length, "every turn once")
        assert.strictEqual(new Set(recorded.map((decision) => decision.ledger_id)).size, first.length)

        // a recorded file deleted while watched, and a new session after it
        Fs.rmSync(aPath)
        const d = claudeSession({ cwd: "/work/d", start: Date.now(), exchanges: exchanges("d", 2) })
        writeTranscript(home, "claude-code", d)
        const all = yield* decisionsOf(stack, [...first, ...d.messageIds], watcher.output)
        assert.strictEqual(all.length, first.length + d.messageIds.length)
        assert.strictEqual(yield* stopped(watcher.child), 130, `stopped by SIGTERM, as an interrupted program: ${watcher.output()}`)
        const summary = JSON.parse(watcher.output().trim().split("\n").filter((line) => line.startsWith("{\"")).at(-1)!) as Summary & { deleted: number }
        assert.deepInclude(summary, { corrupt: 1, deleted: 1, rejected: 0 })
        assert.include(watcher.output(), "cannot be reached")
      }))
  })
})
