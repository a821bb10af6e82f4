/**
 * Bad input on the agents' routes — Responses, Messages, count_tokens, embeddings — for a provider that speaks the
 * API and for one reached by translation: always a 4xx in that API's own error shape, never a 5xx, and the gateway
 * keeps serving.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"

class Stack extends Context.Service<Stack, GatewayStack>()("test/BadInputStack") {}
const StackLive = Layer.effect(Stack, gatewayStack({ stream: "memory" }))

const send = (stack: GatewayStack, path: string, body: string) =>
  Effect.promise(async () => {
    const res = await fetch(`${stack.gatewayUrl}${path}?agent_id=fuzz`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.gatewayKey}`, "content-type": "application/json", "x-service-provider-api-key": "sk-provider-fuzz" },
      body
    })
    const text = await res.text()
    let json: any
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: res.status, json, text }
  })

/** Bodies no route takes, whatever the model. */
const ANY_ROUTE = ["not json", "[]", "42", "null", "\"text\"", "{}", '{"model":5}', '{"model":""}', '{"model":"nowhere/x"}', '{"model":"/x"}', '{"model":"openai/"}']

const body = (model: string, rest: object) => JSON.stringify({ model, ...rest })

const CASES: ReadonlyArray<{ readonly path: string; readonly shape: "openai" | "anthropic"; readonly models: ReadonlyArray<string>; readonly bodies: (model: string) => ReadonlyArray<string> }> = [
  {
    path: "/v1/responses",
    shape: "openai",
    models: ["gpt-5.1", "anthropic/claude-sonnet-4-6", "gemini/gemini-2.5-flash"],
    bodies: (model) => [
      body(model, { input: 5 }),
      body(model, { input: [1] }),
      body(model, { input: [null] }),
      body(model, { input: "x", stream: "yes" }),
      body(model, { input: "x", tools: "lookup" }),
      body(model, { input: "x", previous_response_id: 5 }),
      ...(model.includes("/")
        ? [
          body(model, { input: [{ type: "message", role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] }),
          body(model, { input: [{ type: "message", role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] }),
          body(model, { input: [{ type: "message", role: "user", content: [null] }] }),
          body(model, { input: "x", previous_response_id: "resp_unknown" })
        ]
        : [])
    ]
  },
  {
    path: "/v1/messages",
    shape: "anthropic",
    models: ["claude-sonnet-4-6", "gemini/gemini-2.5-flash", "bedrock/amazon.nova-pro-v1:0"],
    bodies: (model) => [
      body(model, {}),
      body(model, { messages: [] }),
      body(model, { messages: "hi" }),
      body(model, { messages: [5] }),
      body(model, { messages: [{ role: "user" }] }),
      body(model, { messages: [{ role: "user", content: "x" }], stream: 1 }),
      ...(model.includes("/")
        ? [
          body(model, { max_tokens: 10, messages: [{ role: "user", content: [null] }] }),
          body(model, { max_tokens: 10, messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }),
          body(model, { max_tokens: 10, messages: [{ role: "user", content: "x" }], tools: "lookup" })
        ]
        : [])
    ]
  },
  {
    path: "/v1/messages/count_tokens",
    shape: "anthropic",
    models: ["claude-sonnet-4-6", "gemini/gemini-2.5-flash", "openai/gpt-5.1"],
    bodies: (model) => [body(model, {}), body(model, { messages: [{ role: "user", content: "x" }] })]
  },
  {
    path: "/v1/embeddings",
    shape: "openai",
    models: ["text-embedding-3-small", "gemini/gemini-embedding-001", "bedrock/amazon.titan-embed-text-v2:0", "anthropic/claude-sonnet-4-6"],
    bodies: (model) => [
      body(model, {}),
      body(model, { input: [] }),
      body(model, { input: [1, "a"] }),
      body(model, { input: "x", dimensions: 0 }),
      body(model, { input: "x", dimensions: "big" }),
      ...(model.includes("/") ? [body(model, { input: [[1, 2, 3]] }), body(model, { input: ["a", "b"] })] : [])
    ]
  }
]

describe("bad input on the agents' routes", () => {
  layer(StackLive, { timeout: 60_000, excludeTestServices: true })((it) => {
    for (const { bodies, models, path, shape } of CASES) {
      it.effect(`${path}: a 4xx in the API's own shape, never a 5xx`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          for (const text of [...ANY_ROUTE, ...models.flatMap(bodies)]) {
            const answer = yield* send(stack, path, text)
            // a translated provider may take what the gateway lets through; it never fails the gateway
            if (answer.status === 200) continue
            assert.isAtLeast(answer.status, 400, `${path} ${text}`)
            assert.isBelow(answer.status, 500, `${path} ${text}: ${answer.text}`)
            if (shape === "openai") {
              assert.isString(answer.json?.error?.message, `${path} ${text}: ${answer.text}`)
              assert.isString(answer.json?.error?.type)
            } else {
              assert.strictEqual(answer.json?.type, "error", `${path} ${text}: ${answer.text}`)
              assert.isString(answer.json?.error?.type)
              assert.isString(answer.json?.error?.message)
            }
          }
          const healthy = yield* Effect.promise(() => fetch(`${stack.gatewayUrl}/healthz`))
          assert.strictEqual(healthy.status, 200)
        }))
    }
  })
})
