/**
 * Every error the gateway answers, with its status and chat-completions error body
 * `{"error":{"message","type","param","code"}}`; which failures are captured (calls sent to a provider) and which
 * are not (refused before: auth, validation, size).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import * as Http from "node:http"
import * as Net from "node:net"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import type { Capture } from "../../src/domain/capture.ts"
import { MAX_ID_LENGTH } from "../../src/gateway/ChatCompletions.ts"
import { COMPAT_UPSTREAM, type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import { freePort } from "../support/ports.ts"

const PROVIDER_KEY = "sk-provider-errors"
const MAX_BODY = 64 * 1024
const TIMEOUT_MS = 1_000

interface Answer {
  readonly status: number
  readonly body: any
  readonly ledgerId: string | null
  readonly headers: Headers
}

const post = (stack: GatewayStack, body: unknown, options: {
  readonly query?: string
  readonly headers?: Record<string, string>
  readonly raw?: boolean
} = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const res = await fetch(`${stack.baseURL}/chat/completions${options.query ?? "?agent_id=agent-errors"}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${stack.gatewayKey}`,
        "content-type": "application/json",
        "x-service-provider-api-key": PROVIDER_KEY,
        ...options.headers
      },
      body: options.raw ? (body as string) : JSON.stringify(body)
    })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      // an event stream
    }
    return { status: res.status, body: parsed, ledgerId: res.headers.get("x-ledger-id"), headers: res.headers }
  })

const chat = (model: string, content = "hello", extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: "user", content }],
  ...extra
})

/** The answer is the documented error: status, body shape, and the fields given. */
const assertError = (answer: Answer, status: number, expected: { type?: string; code?: string | null; param?: string | null; message?: RegExp }) => {
  assert.strictEqual(answer.status, status, JSON.stringify(answer.body))
  assert.deepStrictEqual(Object.keys(answer.body), ["error"])
  assert.deepStrictEqual(Object.keys(answer.body.error).sort(), ["code", "message", "param", "type"])
  assert.isString(answer.body.error.message)
  assert.isNotEmpty(answer.body.error.message)
  if (expected.type !== undefined) assert.strictEqual(answer.body.error.type, expected.type)
  if (expected.code !== undefined) assert.strictEqual(answer.body.error.code, expected.code)
  if (expected.param !== undefined) assert.strictEqual(answer.body.error.param, expected.param)
  if (expected.message !== undefined) assert.match(answer.body.error.message, expected.message)
}

/** Refused before reaching a provider: nothing captured under its ledger id. */
const assertNotCaptured = (stack: GatewayStack, answers: ReadonlyArray<Answer>) =>
  Effect.gen(function*() {
    yield* stack.settled
    const ids = new Set((yield* stack.captures).map((capture) => capture.ledger_id))
    for (const answer of answers) {
      assert.isNotNull(answer.ledgerId, "every answer carries x-ledger-id")
      assert.isFalse(ids.has(answer.ledgerId!), `refused call ${answer.ledgerId} was captured`)
    }
  })

/** A provider that answers one chunk of a stream and then says nothing more. */
const stallingUpstream = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<Http.Server>((resolve) => {
      const server = Http.createServer((req, res) => {
        req.resume()
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(`data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "Partial " }, finish_reason: null }] })}\n\n`)
      })
      server.listen(0, "127.0.0.1", () => resolve(server))
    })
  ),
  (server) => Effect.sync(() => server.closeAllConnections())
)

class Stack extends Context.Service<Stack, GatewayStack>()("test/ErrorsStack") {}
const StackLive = Layer.effect(
  Stack,
  Effect.gen(function*() {
    const stalling = yield* stallingUpstream
    const closedPort = yield* Effect.promise(freePort)
    return yield* gatewayStack({
      settings: { gatewayMaxBodyBytes: MAX_BODY, upstreamTimeoutMs: TIMEOUT_MS },
      upstreams: [
        { name: "down", baseUrl: `http://127.0.0.1:${closedPort}/v1` },
        { name: "stalling", baseUrl: `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/v1` }
      ]
    })
  })
)

