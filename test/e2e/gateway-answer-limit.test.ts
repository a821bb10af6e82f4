/**
 * Answers larger than LEDGER_CAPTURE_MAX_ANSWER_BYTES on every way through the gateway — relayed streams (chat
 * completions, Messages, Responses), translated streams (Anthropic as chat completions, as Responses), and a whole
 * answer: the caller gets every byte; the capture keeps at most the limit, in the answer's own shape, marked with the
 * full size, with the finish and usage of the answer's end; the decision's quality says the capture was cut. An
 * answer within the limit is kept exactly as it was.
 */
import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { derive } from "../../src/derive/derive.ts"
import { truncationOf } from "../../src/domain/truncation.ts"
import { type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"

const LIMIT = 64 * 1024
const LONG_KB = 256

class Stack extends Context.Service<Stack, GatewayStack>()("test/AnswerLimitStack") {}
const StackLive = Layer.effect(Stack, gatewayStack({ settings: { captureMaxAnswerBytes: LIMIT }, fake: { chunkDelayMs: 0 } }))

interface Way {
  readonly name: string
  readonly path: string
  readonly body: (content: string) => Record<string, unknown>
  readonly headers?: Record<string, string>
}

const WAYS: ReadonlyArray<Way> = [
  { name: "chat, relayed", path: "/v1/chat/completions", body: (content) => ({ model: "openai/gpt-4o-mini", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }] }) },
  { name: "chat, translated from Anthropic", path: "/v1/chat/completions", body: (content) => ({ model: "anthropic/claude-sonnet-4-6", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }] }) },
  { name: "chat, whole", path: "/v1/chat/completions", body: (content) => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }] }) },
  { name: "messages, relayed", path: "/v1/messages", headers: { "anthropic-version": "2023-06-01" }, body: (content) => ({ model: "claude-sonnet-4-6", max_tokens: 100_000, stream: true, messages: [{ role: "user", content }] }) },
  { name: "responses, relayed", path: "/v1/responses", body: (content) => ({ model: "gpt-5.1", stream: true, input: content }) },
  { name: "responses, translated from Anthropic", path: "/v1/responses", body: (content) => ({ model: "anthropic/claude-sonnet-4-6", stream: true, input: content }) }
]

const call = (stack: GatewayStack, way: Way, content: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${stack.gatewayUrl}${way.path}?agent_id=limit-${way.name.replace(/\W+/g, "-")}`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.gatewayKey}`, "content-type": "application/json", "x-service-provider-api-key": "sk-provider-limit", ...way.headers },
      body: JSON.stringify(way.body(content))
    })
    const text = await response.text()
    return { status: response.status, xs: text.split("x").length - 1, ledgerId: response.headers.get("x-ledger-id")! }
  })

layer(StackLive, { timeout: 120_000, excludeTestServices: true })("answers larger than a capture keeps", (it) => {
  it.effect("are relayed whole and captured cut to the limit, marked, with their end; the decision says so", () =>
    Effect.gen(function*() {
      const stack = yield* Stack
      for (const way of WAYS) {
        const relayed = yield* call(stack, way, `[[long:${LONG_KB}]] tell me everything`)
        assert.strictEqual(relayed.status, 200, way.name)
        assert.isAtLeast(relayed.xs, LONG_KB * 1023, `${way.name}: the caller got the whole answer`)
        const capture = yield* stack.capture(relayed.ledgerId)
        assert.isAtMost(Buffer.byteLength(capture.response!), LIMIT, `${way.name}: the capture is within the limit`)
        const answer = JSON.parse(capture.response!)
        const mark = truncationOf(answer)
        assert.isDefined(mark, `${way.name}: marked`)
        assert.isAtLeast(mark!.response_bytes, LONG_KB * 1024, `${way.name}: the full size`)
        assert.strictEqual(mark!.limit_bytes, LIMIT)
        const derivation = derive(capture)
        assert.notStrictEqual(derivation.outcome, "error", way.name)
        assert.isTrue(
          derivation.quality.reasons.some((reason) => /^the answer was \d+\.\d MB; the capture kept 0\.1 MB of it/.test(reason)),
          `${way.name}: ${derivation.quality.reasons.join("; ")}`
        )
        // the end of the answer survived: its usage (from the capture or the kept answer) and its finish
        const usage = capture.usage ?? answer.usage
        assert.isDefined(usage, `${way.name}: usage`)
        assert.isNotNull(usage, `${way.name}: usage`)
      }
    }))

  it.effect("an answer within the limit is kept as it was", () =>
    Effect.gen(function*() {
      const stack = yield* Stack
      for (const way of WAYS) {
        const relayed = yield* call(stack, way, "[[long:16]] a little")
        const capture = yield* stack.capture(relayed.ledgerId)
        assert.isUndefined(truncationOf(JSON.parse(capture.response!)), way.name)
        assert.isAtLeast(capture.response!.split("x").length - 1, 16 * 1023, `${way.name}: the whole answer`)
      }
    }))
})
