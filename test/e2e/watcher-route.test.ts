/**
 * The gateway's `POST /v1/watcher/turns`: a Gateway Key only, each turn taken or refused on its own, a request it
 * cannot read refused whole with a 4xx in the gateway's error shape, and a turn taken becoming the capture of the
 * call it records — the same capture (the same ledger id) however often it is sent.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { truncationOf } from "../../src/domain/truncation.ts"
import { ClaudeCodeTranscript } from "../../src/watcher/claudeCode.ts"
import { type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import { claudeSession } from "../support/transcripts.ts"

class Stack extends Context.Service<Stack, GatewayStack>()("test/WatcherRouteStack") {}
const MAX_ANSWER = 64 * 1024
const StackLive = Layer.effect(Stack, gatewayStack({ stream: "memory", settings: { gatewayMaxBodyBytes: 256 * 1024, captureMaxAnswerBytes: MAX_ANSWER } }))

const turn = () => {
  const session = claudeSession({ cwd: "/work/project", start: Date.UTC(2026, 10, 26, 9), exchanges: [{ prompt: "hello", answer: "hi there" }] })
  const reader = new ClaudeCodeTranscript()
  const [read] = [...session.lines.flatMap((line) => reader.line(line, 0)), ...reader.idle(0)]
  return { ...read!.turn, agent_id: "claude-code", agent_name: "Claude Code" }
}

const post = (stack: GatewayStack, body: string, authorization = `Bearer ${stack.gatewayKey}`) =>
  Effect.promise(async () => {
    const response = await fetch(`${stack.gatewayUrl}/v1/watcher/turns`, { method: "POST", headers: { authorization, "content-type": "application/json" }, body })
    return { status: response.status, body: await response.json() as any }
  })

describe("POST /v1/watcher/turns", () => {
  layer(StackLive, { excludeTestServices: true })((it) => {
    it.effect("takes each turn on its own; a turn sent again is the same capture", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const good = turn()
        const answer = yield* post(stack, JSON.stringify({ turns: [good, { ...good, model: "" }, { ...good, request: "{not json" }, good] }))
        assert.strictEqual(answer.status, 200)
        const [taken, noModel, badRequest, again] = answer.body.turns
        assert.strictEqual(taken.status, "accepted")
        assert.deepStrictEqual(again, taken, "the same turn, the same decision")
        assert.strictEqual(noModel.status, "rejected")
        assert.include(badRequest.error, "JSON")
        const capture = yield* stack.capture(taken.ledger_id)
        assert.deepInclude(capture, {
          api: "messages", provider: "anthropic", agent_id: "claude-code", agent_name: "Claude Code", execution_id: good.session_id,
          key_id: stack.principal.token_id, status: 200
        })
        assert.deepStrictEqual(capture.source, { kind: "watcher", client: "claude-code", client_version: "2.1.331", cwd: "/work/project", git_branch: "main" })
      }))

    it.effect("a turn's answer larger than a capture keeps is cut to the limit and marked, as through the gateway", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const good = turn()
        const long = JSON.parse(good.response)
        long.content = [{ type: "text", text: "y".repeat(150 * 1024) }]
        const answer = yield* post(stack, JSON.stringify({ turns: [{ ...good, turn_id: `${good.turn_id}-long`, response: JSON.stringify(long) }] }))
        const capture = yield* stack.capture(answer.body.turns[0].ledger_id)
        assert.isAtMost(Buffer.byteLength(capture.response!), MAX_ANSWER)
        const kept = JSON.parse(capture.response!)
        assert.isAtLeast(truncationOf(kept)!.response_bytes, 150 * 1024)
        assert.strictEqual(kept.content[0].type, "text")
      }))

    it.effect("refused whole, in the gateway's error shape: no Gateway Key, a PAT, not JSON, no turns, too many, too large", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const cases: ReadonlyArray<readonly [string, { status: number; body: any }, number, string]> = [
          ["no key", yield* post(stack, JSON.stringify({ turns: [] }), ""), 401, "missing_api_key"],
          ["a PAT", yield* post(stack, JSON.stringify({ turns: [] }), `Bearer ${stack.pat}`), 401, "invalid_api_key"],
          ["not JSON", yield* post(stack, "{turns:"), 400, "invalid_json"],
          ["no turns", yield* post(stack, JSON.stringify({ turn: {} })), 400, "invalid_request"],
          ["too many", yield* post(stack, JSON.stringify({ turns: Array.from({ length: 501 }, () => ({})) })), 400, "too_many_turns"],
          ["too large", yield* post(stack, JSON.stringify({ turns: [{ ...turn(), request: JSON.stringify("x".repeat(300 * 1024)) }] })), 413, "request_too_large"]
        ]
        for (const [what, answer, status, code] of cases) {
          assert.strictEqual(answer.status, status, what)
          assert.strictEqual(answer.body.error?.code, code, what)
          assert.isString(answer.body.error?.message, what)
        }
      }))
  })
})