describe("gateway errors", () => {
  layer(StackLive, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("401: no credential, a PAT, an unknown or malformed key", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const body = chat("openai/gpt-4o")
        const none = yield* post(stack, body, { headers: { authorization: "" } })
        assertError(none, 401, { type: "authentication_error", code: "missing_api_key", param: null, message: /Bearer <Gateway Key>/ })
        const pat = yield* post(stack, body, { headers: { authorization: `Bearer ${stack.pat}` } })
        assertError(pat, 401, { type: "authentication_error", code: "invalid_api_key", message: /Gateway Key is required/ })
        // twice: the second answer comes from the authenticator's cache
        const again = yield* post(stack, body, { headers: { authorization: `Bearer ${stack.pat}` } })
        assertError(again, 401, { code: "invalid_api_key", message: /Gateway Key is required/ })
        const unknown = yield* post(stack, body, { headers: { authorization: `Bearer ldg_gw_${"x".repeat(43)}` } })
        assertError(unknown, 401, { code: "invalid_api_key", message: /unknown token/ })
        const garbage = yield* post(stack, body, { headers: { authorization: "Basic abc" } })
        assertError(garbage, 401, { code: "missing_api_key" })
        const models = yield* Effect.promise(() => fetch(`${stack.baseURL}/models`, { headers: { authorization: `Bearer ${stack.pat}` } }))
        assert.strictEqual(models.status, 401)
        yield* assertNotCaptured(stack, [none, pat, again, unknown, garbage])
      }))

    it.effect("400: agent_id missing, empty or too long; agent_name and execution_id checked too", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const body = chat("openai/gpt-4o")
        const cases: Array<[string, string]> = [
          ["", "agent_id"],
          ["?agent_id=", "agent_id"],
          ["?agent_name=x", "agent_id"],
          [`?agent_id=${"a".repeat(MAX_ID_LENGTH + 1)}`, "agent_id"],
          [`?agent_id=a&agent_name=${"n".repeat(MAX_ID_LENGTH + 1)}`, "agent_name"],
          ["?agent_id=a&execution_id=line%0Abreak", "execution_id"]
        ]
        const answers: Array<Answer> = []
        for (const [query, param] of cases) {
          const answer = yield* post(stack, body, { query })
          assertError(answer, 400, { type: "invalid_request_error", param })
          answers.push(answer)
        }
        const longest = yield* post(stack, body, { query: `?agent_id=${"a".repeat(MAX_ID_LENGTH)}` })
        assert.strictEqual(longest.status, 200, "an id of the maximum length is accepted")
        yield* assertNotCaptured(stack, answers)
      }))

    it.effect("400: invalid JSON, missing or invalid model and messages, unknown provider, stream not boolean", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const cases: Array<[unknown, { code?: string; param?: string | null; message?: RegExp }, boolean?]> = [
          ["{\"model\": ", { code: "invalid_json", param: null, message: /not valid JSON/ }, true],
          ["", { code: "invalid_json" }, true],
          [[1, 2], { code: "invalid_body", param: null }],
          [{ messages: [{ role: "user", content: "hi" }] }, { code: "missing_parameter", param: "model" }],
          [chat(42 as never), { param: "model" }],
          [chat("gpt-4o"), { code: "invalid_model", param: "model", message: /provider\/model-name/ }],
          [chat("openai/"), { code: "invalid_model", param: "model" }],
          [chat("nope/model"), { code: "unknown_provider", param: "model", message: /unknown provider "nope".*openai, anthropic/ }],
          [{ model: "openai/gpt-4o" }, { code: "missing_parameter", param: "messages" }],
          [{ model: "openai/gpt-4o", messages: [] }, { param: "messages" }],
          [{ model: "openai/gpt-4o", messages: "hi" }, { param: "messages" }],
          [{ model: "openai/gpt-4o", messages: [{ content: "no role" }] }, { param: "messages[0]" }],
          [chat("openai/gpt-4o", "hi", { stream: "yes" }), { param: "stream", message: /boolean/ }],
          [chat("openai/gpt-4o", "hi", { stream: true, stream_options: "usage" }), { param: "stream_options" }]
        ]
        const answers: Array<Answer> = []
        for (const [body, expected, raw] of cases) {
          const answer = yield* post(stack, body, { raw: raw ?? false })
          assertError(answer, 400, { type: "invalid_request_error", ...expected })
          answers.push(answer)
        }
        yield* assertNotCaptured(stack, answers)
      }))

    it.effect("400: a request the provider cannot take (bedrock takes images inline only)", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, {
          model: "bedrock/amazon.nova-pro-v1:0",
          messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }] }]
        })
        assertError(answer, 400, { code: "unsupported_for_provider", message: /base64/ })
        assert.strictEqual(answer.body.error.param, "messages[0].content[0].image_url")
        yield* assertNotCaptured(stack, [answer])
      }))

    it.effect("413: a body over the limit, declared or streamed without a length", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const big = JSON.stringify(chat("openai/gpt-4o", "x".repeat(MAX_BODY)))
        const declared = yield* post(stack, big, { raw: true })
        assertError(declared, 413, { code: "request_too_large", message: new RegExp(`${MAX_BODY} bytes`) })
        const chunked = yield* Effect.promise(async () => {
          const bytes = new TextEncoder().encode(big)
          const res = await fetch(`${stack.baseURL}/chat/completions?agent_id=a`, {
            method: "POST",
            headers: { authorization: `Bearer ${stack.gatewayKey}`, "content-type": "application/json" },
            body: new ReadableStream({
              start(controller) {
                for (let at = 0; at < bytes.length; at += 8192) controller.enqueue(bytes.subarray(at, at + 8192))
                controller.close()
              }
            }),
            duplex: "half"
          } as RequestInit)
          return { status: res.status, body: await res.json(), ledgerId: res.headers.get("x-ledger-id"), headers: res.headers }
        })
        assertError(chunked, 413, { code: "request_too_large" })
        // just under the limit is fine
        const fits = yield* post(stack, chat("openai/gpt-4o", "x".repeat(MAX_BODY - 200)))
        assert.strictEqual(fits.status, 200)
        yield* assertNotCaptured(stack, [declared, chunked])
      }))

    for (const [prefix, model] of [
      ["openai", "gpt-4o"],
      ["azure", "dep"],
      ["anthropic", "claude-haiku-4-5"],
      ["gemini", "gemini-2.5-flash"],
      ["bedrock", "amazon.nova-lite-v1:0"],
      [COMPAT_UPSTREAM, "qwen"]
    ] as const) {
      it.effect(`provider errors keep the provider's status (${prefix}) and are captured`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const limited = yield* post(stack, chat(`${prefix}/${model}`, "[[error:429]] too fast"))
          // the provider's own error type is kept where it has one (OpenAI says "requests")
          assertError(limited, 429, { message: new RegExp(`fake .* error 429`) })
          if (prefix !== "openai") assert.strictEqual(limited.body.error.type, "rate_limit_error")
          // Bedrock names the error in its x-amzn-errortype header
          if (prefix === "bedrock") assert.strictEqual(limited.body.error.code, "ThrottlingException")
          const streamed = yield* post(stack, chat(`${prefix}/${model}`, "[[error:503]] down", { stream: true }))
          assertError(streamed, 503, { message: /503/ })
          for (const answer of [limited, streamed]) {
            const capture = yield* stack.capture(answer.ledgerId!)
            assert.strictEqual(capture.status, answer.status)
            assert.isNull(capture.response)
            assert.deepStrictEqual(capture.error, {
              status: answer.status,
              type: answer.body.error.type,
              code: answer.body.error.code,
              message: answer.body.error.message
            })
            assert.strictEqual(capture.provider, prefix)
          }
        }))
    }

    it.effect("a provider's own 401 (no provider key sent) is the provider's, and captured", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, chat("anthropic/claude-haiku-4-5"), { headers: { "x-service-provider-api-key": "" } })
        assertError(answer, 401, { type: "authentication_error", message: /fake anthropic error 401/ })
        assert.strictEqual((yield* stack.capture(answer.ledgerId!)).status, 401)
      }))

    it.effect("502: the upstream cannot be reached (message names the provider); captured", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        for (const stream of [false, true]) {
          const answer = yield* post(stack, chat("down/model", "hello", { stream }))
          assertError(answer, 502, { type: "api_error", code: "upstream_unavailable", message: /provider down could not be reached: ECONNREFUSED/ })
          const capture = yield* stack.capture(answer.ledgerId!)
          assert.strictEqual(capture.status, 502)
          assert.strictEqual(capture.error!.code, "upstream_unavailable")
          assert.isNull(capture.first_token_at)
        }
      }))

    it.effect("504: the provider does not answer in time (message names the provider); captured", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, chat("gemini/gemini-2.5-pro", `[[slow:${TIMEOUT_MS * 3}]] think hard`))
        assertError(answer, 504, { type: "timeout_error", code: "upstream_timeout", message: new RegExp(`provider gemini did not answer within ${TIMEOUT_MS} ms`) })
        const capture = yield* stack.capture(answer.ledgerId!)
        assert.strictEqual(capture.status, 504)
        assert.strictEqual(capture.error!.type, "timeout_error")
        assert.isAtLeast(capture.upstream_ms, TIMEOUT_MS * 0.9)
      }))

    it.effect("mid-stream: a stalled provider ends the stream with an error event (504), captured with the partial answer", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, chat("stalling/m", "hello", { stream: true }))
        assert.strictEqual(answer.status, 200)
        assert.include(answer.body as string, "Partial ")
        const events = (answer.body as string).split("\n\n").filter((event) => event.startsWith("data: "))
        const last = JSON.parse(events.at(-1)!.slice(6))
        assert.strictEqual(last.error.code, "upstream_timeout")
        assert.match(last.error.message, /provider stalling did not answer/)
        const capture = yield* stack.capture(answer.ledgerId!)
        assert.strictEqual(capture.status, 200)
        assert.strictEqual(capture.error!.status, 504)
        assert.strictEqual(JSON.parse(capture.response!).choices[0].message.content, "Partial ")
      }))

    it.effect("mid-stream provider errors reach the openai client as an APIError and are captured", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        for (const prefix of ["openai", "anthropic", "gemini", "bedrock"]) {
          const client = new OpenAI({
            baseURL: stack.baseURL,
            apiKey: stack.gatewayKey,
            defaultQuery: { agent_id: "agent-errors" },
            defaultHeaders: { "x-service-provider-api-key": PROVIDER_KEY },
            maxRetries: 0
          })
          const { data: stream, response } = yield* Effect.promise(() =>
            client.chat.completions.create({
              model: `${prefix}/m`,
              stream: true,
              messages: [{ role: "user", content: "[[stream-error]] tell me a long story" }]
            }).withResponse()
          )
          const raised = yield* Effect.promise(async () => {
            try {
              for await (const _ of stream) {
                // read until the error
              }
              return undefined
            } catch (error) {
              return error
            }
          })
          assert.instanceOf(raised, OpenAI.APIError, prefix)
          const capture: Capture = yield* stack.capture(response.headers.get("x-ledger-id")!)
          assert.strictEqual(capture.status, 200)
          assert.isNotNull(capture.error, prefix)
          assert.strictEqual(JSON.parse(capture.response!).choices[0].message.content, "Fake ", prefix)
        }
      }))

    it.effect("callers that vanish mid-upload or mid-wait leave the gateway serving", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const port = Number(new URL(stack.gatewayUrl).port)
        // a body announced as 1000 bytes, 10 sent, then the connection dropped
        yield* Effect.promise(() =>
          new Promise<void>((resolve) => {
            const socket = Net.connect(port, "127.0.0.1", () => {
              socket.write(
                `POST /v1/chat/completions?agent_id=a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${stack.gatewayKey}\r\n` +
                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":"
              )
              setTimeout(() => {
                socket.destroy()
                resolve()
              }, 50)
            })
          })
        )
        // a caller that gives up while the provider is still thinking: captured as aborted, nothing sent
        const controller = new AbortController()
        const gone = fetch(`${stack.baseURL}/chat/completions?agent_id=agent-gone`, {
          method: "POST",
          signal: controller.signal,
          headers: { authorization: `Bearer ${stack.gatewayKey}`, "content-type": "application/json", "x-service-provider-api-key": PROVIDER_KEY },
          body: JSON.stringify(chat("openai/gpt-4o", "[[slow:400]] take your time"))
        }).catch(() => undefined)
        yield* Effect.sleep(100)
        controller.abort()
        yield* Effect.promise(() => gone)
        yield* Effect.sleep(500)
        yield* stack.settled
        const aborted = (yield* stack.captures).find((capture) => capture.agent_id === "agent-gone")
        assert.isDefined(aborted)
        assert.deepInclude(aborted!, { aborted: true, status: 499, response: null, error: null })
        const after = yield* post(stack, chat("openai/gpt-4o"))
        assert.strictEqual(after.status, 200)
      }))

    it.effect("404 unknown route, 405 wrong method, both in the error shape", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const missing = yield* Effect.promise(() => fetch(`${stack.baseURL}/embeddings`, { method: "POST" }))
        const wrong = yield* Effect.promise(() => fetch(`${stack.baseURL}/chat/completions`))
        assertError({ status: missing.status, body: yield* Effect.promise(() => missing.json()), ledgerId: null, headers: missing.headers }, 404, { code: "not_found" })
        assertError({ status: wrong.status, body: yield* Effect.promise(() => wrong.json()), ledgerId: null, headers: wrong.headers }, 405, { code: "method_not_allowed" })
        assert.strictEqual(wrong.headers.get("allow"), "POST")
      }))
  })

  it.live("400: a provider prefix that exists but is not configured says what to set", () =>
    Effect.gen(function*() {
      const stack = yield* gatewayStack({
        stream: "memory",
        settings: (defaults) => ({ providers: { ...defaults.providers, azureBaseUrl: Option.none() } })
      })
      const answer = yield* post(stack, chat("azure/dep"))
      assertError(answer, 400, { code: "unknown_provider", param: "model", message: /azure is not configured.*LEDGER_AZURE_BASE_URL/ })
    }), { timeout: 60_000 })
})
