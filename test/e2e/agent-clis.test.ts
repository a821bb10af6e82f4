/**
 * The agents people run, recorded through the gateway: the real Claude Code and Codex CLIs, headless, against the
 * fake providers (nothing leaves the machine), down to the decisions the builder makes of every model call they make.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import type { Decision } from "../../src/domain/decision.ts"
import { runClaude, runCodex } from "../support/agent-clis.ts"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"

const PROVIDER_KEY = "sk-provider-agents-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/AgentClisStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

/**
 * The decisions of the calls whose captures are in the stream since `from`, in call order, once there are at least
 * `count` (an agent may exit before the capture of its last call is offered: it comes just after the answer).
 */
const decisionsSince = (stack: RecordingStack, from: number, count: number) =>
  Effect.gen(function*() {
    // up to 15 s: the publisher hands captures over in batches, and a loaded CI machine has been seen past 5 s
    const captures = yield* stack.captures.pipe(
      Effect.repeat({ until: (all) => all.length >= from + count, times: 750, schedule: Schedule.spaced("20 millis") })
    )
    assert.isAtLeast(captures.length, from + count, `${count} capture(s) after the first ${from} within 15 s`)
    return yield* Effect.forEach(captures.slice(from), (capture) => stack.decision(capture.ledger_id))
  })

/** Runs `codex exec` through the stack's gateway on `model`. */
const codexThrough = (stack: RecordingStack, prompt: string, model: string, options: { readonly websockets?: boolean } = {}) =>
  runCodex(prompt, { gatewayUrl: stack.gatewayUrl, gatewayKey: stack.gatewayKey, providerKey: PROVIDER_KEY, model, ...options })

const answerOf = (decision: Decision) => decision.logic_trace.filter((step) => step.kind === "answer" || step.kind === "tool_call").at(-1)

