/**
 * Property-based fuzzing of the gateway: every route (chat completions, Responses, Messages and count_tokens,
 * embeddings, the watcher's turns) with bodies that are valid requests with parts replaced by anything, any JSON, or not JSON at all;
 * any attribution and provider headers; any query string; and the Responses WebSocket with any frame. The fake
 * providers answer as the real ones do (a 4xx for what they cannot take). A client's mistake is never a 5xx: the
 * answer is a success or a 4xx in that API's error shape, and the gateway serves the next call as before.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import WebSocket from "ws"
import { ClaudeCodeTranscript } from "../../src/watcher/claudeCode.ts"
import { CodexRollout } from "../../src/watcher/codex.ts"
import type { TranscriptReader } from "../../src/watcher/transcript.ts"
import { type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import { claudeSession, codexSession } from "../support/transcripts.ts"
import { anyHeaderValue, anyJson, anyQuery, jsonOf, mutated, type RawAnswer, checkOptions, rawRequest, RUNS } from "./arbitraries.ts"

class Stack extends Context.Service<Stack, GatewayStack>()("test/fuzz/GatewayStack") {}
const StackLive = Layer.effect(Stack, gatewayStack({ stream: "memory" }))

const PROVIDER_KEY = "sk-provider-fuzz-0123456789"

/** What `ledger watch` sends for a Claude Code and a Codex session. */
function watcherTurns(): ReadonlyArray<Record<string, unknown>> {
  const exchanges = [{ prompt: "hello", command: { run: "ls", output: "a.txt" }, answer: "done" }]
  const read = (reader: TranscriptReader, lines: ReadonlyArray<string>) => [...lines.flatMap((line) => reader.line(line, 0)), ...reader.idle(0)]
  return [
    ...read(new ClaudeCodeTranscript(), claudeSession({ cwd: "/w", start: Date.UTC(2026, 10, 26), exchanges }).lines),
    ...read(new CodexRollout(), codexSession({ cwd: "/w", start: Date.UTC(2026, 10, 26), exchanges }).lines)
  ].map(({ turn }) => ({ ...turn, agent_id: turn.client, agent_name: null }))
}

const MODELS = [
  "gpt-4o-mini", "openai/gpt-5.1", "azure/my-deployment", "compat/llama-3", "anthropic/claude-sonnet-4-6", "claude-sonnet-4-6",
  "gemini/gemini-2.5-flash", "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock/amazon.nova-lite-v1:0",
  "text-embedding-3-small", "gemini/gemini-embedding-001", "bedrock/amazon.titan-embed-text-v2:0", "nope/x", "", "/", "openai/"
]

type Shape = "openai" | "anthropic"

interface Route {
  readonly path: string
  /** the error body shape of the API */
  readonly shape: Shape
  readonly valid: ReadonlyArray<Record<string, unknown>>
}

const ROUTES: ReadonlyArray<Route> = [
  {
    path: "/v1/chat/completions",
    shape: "openai",
    valid: [
      { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hello" }] },
      {
        model: "anthropic/claude-sonnet-4-6",
        stream: true,
        messages: [{ role: "system", content: "be brief" }, { role: "user", content: [{ type: "text", text: "hello" }] }],
        tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } } }]
      }
    ]
  },
  {
    path: "/v1/responses",
    shape: "openai",
    valid: [
      { model: "gpt-5.1", input: "hello", stream: true },
      {
        model: "gemini/gemini-2.5-flash",
        instructions: "be brief",
        input: [
          { type: "message", role: "user", content: [{ type: "input_text", text: "hello" }] },
          { type: "function_call", call_id: "c1", name: "lookup", arguments: "{}" },
          { type: "function_call_output", call_id: "c1", output: "done" }
        ],
        tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} } }, { type: "custom", name: "apply_patch" }],
        reasoning: { effort: "low" }
      }
    ]
  },
  {
    path: "/v1/messages",
    shape: "anthropic",
    valid: [
      { model: "claude-sonnet-4-6", max_tokens: 100, messages: [{ role: "user", content: "hello" }], stream: true },
      {
        model: "gemini/gemini-2.5-flash",
        max_tokens: 100,
        system: [{ type: "text", text: "be brief" }],
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: [
          { role: "user", content: [{ type: "text", text: "hello" }] },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "lookup", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "done" }] }
        ],
        tools: [{ name: "lookup", input_schema: { type: "object", properties: {} } }]
      }
    ]
  },
  { path: "/v1/messages/count_tokens", shape: "anthropic", valid: [{ model: "claude-sonnet-4-6", messages: [{ role: "user", content: "hello" }] }] },
  {
    path: "/v1/embeddings",
    shape: "openai",
    valid: [{ model: "text-embedding-3-small", input: ["hello", "world"], dimensions: 64 }, { model: "gemini/gemini-embedding-001", input: "hello" }]
  },
  { path: "/v1/watcher/turns", shape: "openai", valid: [{ turns: watcherTurns() }] }
]

/** A success, or a 4xx with the API's error body; never a 5xx. */
const assertClientAnswer = (route: Route, what: string, answer: RawAnswer) => {
  assert.isBelow(answer.status, 500, `${route.path} ${what} → ${answer.status} ${answer.text.slice(0, 400)}`)
  if (answer.status < 400) return
  const body = jsonOf(answer)
  if (route.shape === "anthropic") {
    assert.strictEqual(body?.type, "error", `${what} → ${answer.text.slice(0, 300)}`)
    assert.isString(body.error?.type, what)
    assert.isString(body.error?.message, what)
  } else {
    assert.isString(body?.error?.message, `${what} → ${answer.text.slice(0, 300)}`)
  }
}

