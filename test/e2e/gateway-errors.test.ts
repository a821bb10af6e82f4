/**
 * Every error the gateway answers, with its status and chat-completions error body
 * `{"error":{"message","type","param","code"}}`; which failures are captured (calls sent to a provider) and which
 * are not (refused before: auth, validation, size).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import * as Http from "node:http"
import * as Net from "node:net"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import type { Capture } from "../../src/domain/capture.ts"
import { MAX_ID_LENGTH } from "../../src/domain/identifiers.ts"
import { COMPAT_UPSTREAM, type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import { testDatabase } from "../support/db.ts"
import { gatewayClient } from "../support/openai-client.ts"
import { pgProxy } from "../support/pg-proxy.ts"
import { tcpProxyTo } from "../support/tcp-proxy.ts"

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

/** A local HTTP server standing in for a misbehaving provider; closed with the scope. */
const upstreamServer = (handler: Http.RequestListener) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Http.Server>((resolve) => {
        const server = Http.createServer(handler)
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => Effect.sync(() => server.closeAllConnections())
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`))

/** Starts an OpenAI-wire stream with one chunk, then calls `then` with the response. */
const firstChunk = (then: (res: Http.ServerResponse) => void): Http.RequestListener => (req, res) => {
  req.resume()
  res.writeHead(200, { "content-type": "text/event-stream" })
  res.write(`data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "Partial " }, finish_reason: null }] })}\n\n`)
  then(res)
}

class Stack extends Context.Service<Stack, GatewayStack>()("test/ErrorsStack") {}
const StackLive = Layer.effect(
  Stack,
  Effect.gen(function*() {
    // one chunk, then silence
    const stalling = yield* upstreamServer(firstChunk(() => undefined))
    // one chunk, then the connection dropped
    const resetting = yield* upstreamServer(firstChunk((res) => setTimeout(() => res.socket?.destroy(), 50)))
    // refuses the key it was sent, quoting it
    const quoting = yield* upstreamServer((req, res) => {
      req.resume()
      res.writeHead(401, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${req.headers.authorization?.slice(7)}`, type: "invalid_request_error", code: "invalid_api_key" } }))
    })
    return yield* gatewayStack({
      settings: { gatewayMaxBodyBytes: MAX_BODY, upstreamTimeoutMs: TIMEOUT_MS },
      upstreams: [
        // a privileged port nothing listens on: refused, and no parallel test can take it (they bind ephemeral ports)
        { name: "down", baseUrl: "http://127.0.0.1:1/v1" },
        { name: "stalling", baseUrl: `${stalling}/v1` },
        { name: "resetting", baseUrl: `${resetting}/v1` },
        { name: "quoting", baseUrl: `${quoting}/v1` }
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
        const models = yield* Effect.promise(async () => {
          const res = await fetch(`${stack.baseURL}/models`, { headers: { authorization: `Bearer ${stack.pat}` } })
          return { status: res.status, body: await res.json(), ledgerId: res.headers.get("x-ledger-id"), headers: res.headers }
        })
        assertError(models, 401, { type: "authentication_error", code: "invalid_api_key", message: /Gateway Key is required/ })
        assert.isNotNull(models.ledgerId)
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

    it.effect("400: messages the provider's translation cannot read (content neither text nor parts)", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answers: Array<Answer> = []
        for (const model of ["anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash", "bedrock/amazon.nova-lite-v1:0"]) {
          const answer = yield* post(stack, { model, messages: [{ role: "user", content: 42 }] })
          assertError(answer, 400, { type: "invalid_request_error", code: "invalid_request", message: new RegExp(`could not be translated for ${model.split("/")[0]}`) })
          answers.push(answer)
        }
        yield* assertNotCaptured(stack, answers)
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

    it.effect("413 readable by the openai SDK while it is still sending a body far over the limit; the connection serves the next call", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        // through a TCP hop, as across a network: a connection reset reaches the client before what it has not read
        const hop = yield* tcpProxyTo(stack.gatewayUrl, 80)
        const client = gatewayClient(
          { baseURL: `${hop.url.replace(/\/$/, "")}/v1`, gatewayKey: stack.gatewayKey },
          { query: { agent_id: "agent-errors" }, providerKey: PROVIDER_KEY }
        )
        for (const size of [MAX_BODY * 4, 32 * 1024 * 1024]) {
          const error = yield* Effect.promise(() =>
            client.chat.completions.create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "x".repeat(size) }] }).then(
              () => null,
              (error: unknown) => error
            )
          )
          assert.instanceOf(error, OpenAI.APIError, String(error))
          assert.strictEqual((error as InstanceType<typeof OpenAI.APIError>).status, 413)
          assert.strictEqual((error as InstanceType<typeof OpenAI.APIError>).code, "request_too_large")
        }
        const after = yield* Effect.promise(() => client.chat.completions.create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hello" }] }))
        assert.strictEqual(after.choices[0]!.message.content, "Fake answer to: hello")
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

    it.effect("a provider error that quotes the provider key reaches the caller as sent, and is captured without the key", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, chat("quoting/m"))
        assertError(answer, 401, { code: "invalid_api_key", message: new RegExp(PROVIDER_KEY) })
        const capture = yield* stack.capture(answer.ledgerId!)
        assert.strictEqual(capture.error!.message, "Incorrect API key provided: [provider key]")
        assert.notInclude(JSON.stringify(capture), PROVIDER_KEY)
        // a placeholder key (local servers take any) is not a secret: the message stays as it was
        const placeholder = yield* post(stack, chat("quoting/m"), { headers: { "x-service-provider-api-key": "sk" } })
        assert.strictEqual((yield* stack.capture(placeholder.ledgerId!)).error!.message, "Incorrect API key provided: sk")
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

    it.effect("mid-stream: a provider that drops the connection ends the stream with an error event (502), captured with the partial answer", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const answer = yield* post(stack, chat("resetting/m", "hello", { stream: true }))
        assert.strictEqual(answer.status, 200)
        const events = (answer.body as string).split("\n\n").filter((event) => event.startsWith("data: "))
        assert.include(events[0], "Partial ")
        const last = JSON.parse(events.at(-1)!.slice(6))
        assert.deepInclude(last.error, { type: "api_error", code: "upstream_unavailable" })
        assert.match(last.error.message, /provider resetting could not be reached/)
        const capture = yield* stack.capture(answer.ledgerId!)
        assert.strictEqual(capture.status, 200)
        assert.deepInclude(capture.error!, { status: 502, code: "upstream_unavailable" })
        assert.strictEqual(JSON.parse(capture.response!).choices[0].message.content, "Partial ")
      }))

    it.effect("mid-stream provider errors reach the openai client as an APIError and are captured", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        for (const prefix of ["openai", "anthropic", "gemini", "bedrock"]) {
          const client = gatewayClient(stack, { query: { agent_id: "agent-errors" }, providerKey: PROVIDER_KEY })
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
        const aborted = yield* stack.captureWhere((capture) => capture.agent_id === "agent-gone")
        assert.deepInclude(aborted, { aborted: true, status: 499, response: null, error: null })
        const after = yield* post(stack, chat("openai/gpt-4o"))
        assert.strictEqual(after.status, 200)
      }))

    it.effect("404 unknown route, 405 wrong method, both in the error shape and with an x-ledger-id", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const missing = yield* Effect.promise(() => fetch(`${stack.baseURL}/images/generations`, { method: "POST" }))
        const wrong = yield* Effect.promise(() => fetch(`${stack.baseURL}/chat/completions`))
        assertError({ status: missing.status, body: yield* Effect.promise(() => missing.json()), ledgerId: null, headers: missing.headers }, 404, { code: "not_found" })
        assertError({ status: wrong.status, body: yield* Effect.promise(() => wrong.json()), ledgerId: null, headers: wrong.headers }, 405, { code: "method_not_allowed" })
        assert.strictEqual(wrong.headers.get("allow"), "POST")
        // every /v1 answer carries an id (these name no decision)
        for (const answer of [missing, wrong]) assert.match(answer.headers.get("x-ledger-id") ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      }))
  })

  it.live("502 for a 2xx answer that is not the provider's (captured); 503 while the credential store is away", () =>
    Effect.gen(function*() {
      // a captive portal or misrouted proxy where the provider should be
      const portal = yield* upstreamServer((req, res) => {
        req.resume()
        res.writeHead(200, { "content-type": "text/html" })
        res.end("<html>Welcome to the hotel network</html>")
      })
      const proxy = yield* pgProxy((yield* testDatabase).url)
      const stack = yield* gatewayStack({
        stream: "memory",
        settings: (defaults) => ({
          databaseUrl: Option.some(Redacted.make(proxy.url)),
          providers: { ...defaults.providers, anthropicBaseUrl: portal }
        }),
        upstreams: [{ name: "portal", baseUrl: `${portal}/v1` }]
      })
      // a translated provider (its answer is parsed) and a relayed one (only its first character is looked at)
      for (const provider of ["anthropic", "portal"]) {
        const garbled = yield* post(stack, chat(`${provider}/model`))
        assertError(garbled, 502, { type: "api_error", code: "bad_upstream_response", message: new RegExp(`provider ${provider} returned an answer that could not be read`) })
        assert.deepInclude(yield* stack.capture(garbled.ledgerId!), { status: 502, response: null })
      }

      // a key the gateway has no cached verdict for cannot be checked while the database is away: 503, not 401
      const unseen = { authorization: `Bearer ldg_gw_${"y".repeat(43)}` }
      yield* proxy.stop
      const away = yield* post(stack, chat("openai/gpt-4o"), { headers: unseen })
      assertError(away, 503, { type: "api_error", code: "service_unavailable", message: /credential store is unavailable/ })
      yield* proxy.start
      const back = yield* post(stack, chat("openai/gpt-4o"), { headers: unseen })
      assertError(back, 401, { code: "invalid_api_key" })
      yield* assertNotCaptured(stack, [away, back])
    }), { timeout: 60_000 })

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
