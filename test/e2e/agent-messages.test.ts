/**
 * Anthropic Messages through the gateway with the official `@anthropic-ai/sdk`, against the fake providers, down
 * to the decisions the builder makes of them: Anthropic itself (body and headers as sent, events and thinking
 * signatures as received, usage from message_start and the cumulative message_delta priced once), Anthropic models
 * on Bedrock (InvokeModel), Gemini through the chat form (tool calls both ways), count_tokens, and errors in
 * Anthropic's shape.
 */
import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import {
  FAKE_CACHE_READ_TOKENS,
  FAKE_CACHE_WRITE_1H_TOKENS,
  FAKE_CACHE_WRITE_TOKENS,
  FAKE_REASONING,
  FAKE_THINKING_SIGNATURE
} from "../support/fake-providers.ts"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"

const PROVIDER_KEY = "sk-ant-provider-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/MessagesStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

const clientFor = (stack: RecordingStack, headers: Record<string, string> = {}) =>
  new Anthropic({
    baseURL: stack.gatewayUrl,
    apiKey: stack.gatewayKey,
    defaultHeaders: { "x-service-provider-api-key": PROVIDER_KEY, "x-ledger-agent-id": "messages-agent", ...headers },
    maxRetries: 0
  })

const TOOLS: Array<Anthropic.Tool> = [{
  name: "lookup_invoice",
  description: "Find an invoice by number",
  input_schema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] }
}]

/** Sonnet 4.6 list prices, USD per 1M tokens: input, cache read (0.1x), 5-minute write (1.25x), 1-hour write (2x), output. */
const SONNET = { input: 3, read: 0.3, write5m: 3.75, write1h: 6, output: 15 }