const bodyFor = (route: Route): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...route.valid).chain(mutated).map((body) => JSON.stringify(body)) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...route.valid), fc.constantFrom(...MODELS), fc.boolean()).map(([body, model, stream]) => JSON.stringify({ ...body, model, stream })) },
    { weight: 1, arbitrary: anyJson.map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 100 }), fc.constantFrom("", "{", "[1,", "\"x\"", "null", "{\"model\":")) }
  )

describe("fuzzing the gateway", () => {
  layer(StackLive, { timeout: 300_000, excludeTestServices: true })((it) => {
    for (const route of ROUTES) {
      it.effect(`${route.path}: any body, headers and query: a 2xx or a 4xx in the API's shape, never a 5xx`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const headers = fc.record({
            authorization: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${stack.gatewayKey}`) }, { weight: 1, arbitrary: anyHeaderValue }),
            "x-api-key": fc.oneof(fc.constant(stack.gatewayKey), anyHeaderValue),
            "x-service-provider-api-key": fc.oneof({ weight: 6, arbitrary: fc.constant(PROVIDER_KEY) }, { weight: 1, arbitrary: anyHeaderValue }),
            "content-type": fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", ""),
            "x-ledger-agent-id": anyHeaderValue,
            "x-ledger-agent-name": anyHeaderValue,
            "x-ledger-execution-id": anyHeaderValue,
            "x-claude-code-session-id": anyHeaderValue,
            "x-codex-turn-metadata": fc.oneof(anyHeaderValue, anyJson.map((value) => JSON.stringify(value) ?? "")),
            "anthropic-version": fc.oneof(fc.constant("2023-06-01"), anyHeaderValue),
            "anthropic-beta": anyHeaderValue
          }, { requiredKeys: ["authorization"] })
          const query = fc.oneof(fc.constant("agent_id=fuzzer"), anyQuery(["agent_id", "agent_name", "execution_id", "beta"]))
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(bodyFor(route), headers, query, async (body, sent, search) => {
                const answer = await rawRequest(stack.gatewayUrl, { method: "POST", path: `${route.path}?${search}`, headers: sent, body })
                assertClientAnswer(route, `${body.slice(0, 300)} ${JSON.stringify(sent).slice(0, 300)} ?${search.slice(0, 100)}`, answer)
              }),
              checkOptions()
            )
          )
        }))
    }

    it.effect("the Responses WebSocket with any frame: an error frame or an answer, and the socket serves the next turn", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const ws = yield* Effect.acquireRelease(
          Effect.promise(() =>
            new Promise<WebSocket>((resolve, reject) => {
              const socket = new WebSocket(`${stack.gatewayUrl.replace("http", "ws")}/v1/responses?agent_id=fuzzer`, {
                headers: { authorization: `Bearer ${stack.gatewayKey}`, "x-service-provider-api-key": PROVIDER_KEY }
              })
              socket.once("open", () => resolve(socket))
              socket.once("error", reject)
            })
          ),
          (socket) => Effect.sync(() => socket.close())
        )
        const frames: Array<any> = []
        let closed: string | null = null
        ws.on("message", (data) => frames.push(JSON.parse(String(data))))
        ws.on("close", (code, reason) => (closed = `${code} ${reason}`))
        const warmUp = { type: "response.create", model: "gpt-5.1", generate: false, input: [] }
        const frame = fc.oneof(
          fc.constantFrom({ type: "response.create", model: "gpt-5.1", input: "hello" }, { type: "response.create", model: "anthropic/claude-sonnet-4-6", input: "hello" })
            .chain(mutated).map((value) => JSON.stringify(value)),
          anyJson.map((value) => JSON.stringify(value)),
          fc.string({ maxLength: 100 })
        )
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(frame, async (text) => {
              frames.length = 0
              ws.send(text)
              ws.send(JSON.stringify(warmUp))
              // the warm-up is answered after whatever the frame started: the connection still serves
              const deadline = Date.now() + 10_000
              while (!frames.some((f) => f.type === "response.completed" && f.response?.usage === null && f.response.output?.length === 0)) {
                assert.isNull(closed, `${text.slice(0, 300)} closed the socket`)
                for (const f of frames) {
                  if (f.type === "error") assert.isBelow(f.status ?? 400, 500, `${text.slice(0, 300)} → ${JSON.stringify(f).slice(0, 300)}`)
                  if (f.type === "response.failed") assert.fail(`${text.slice(0, 300)} → ${JSON.stringify(f).slice(0, 300)}`)
                }
                assert.isBelow(Date.now(), deadline, `${text.slice(0, 300)}: no answer to the next warm-up`)
                await new Promise((resolve) => setTimeout(resolve, 5))
              }
            }),
            checkOptions(Math.ceil(RUNS / 3))
          )
        )
      }))

    it.effect("after the fuzzing the gateway is healthy and answers as before", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        assert.strictEqual((yield* Effect.promise(() => rawRequest(stack.gatewayUrl, { path: "/healthz" }))).status, 200)
        const answer = yield* Effect.promise(() =>
          rawRequest(stack.gatewayUrl, {
            method: "POST",
            path: "/v1/chat/completions?agent_id=after",
            headers: { authorization: `Bearer ${stack.gatewayKey}`, "x-service-provider-api-key": PROVIDER_KEY, "content-type": "application/json" },
            body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "still there?" }] })
          })
        )
        assert.strictEqual(answer.status, 200, answer.text)
        assert.strictEqual(jsonOf(answer).choices[0].message.content, "Fake answer to: still there?")
      }))
  })
})
