/**
 * The watcher, end to end with the real clients: Claude Code and Codex run headless straight at the fake providers
 * (no gateway, as on a subscription), with a HOME of the test's own; then `ledger watch --once` reads their
 * transcripts and sends the turns to the gateway, and the builder makes them decisions.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import * as Path from "node:path"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import type { Decision } from "../../src/domain/decision.ts"
import { runClaude, runCodex } from "../support/agent-clis.ts"
import { ledger } from "../support/ledger-cli.ts"
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

/** The decisions made from transcript turns, by the provider's answer id. */
const watched = (stack: RecordingStack) =>
  Effect.gen(function*() {
    yield* stack.settled
    yield* built(stack)
    const captures = (yield* stack.captures).filter((capture) => capture.source !== undefined)
    const decisions = yield* Effect.forEach([...new Set(captures.map((capture) => capture.ledger_id))], (id) =>
      stack.query.getDecision(stack.reader, id).pipe(Effect.option))
    return decisions.flatMap((decision) => (decision._tag === "Some" ? [decision.value] : []))
  })

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
  })
})