describe("the agents people run, through the gateway", () => {
  layer(StackLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("Claude Code (claude -p): every call a priced decision with its answer; two runs are two sessions; the command it ran", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const options = { gatewayUrl: stack.gatewayUrl, gatewayKey: stack.gatewayKey, providerKey: PROVIDER_KEY }
        const start = (yield* stack.captures).length
        const first = yield* runClaude("Say hello to the ledger", options)
        assert.strictEqual(first.code, 0, first.stderr)
        assert.strictEqual(JSON.parse(first.stdout).result, "Fake answer to: Say hello to the ledger")
        const second = yield* runClaude("[[run:echo hello-from-claude]]", { ...options, args: ["--allowedTools", "Bash"] })
        assert.strictEqual(second.code, 0, second.stderr)
        assert.match(JSON.parse(second.stdout).result, /Tool said: [\s\S]*hello-from-claude/)

        const decisions = yield* decisionsSince(stack, start, 3)
        assert.strictEqual(decisions.length, 3, "one call, then a tool call and the turn reading its result")
        for (const decision of decisions) {
          assert.deepStrictEqual([decision.api, decision.agent_id, decision.provider], ["messages", "claude-code", "anthropic"])
          assert.isDefined(answerOf(decision), "the answer is in the trace")
          assert.isAbove(decision.cost_usd ?? 0, 0, `${decision.model} is priced`)
        }
        const [alone, asked, read] = decisions
        assert.strictEqual(answerOf(alone!)!.text, "Fake answer to: Say hello to the ledger")
        assert.notStrictEqual(alone!.session_id, asked!.session_id, "two runs, two sessions")
        assert.strictEqual(asked!.session_id, read!.session_id)
        assert.strictEqual(asked!.execution_id, JSON.parse(second.stdout).session_id, "Claude Code's own session id")
        assert.deepInclude(asked!.artifacts, { kind: "command", name: "Bash", language: "shell", content: "echo hello-from-claude" })
        const ran = read!.artifacts.find((artifact) => artifact.kind === "command")!
        assert.strictEqual(ran.content, "echo hello-from-claude")
        assert.include(ran.result, "hello-from-claude")
      }))

    it.effect("Codex (codex exec) on anthropic/, translated: shell command turns and the turns carrying their output, one session, past turn 2", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const start = (yield* stack.captures).length
        const result = yield* codexThrough(stack, "[[runs:3:echo hello-from-codex]]", "anthropic/claude-sonnet-4-6")
        assert.strictEqual(result.code, 0, result.stderr)
        assert.match(result.stdout, /Tool said: [\s\S]*hello-from-codex 3/)

        const decisions = yield* decisionsSince(stack, start, 4)
        assert.strictEqual(decisions.length, 4, "three turns asking for a command, and the answer")
        for (const decision of decisions) {
          assert.deepStrictEqual([decision.api, decision.agent_id, decision.provider, decision.model], ["responses", "codex", "anthropic", "claude-sonnet-4-6"])
          assert.isAbove(decision.cost_usd ?? 0, 0)
          assert.strictEqual(decision.session_id, decisions[0]!.session_id, "one Codex session")
        }
        assert.isNotNull(decisions[0]!.execution_id, "Codex's session id from x-codex-turn-metadata")
        decisions.forEach((decision, turn) => {
          if (turn < 3) {
            assert.strictEqual(decision.outcome, "tool_call")
            assert.deepInclude(decision.artifacts, { kind: "command", name: "exec_command", language: "shell", content: `echo hello-from-codex ${turn + 1}` })
          }
          if (turn > 0) {
            // the turn after a command carries what it printed
            const ran = decision.artifacts.find((artifact) => artifact.kind === "command" && artifact.result !== undefined)!
            assert.strictEqual(ran.content, `echo hello-from-codex ${turn}`)
            assert.include(ran.result, `hello-from-codex ${turn}`)
          }
        })
        const last = decisions[3]!
        assert.match(answerOf(last)!.text, /Tool said: [\s\S]*hello-from-codex 3/)
        assert.deepStrictEqual(last.logic_trace.filter((step) => step.kind === "tool_call" || step.kind === "tool_result").map((step) => step.kind), [
          "tool_call", "tool_result", "tool_call", "tool_result", "tool_call", "tool_result"
        ])
      }))

    it.effect("Codex over its WebSocket transport: the warm-up, then each turn a decision that carries the turns it continues", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const start = (yield* stack.captures).length
        const result = yield* codexThrough(stack, "[[run:echo hello-over-websocket]]", "anthropic/claude-sonnet-4-6", { websockets: true })
        assert.strictEqual(result.code, 0, result.stderr)
        assert.match(result.stdout, /Tool said: [\s\S]*hello-over-websocket/)
        assert.notInclude(result.stderr, "Falling back from WebSockets", "Codex stayed on the socket")

        const decisions = yield* decisionsSince(stack, start, 2)
        assert.strictEqual(decisions.length, 2, "the warm-up calls no model: two turns, two decisions")
        const captures = (yield* stack.captures).slice(start)
        for (const capture of captures) assert.strictEqual(JSON.parse(capture.request).type, "response.create", "each turn captured as sent")
        assert.isDefined(captures[1]!.context, "a turn sends only its new input: the gateway joined the earlier turns")
        const [asked, read] = decisions
        assert.strictEqual(asked!.session_id, read!.session_id)
        assert.deepInclude(asked!.artifacts, { kind: "command", name: "exec_command", language: "shell", content: "echo hello-over-websocket" })
        assert.include(read!.artifacts.find((artifact) => artifact.kind === "command")!.result, "hello-over-websocket")
        // the joined turns: Codex's instructions, the user's ask, the call and its output, then the answer
        const kinds = read!.logic_trace.map((step) => step.kind)
        assert.deepStrictEqual(kinds.slice(-3), ["tool_call", "tool_result", "answer"])
        assert.include(kinds, "instruction")
        assert.strictEqual(read!.title, "[[run:echo hello-over-websocket]]")
      }))

    it.effect("Codex on OpenAI, as it is: the decision has Codex's own items and tools", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const start = (yield* stack.captures).length
        const result = yield* codexThrough(stack, "Summarise the ledger in one line", "gpt-5.5")
        assert.strictEqual(result.code, 0, result.stderr)
        const [decision] = yield* decisionsSince(stack, start, 1)
        assert.deepStrictEqual([decision!.provider, decision!.model, decision!.intent], ["openai", "gpt-5.5", "summarization"])
        assert.strictEqual(decision!.title, "Summarise the ledger in one line")
        const sent = stack.fake.requestsOf("openai").at(-1)!.body
        assert.includeDeepMembers(sent.tools.map((tool: { type: string }) => tool.type), ["custom", "web_search"], "apply_patch and hosted tools pass through")
      }))
  })
})
