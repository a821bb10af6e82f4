/**
 * Embeddings through the gateway with the official `openai` SDK: OpenAI, Azure and named upstreams as they are, Gemini and Bedrock (Titan, Cohere)
 * translated; each call a priced decision that keeps what was embedded and how, never the vectors.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import OpenAI from "openai"
import { gatewayClient } from "../support/openai-client.ts"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"

const PROVIDER_KEY = "sk-provider-embeddings-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/EmbeddingsStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

const clientFor = (stack: RecordingStack) => gatewayClient(stack, { query: { agent_id: "indexer" }, providerKey: PROVIDER_KEY })

const INPUTS = ["The payment service retries three times.", "Invoices are due in thirty days."]

describe("embeddings through the gateway", () => {
  layer(StackLive, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("OpenAI: the vectors reach the caller; the decision is priced from the usage, and the capture has no vectors", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const { data, response } = yield* Effect.promise(() =>
          clientFor(stack).embeddings.create({ model: "text-embedding-3-small", input: INPUTS, dimensions: 256 }).withResponse()
        )
        assert.strictEqual(data.data.length, 2)
        assert.strictEqual(data.data[0]!.embedding.length, 256, "the SDK's default base64 encoding decodes to the vector")
        const ledgerId = response.headers.get("x-ledger-id")!
        const capture = yield* stack.capture(ledgerId)
        assert.strictEqual(capture.api, "embeddings")
        assert.isBelow(capture.response!.length, 200, "the capture keeps a summary, not the vectors")
        assert.deepInclude(JSON.parse(capture.response!), { data: 2, usage: data.usage })

        const decision = yield* stack.decision(ledgerId)
        assert.strictEqual(decision.title, `Embed 2 inputs (${INPUTS.join("").length} characters) with text-embedding-3-small`)
        assert.strictEqual(decision.outcome, "success")
        assert.closeTo(decision.cost_usd!, data.usage.prompt_tokens * 0.02 / 1_000_000, 1e-12)
        assert.deepStrictEqual(decision.logic_trace.map((step) => step.kind), ["user_turn", "answer"])
        assert.strictEqual(decision.logic_trace[1]!.text, "2 embeddings of 256 dimensions")
        assert.strictEqual(decision.evidence[0]!.kind, "user_content")
      }))

    it.effect("Azure (the deployment as the model, the key in api-key) and a named upstream pass through the same way", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        for (const [model, provider, path] of [
          ["azure/my-embedding-deployment", "azure", "/openai/v1/embeddings"],
          ["compat/nomic-embed-text", "openai_compatible", "/compat/v1/embeddings"]
        ] as const) {
          const { data, response } = yield* Effect.promise(() => client.embeddings.create({ model, input: INPUTS, encoding_format: "float" }).withResponse())
          assert.strictEqual(data.data.length, 2)
          const sent = stack.fake.requestsOf(provider).at(-1)!
          assert.strictEqual(sent.path, path)
          assert.strictEqual(sent.body.model, model.slice(model.indexOf("/") + 1))
          assert.deepStrictEqual(sent.body.input, INPUTS)
          if (provider === "azure") assert.strictEqual(sent.headers["api-key"], PROVIDER_KEY)

          const decision = yield* stack.decision(response.headers.get("x-ledger-id")!)
          assert.strictEqual(decision.api, "embeddings")
          assert.strictEqual(decision.outcome, "success")
          assert.strictEqual(decision.model, model.slice(model.indexOf("/") + 1))
          assert.strictEqual(decision.usage!.prompt_tokens, data.usage.prompt_tokens)
        }
      }))

    it.effect("Gemini (batchEmbedContents) and Bedrock (Titan with its token count, Cohere with the header's) by translation", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const viaGemini = yield* Effect.promise(() => client.embeddings.create({ model: "gemini/gemini-embedding-001", input: INPUTS, dimensions: 768 }))
        assert.deepStrictEqual(viaGemini.data.map((item) => item.embedding.length), [768, 768])
        assert.deepStrictEqual(stack.fake.requestsOf("gemini").at(-1)!.body.requests[1], {
          model: "models/gemini-embedding-001",
          content: { parts: [{ text: INPUTS[1] }] },
          outputDimensionality: 768
        })

        const titan = yield* Effect.promise(() =>
          client.embeddings.create({ model: "bedrock/amazon.titan-embed-text-v2:0", input: INPUTS[0]!, encoding_format: "float" }).withResponse()
        )
        assert.strictEqual(titan.data.data[0]!.embedding.length, 1024)
        assert.deepStrictEqual(stack.fake.requestsOf("bedrock").at(-1)!.body, { inputText: INPUTS[0], normalize: true })
        const cohere = yield* Effect.promise(() => client.embeddings.create({ model: "bedrock/cohere.embed-english-v3", input: INPUTS }).withResponse())
        assert.strictEqual(cohere.data.data.length, 2)

        for (const { response, data } of [titan, cohere]) {
          const decision = yield* stack.decision(response.headers.get("x-ledger-id")!)
          assert.closeTo(decision.cost_usd!, data.usage.prompt_tokens * (decision.model.startsWith("amazon") ? 0.02 : 0.1) / 1_000_000, 1e-12)
        }
        const oneAtATime = yield* Effect.promise(() => client.embeddings.create({ model: "bedrock/amazon.titan-embed-text-v2:0", input: INPUTS }).catch((error) => error))
        assert.instanceOf(oneAtATime, OpenAI.BadRequestError)
        assert.match(oneAtATime.message, /one input per call/)
      }))

    it.effect("bad input and providers without embeddings get a 400; a provider's error keeps its status", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const client = clientFor(stack)
        const anthropic = yield* Effect.promise(() => client.embeddings.create({ model: "anthropic/claude-sonnet-4-6", input: "x" }).catch((error) => error))
        assert.instanceOf(anthropic, OpenAI.BadRequestError)
        assert.strictEqual(anthropic.code, "unsupported_for_provider")
        const empty = yield* Effect.promise(() => client.embeddings.create({ model: "text-embedding-3-small", input: [] }).catch((error) => error))
        assert.strictEqual(empty.param, "input")
        const limited = yield* Effect.promise(() => client.embeddings.create({ model: "text-embedding-3-small", input: "x [[embeddings-error:429]]" }).catch((error) => error))
        assert.instanceOf(limited, OpenAI.RateLimitError)
        const decision = yield* stack.decision(limited.headers.get("x-ledger-id")!)
        assert.deepStrictEqual([decision.outcome, decision.status], ["error", 429])
      }))
  })
})