const post = (stack: RecordingStack, path: string, body: unknown, headers: Record<string, string>) =>
  Effect.promise(async () => {
    const res = await fetch(`${stack.gatewayUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    return { status: res.status, headers: res.headers, body: await res.json() as any }
  })

describe("Messages through the gateway", () => {
  layer(StackLive, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a bare claude model goes to Anthropic with the body and anthropic-* headers as sent; the decision is priced", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack, { "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14" })
        const { data, response } = yield* Effect.promise(() =>
          client.messages.create({
            model: "claude-sonnet-4-6",
            max_tokens: 256,
            system: "You answer billing questions.",
            messages: [{ role: "user", content: "What is the due date of invoice INV-7?" }]
          }).withResponse()
        )
        assert.strictEqual((data.content[0] as Anthropic.TextBlock).text, "Fake answer to: What is the due date of invoice INV-7?")
        const ledgerId = response.headers.get("x-ledger-id")!
        assert.match(ledgerId, /^[0-9a-f-]{36}$/)

        const sent = stack.fake.requestsOf("anthropic").at(-1)!
        assert.strictEqual(sent.path, "/v1/messages")
        assert.strictEqual(sent.headers["x-api-key"], PROVIDER_KEY)
        assert.strictEqual(sent.headers["anthropic-beta"], "claude-code-20250219,interleaved-thinking-2025-05-14")
        assert.strictEqual(sent.headers["anthropic-version"], "2026-10-21", "the SDK's version header, unchanged")
        assert.notInclude(JSON.stringify(sent), stack.gatewayKey)
        assert.notInclude(JSON.stringify(sent), "messages-agent")
        assert.deepStrictEqual(sent.body.system, "You answer billing questions.")

        const decision = yield* stack.decision(ledgerId)
        assert.strictEqual(decision.api, "messages")
        assert.strictEqual(decision.agent_id, "messages-agent")
        assert.strictEqual(decision.provider, "anthropic")
        assert.strictEqual(decision.outcome, "success")
        assert.strictEqual(decision.logic_trace.at(-1)?.text, "Fake answer to: What is the due date of invoice INV-7?")
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["instruction", "user_turn", "answer"])
        assert.isAbove(decision.cost_usd ?? 0, 0)
      }))

    it.effect("a streamed call with thinking: events and the signature as Anthropic sent them; cached usage priced once, by hand", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const events: Array<string> = []
        const message = yield* Effect.promise(async () => {
          const stream = client.messages.stream({
            model: "claude-sonnet-4-6",
            max_tokens: 2048,
            thinking: { type: "enabled", budget_tokens: 1024 },
            messages: [{ role: "user", content: "Plan the migration of the ledger [[think]]" }]
          })
          stream.on("streamEvent", (event) => void events.push(event.type))
          return await stream.finalMessage()
        })
        const thinking = message.content[0] as Anthropic.ThinkingBlock
        assert.strictEqual(thinking.type, "thinking")
        assert.strictEqual(thinking.thinking, FAKE_REASONING)
        assert.strictEqual(thinking.signature, FAKE_THINKING_SIGNATURE)
        assert.strictEqual((message.content[1] as Anthropic.TextBlock).text, "Fake answer to: Plan the migration of the ledger")
        assert.deepStrictEqual([events[0], events.at(-1)], ["message_start", "message_stop"])
        assert.include(events, "message_delta")
        // the SDK merges message_start's usage with the cumulative message_delta: the counts Anthropic reported
        assert.strictEqual(message.usage.cache_read_input_tokens, FAKE_CACHE_READ_TOKENS)
        assert.strictEqual(message.usage.cache_creation_input_tokens, FAKE_CACHE_WRITE_TOKENS)

        const ledgerId = yield* stack.ledgerIdOf("Plan the migration of the ledger")
        const decision = yield* stack.decision(ledgerId)
        assert.isTrue(decision.stream)
        const input = message.usage.input_tokens
        const output = message.usage.output_tokens
        const expected = (input * SONNET.input + FAKE_CACHE_READ_TOKENS * SONNET.read +
          (FAKE_CACHE_WRITE_TOKENS - FAKE_CACHE_WRITE_1H_TOKENS) * SONNET.write5m + FAKE_CACHE_WRITE_1H_TOKENS * SONNET.write1h +
          output * SONNET.output) / 1_000_000
        assert.closeTo(decision.cost_usd!, expected, 1e-9)
        assert.deepStrictEqual(decision.usage, {
          prompt_tokens: input + FAKE_CACHE_READ_TOKENS + FAKE_CACHE_WRITE_TOKENS,
          completion_tokens: output,
          total_tokens: input + FAKE_CACHE_READ_TOKENS + FAKE_CACHE_WRITE_TOKENS + output,
          cached_tokens: FAKE_CACHE_READ_TOKENS,
          cache_write_tokens: FAKE_CACHE_WRITE_TOKENS,
          cache_write_1h_tokens: FAKE_CACHE_WRITE_1H_TOKENS
        })
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["user_turn", "reasoning", "answer"])
        assert.strictEqual(decision.intent, "planning")
      }))

    it.effect("Anthropic models on Bedrock go through InvokeModel: the Messages body with Bedrock's version and the betas in it", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack, { "anthropic-beta": "context-1m-2025-08-07" })
        const model = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
        const whole = yield* Effect.promise(() =>
          client.messages.create({ model, max_tokens: 100, messages: [{ role: "user", content: "Hello Bedrock" }] })
        )
        assert.strictEqual((whole.content[0] as Anthropic.TextBlock).text, "Fake answer to: Hello Bedrock")
        const streamed = yield* Effect.promise(() =>
          client.messages.stream({ model, max_tokens: 100, messages: [{ role: "user", content: "Stream from Bedrock [[think]]" }] }).finalMessage()
        )
        assert.strictEqual((streamed.content[0] as Anthropic.ThinkingBlock).signature, FAKE_THINKING_SIGNATURE)
        assert.strictEqual((streamed.content[1] as Anthropic.TextBlock).text, "Fake answer to: Stream from Bedrock")

        const [plain, stream] = stack.fake.requestsOf("bedrock").slice(-2)
        assert.strictEqual(plain!.path, `/model/${encodeURIComponent("us.anthropic.claude-sonnet-4-5-20250929-v1:0")}/invoke`)
        assert.strictEqual(stream!.path, `/model/${encodeURIComponent("us.anthropic.claude-sonnet-4-5-20250929-v1:0")}/invoke-with-response-stream`)
        assert.strictEqual(plain!.headers.authorization, `Bearer ${PROVIDER_KEY}`)
        assert.deepInclude(plain!.body, { anthropic_version: "bedrock-2023-05-31", anthropic_beta: ["context-1m-2025-08-07"], max_tokens: 100 })
        assert.notProperty(plain!.body, "model")
        assert.notProperty(stream!.body, "stream")

        const decision = yield* stack.decision(yield* stack.ledgerIdOf("Stream from Bedrock"))
        assert.strictEqual(decision.provider, "bedrock")
        assert.isAbove(decision.cost_usd ?? 0, 0, "Claude on Bedrock is priced from Anthropic's table")
      }))

    it.effect("Gemini through the chat form: tool calls both ways, streamed and not, and the loop's second turn", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const ask: Anthropic.MessageParam = { role: "user", content: "Find invoice INV-9 [[tool]]" }
        const first = yield* Effect.promise(() =>
          client.messages.stream({ model: "gemini/gemini-2.5-flash", max_tokens: 500, tools: TOOLS, messages: [ask] }).finalMessage()
        )
        assert.strictEqual(first.stop_reason, "tool_use")
        const call = first.content.find((block): block is Anthropic.ToolUseBlock => block.type === "tool_use")!
        assert.strictEqual(call.name, "lookup_invoice")
        assert.deepStrictEqual(call.input, { query: "Find invoice INV-9" })
        const { data: second, response } = yield* Effect.promise(() =>
          client.messages.create({
            model: "gemini/gemini-2.5-flash",
            max_tokens: 500,
            tools: TOOLS,
            messages: [ask, { role: "assistant", content: first.content }, {
              role: "user",
              content: [{ type: "tool_result", tool_use_id: call.id, content: "INV-9 is due on May 3" }]
            }]
          }).withResponse()
        )
        assert.strictEqual((second.content[0] as Anthropic.TextBlock).text, 'Tool said: {"result":"INV-9 is due on May 3"}')
        const sent = stack.fake.requestsOf("gemini").at(-1)!.body
        assert.deepStrictEqual(sent.contents.at(-1).parts[0].functionResponse, { name: "lookup_invoice", response: { result: "INV-9 is due on May 3" } })

        const decision = yield* stack.decision(response.headers.get("x-ledger-id")!)
        assert.strictEqual(decision.api, "messages")
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["user_turn", "tool_call", "tool_result", "answer"])
        assert.strictEqual(decision.evidence.find((item) => item.kind === "tool_result")?.source, "lookup_invoice")
      }))

    it.effect("count_tokens is the provider's count (Anthropic, Bedrock, Gemini), never made up: a 404 where there is none", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const messages: Array<Anthropic.MessageParam> = [{ role: "user", content: "How many tokens is this?" }]
        const before = (yield* stack.captures).length
        for (const model of ["claude-sonnet-4-6", "bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0", "gemini/gemini-2.5-flash"]) {
          const count = yield* Effect.promise(() => client.messages.countTokens({ model, messages }))
          assert.isAbove(count.input_tokens, 8, model)
        }
        assert.strictEqual(stack.fake.requestsOf("bedrock").at(-1)!.path, `/model/${encodeURIComponent("anthropic.claude-haiku-4-5-20251001-v1:0")}/count-tokens`)
        const refused = yield* Effect.promise(() => client.messages.countTokens({ model: "openai/gpt-5", messages }).catch((error) => error))
        assert.instanceOf(refused, Anthropic.NotFoundError)
        assert.strictEqual((refused as InstanceType<typeof Anthropic.NotFoundError>).type, "not_found_error")
        yield* stack.settled
        assert.strictEqual((yield* stack.captures).length, before, "counting tokens calls no model: nothing is recorded")
      }))

    it.effect("errors are Anthropic's shape: the gateway's own, and the provider's relayed as sent with its retry-after", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const body = { model: "claude-sonnet-4-6", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }
        const auth = { "x-api-key": stack.gatewayKey, "x-ledger-agent-id": "errors", "x-service-provider-api-key": PROVIDER_KEY }

        const viaApiKey = yield* post(stack, "/v1/messages", body, auth)
        assert.strictEqual(viaApiKey.status, 200, "the Gateway Key as x-api-key, as Anthropic clients send it")
        const noKey = yield* post(stack, "/v1/messages", body, { "x-ledger-agent-id": "errors" })
        assert.strictEqual(noKey.status, 401)
        assert.deepStrictEqual(noKey.body.type, "error")
        assert.strictEqual(noKey.body.error.type, "authentication_error")
        const pat = yield* post(stack, "/v1/messages", body, { ...auth, "x-api-key": stack.pat })
        assert.strictEqual(pat.status, 401, "a Personal Access Token is refused")
        const noMessages = yield* post(stack, "/v1/messages", { model: "claude-sonnet-4-6" }, auth)
        assert.deepStrictEqual([noMessages.status, noMessages.body.error.type], [400, "invalid_request_error"])
        const notJson = yield* post(stack, "/v1/messages", "{", auth)
        assert.deepStrictEqual([notJson.status, notJson.body.type], [400, "error"])
        const noAgent = yield* post(stack, "/v1/messages", body, { "x-api-key": stack.gatewayKey })
        assert.strictEqual(noAgent.status, 400)
        assert.match(noAgent.body.error.message, /x-ledger-agent-id/)

        const limited = yield* post(stack, "/v1/messages", { ...body, messages: [{ role: "user", content: "now [[error:429]]" }] }, auth)
        assert.strictEqual(limited.status, 429)
        assert.deepStrictEqual(limited.body, { type: "error", error: { type: "rate_limit_error", message: "fake anthropic error 429" }, request_id: "req_fake" })
        assert.strictEqual(limited.headers.get("retry-after"), "7")
        assert.match(limited.headers.get("x-ledger-id") ?? "", /^[0-9a-f-]{36}$/)
        const decision = yield* stack.decision(limited.headers.get("x-ledger-id")!)
        assert.deepStrictEqual([decision.outcome, decision.status], ["error", 429])
      }))

    it.effect("Claude Code's session header groups its calls; the client is the agent when none is named", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const session = "8548c6d6-2855-4064-90f9-2455d3b6c7ab"
        const headers = { authorization: `Bearer ${stack.gatewayKey}`, "x-service-provider-api-key": PROVIDER_KEY, "x-claude-code-session-id": session }
        const ids: Array<string> = []
        for (const content of ["first turn", "second turn"]) {
          const answer = yield* post(stack, "/v1/messages?beta=true", { model: "claude-sonnet-4-6", max_tokens: 10, messages: [{ role: "user", content }] }, headers)
          assert.strictEqual(answer.status, 200)
          ids.push(answer.headers.get("x-ledger-id")!)
        }
        const decisions = yield* Effect.forEach(ids, (id) => stack.decision(id))
        assert.deepStrictEqual(decisions.map((d) => [d.agent_id, d.execution_id]), [["claude-code", session], ["claude-code", session]])
        assert.strictEqual(decisions[0]!.session_id, decisions[1]!.session_id)
      }))
  })
})
