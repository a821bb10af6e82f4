/**
 * The OpenAI Responses API through the gateway with the official `openai` SDK, against the fake providers, down to
 * the decisions the builder makes of them: OpenAI itself (the body as sent, events as received), Azure, Anthropic,
 * Gemini and Bedrock by translation (function and custom tools, reasoning carried between turns, the SDK's strict
 * stream helper), `previous_response_id` chains on both kinds of provider, and errors.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import OpenAI from "openai"
import type { ResponseInputItem } from "openai/resources/responses/responses"
import { FAKE_CACHE_READ_TOKENS, FAKE_REASONING } from "../support/fake-providers.ts"
import { gatewayClient } from "../support/openai-client.ts"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"

const PROVIDER_KEY = "sk-provider-responses-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/ResponsesStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

const clientFor = (stack: RecordingStack, query: Record<string, string> = { agent_id: "responses-agent" }) =>
  gatewayClient(stack, { query, providerKey: PROVIDER_KEY })

const TOOLS: Array<OpenAI.Responses.Tool> = [
  { type: "function", name: "lookup_invoice", description: "Find an invoice", parameters: { type: "object", properties: { query: { type: "string" } } }, strict: false },
  { type: "custom", name: "apply_patch", description: "Edit files", format: { type: "grammar", syntax: "lark", definition: "start: /.+/" } }
]

const headerLedgerId = (response: Response) => response.headers.get("x-ledger-id")!

/** The second call's decision continues the first's: linked to it, in its session, its logic trace all four turns. */
const assertContinues = (stack: RecordingStack, first: Response, second: Response, turns: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const before = yield* stack.decision(headerLedgerId(first))
    // linked whichever of the two a builder stored first
    const after = yield* stack.decision(headerLedgerId(second), (decision) => decision.previous_ledger_id !== null)
    assert.strictEqual(after.previous_ledger_id, before.ledger_id)
    assert.strictEqual(after.session_id, before.session_id)
    assert.deepStrictEqual(after.logic_trace.map((step) => step.text), turns)
  })

describe("the Responses API through the gateway", () => {
  layer(StackLive, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a bare model goes to OpenAI with the body as sent (Codex's own items untouched); the decision is priced", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const input: Array<ResponseInputItem> = [
          { type: "message", role: "developer", content: "You are a coding agent." },
          { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAAA-opaque-to-the-gateway" } as ResponseInputItem,
          { type: "custom_tool_call", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch\n*** End Patch\n" },
          { type: "custom_tool_call_output", call_id: "call_p", output: "Done!" },
          { type: "message", role: "user", content: "What is the capital of France?" }
        ]
        const { data, response } = yield* Effect.promise(() =>
          client.responses.create({ model: "gpt-5.1", input, tools: TOOLS, reasoning: { effort: "low" } }).withResponse()
        )
        assert.strictEqual(data.output_text, "Fake answer to: What is the capital of France?")
        const sent = stack.fake.requestsOf("openai").at(-1)!
        assert.strictEqual(sent.path, "/v1/responses")
        assert.strictEqual(sent.headers.authorization, `Bearer ${PROVIDER_KEY}`)
        assert.deepStrictEqual(sent.body.input, input, "every item as the caller wrote it")
        assert.deepStrictEqual(sent.body.tools, TOOLS)

        const decision = yield* stack.decision(headerLedgerId(response))
        assert.deepStrictEqual([decision.api, decision.provider, decision.model, decision.outcome], ["responses", "openai", "gpt-5.1", "success"])
        assert.strictEqual(decision.response_id, data.id)
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["instruction", "tool_call", "tool_result", "user_turn", "answer"])
        assert.strictEqual(decision.logic_trace.at(-1)!.text, "Fake answer to: What is the capital of France?")
        assert.strictEqual(decision.usage?.cached_tokens, FAKE_CACHE_READ_TOKENS)
        assert.isAbove(decision.cost_usd ?? 0, 0)
      }))

    it.effect("streamed from OpenAI: the SDK's stream helper gets the events as sent; the capture is the completed response", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const events: Array<string> = []
        const final = yield* Effect.promise(async () => {
          const stream = client.responses.stream({ model: "gpt-5.1", input: "Explain the retry policy [[think]]" })
          stream.on("event", (event) => void events.push(event.type))
          return await stream.finalResponse()
        })
        assert.strictEqual(final.output_text, "Fake answer to: Explain the retry policy")
        assert.deepStrictEqual([events[0], events.at(-1)], ["response.created", "response.completed"])
        const decision = yield* stack.decision(yield* stack.ledgerIdOf("Explain the retry policy"))
        assert.isTrue(decision.stream)
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["user_turn", "reasoning", "answer"])
        assert.strictEqual(decision.logic_trace[1]!.text, FAKE_REASONING)
      }))

    it.effect("Azure's v1 Responses API: the deployment as the model, the key in api-key", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* Effect.promise(() => clientFor(stack).responses.create({ model: "azure/my-gpt5-deployment", input: "Hello Azure" }))
        assert.strictEqual(answer.output_text, "Fake answer to: Hello Azure")
        const sent = stack.fake.requestsOf("azure").at(-1)!
        assert.strictEqual(sent.path, "/openai/v1/responses")
        assert.strictEqual(sent.headers["api-key"], PROVIDER_KEY)
        assert.strictEqual(sent.body.model, "my-gpt5-deployment")
      }))

    for (const [prefix, model] of [["anthropic", "claude-sonnet-4-6"], ["gemini", "gemini-2.5-flash"], ["bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"]] as const) {
      it.effect(`${prefix}/ by translation: the stream helper's strict checks pass; tools come back as the items declared`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const client = clientFor(stack)
          const events: Array<string> = []
          const first = yield* Effect.promise(async () => {
            const stream = client.responses.stream({ model: `${prefix}/${model}`, input: "Find invoice INV-3 [[tool]]", tools: TOOLS })
            stream.on("event", (event) => void events.push(event.type))
            return await stream.finalResponse()
          })
          assert.deepStrictEqual([events[0], events[1], events.at(-1)], ["response.created", "response.in_progress", "response.completed"])
          const call = first.output.find((item) => item.type === "function_call")!
          assert.strictEqual(call.name, "lookup_invoice")
          assert.deepStrictEqual(JSON.parse(call.arguments), { query: "Find invoice INV-3" })
          assert.match(first.id, /^resp_ldg_[0-9a-f]{32}$/)
          assert.isAbove(first.usage!.input_tokens, 0)

          // the next turn carries the call's output; non-streamed this time
          const { data: second, response } = yield* Effect.promise(() =>
            client.responses.create({
              model: `${prefix}/${model}`,
              tools: TOOLS,
              input: [
                { type: "message", role: "user", content: "Find invoice INV-3 [[tool]]" },
                ...first.output as Array<ResponseInputItem>,
                { type: "function_call_output", call_id: call.call_id, output: "INV-3 is paid" }
              ]
            }).withResponse()
          )
          assert.match(second.output_text, /^Tool said: .*INV-3 is paid/)
          const decision = yield* stack.decision(response.headers.get("x-ledger-id")!)
          assert.deepStrictEqual([decision.api, decision.provider], ["responses", prefix])
          assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["user_turn", "tool_call", "tool_result", "answer"])
          assert.isAbove(decision.cost_usd ?? 0, 0)
        }))
    }

    it.effect("a custom tool (apply_patch) on a translated provider is called as a custom_tool_call with its input", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const patchOnly: Array<OpenAI.Responses.Tool> = [TOOLS[1]!]
        const answer = yield* Effect.promise(() =>
          clientFor(stack).responses.create({ model: "anthropic/claude-sonnet-4-6", input: "Fix the typo [[tool]]", tools: patchOnly })
        )
        const call = answer.output.find((item) => item.type === "custom_tool_call")!
        assert.strictEqual(call.name, "apply_patch")
        const sent = stack.fake.requestsOf("anthropic").at(-1)!.body
        assert.deepStrictEqual(sent.tools[0].input_schema.required, ["input"])
        assert.include(sent.tools[0].description, "start: /.+/", "the grammar goes with the tool's description")
      }))

    it.effect("a chained call sent at once after its predecessor, on a translated provider, carries the earlier turns", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const { data: first, response: firstResponse } = yield* Effect.promise(() =>
          client.responses.create({ model: "anthropic/claude-sonnet-4-6", instructions: "Be brief.", input: "My invoice number is INV-42." }).withResponse()
        )
        const { data: second, response: secondResponse } = yield* Effect.promise(() =>
          client.responses.create({ model: "anthropic/claude-sonnet-4-6", previous_response_id: first.id, input: "What is my invoice number?" }).withResponse()
        )
        assert.strictEqual(second.output_text, "Fake answer to: What is my invoice number?")
        assert.strictEqual(second.previous_response_id, first.id)
        const sent = stack.fake.requestsOf("anthropic").at(-1)!.body
        assert.deepStrictEqual(sent.messages.map((message: any) => [message.role, message.content[0].text]), [
          ["user", "My invoice number is INV-42."],
          ["assistant", "Fake answer to: My invoice number is INV-42."],
          ["user", "What is my invoice number?"]
        ])

        yield* assertContinues(stack, firstResponse, secondResponse, [
          "My invoice number is INV-42.",
          "Fake answer to: My invoice number is INV-42.",
          "What is my invoice number?",
          "Fake answer to: What is my invoice number?"
        ])
        const unknown = yield* Effect.promise(() =>
          client.responses.create({ model: "anthropic/claude-sonnet-4-6", previous_response_id: "resp_unknown", input: "hi" }).catch((error) => error)
        )
        assert.instanceOf(unknown, OpenAI.BadRequestError)
        assert.strictEqual(unknown.code, "previous_response_not_found")
      }))

    it.effect("a chain on OpenAI (which keeps it): the decision links to its predecessor, joins its session and opens with its turns", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack, { agent_id: "chain-agent" })
        const first = yield* Effect.promise(() => client.responses.create({ model: "gpt-5.1", input: "Remember the code PAY-77." }).withResponse())
        const second = yield* Effect.promise(() =>
          client.responses.create({ model: "gpt-5.1", previous_response_id: first.data.id, input: "Which code?" }).withResponse()
        )
        yield* assertContinues(stack, first.response, second.response, [
          "Remember the code PAY-77.",
          "Fake answer to: Remember the code PAY-77.",
          "Which code?",
          "Fake answer to: Which code?"
        ])
      }))

    it.effect("`ledger rebuild` re-derives every decision of these APIs the same way, chains included", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        yield* stack.settled
        // every capture built (or dead-lettered: none are) before the rebuild reads them
        const captures = (yield* stack.captures).map((capture) => capture.ledger_id)
        yield* Effect.forEach(captures, (id) => stack.decision(id))
        const result = yield* stack.rebuilder.run()
        assert.deepInclude(result, { decisions: captures.length, changed: 0, unreadable: 0 })
      }))

    it.effect("errors: the gateway's own and the provider's in the OpenAI shape, the provider's status kept", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const badInput = yield* Effect.promise(() => client.responses.create({ model: "gpt-5.1", input: 42 as never }).catch((error) => error))
        assert.instanceOf(badInput, OpenAI.BadRequestError)
        assert.strictEqual(badInput.param, "input")
        const unknownProvider = yield* Effect.promise(() => client.responses.create({ model: "nowhere/model", input: "hi" }).catch((error) => error))
        assert.strictEqual(unknownProvider.code, "unknown_provider")
        for (const model of ["gpt-5.1", "anthropic/claude-sonnet-4-6"]) {
          const limited = yield* Effect.promise(() => client.responses.create({ model, input: "now [[error:429]]" }).catch((error) => error))
          assert.instanceOf(limited, OpenAI.RateLimitError, model)
          const decision = yield* stack.decision(limited.headers.get("x-ledger-id")!)
          assert.deepStrictEqual([decision.outcome, decision.status], ["error", 429])
        }
        const failed = yield* Effect.promise(async () => {
          const stream = await client.responses.create({ model: "anthropic/claude-sonnet-4-6", input: "go [[stream-error]]", stream: true })
          try {
            for await (const _ of stream) { /* drain */ }
            return undefined
          } catch (error) {
            return error
          }
        })
        assert.instanceOf(failed, OpenAI.APIError, "a provider failure mid-stream reaches the SDK as an error")
      }))

  })
})
