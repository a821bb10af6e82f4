/**
 * The gateway end to end with the official `openai` client: every provider family, streamed and not, tool
 * calls and image input, against the fake providers; the provider sees the caller's provider key in its own
 * header and never the Gateway Key; every answer carries x-ledger-id, and the capture published to the Redis
 * stream carries the call.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { agentConversation } from "../../bench/ingest/captures.ts"
import { type Capture, captureUsage } from "../../src/domain/capture.ts"
import { uuidv7, uuidv7Time } from "../../src/gateway/uuidv7.ts"
import { COMPAT_UPSTREAM, type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import type { FakeProviderType, RecordedRequest } from "../support/fake-providers.ts"
import { gatewayClient } from "../support/openai-client.ts"

const PROVIDER_KEY = "sk-provider-test-0123456789"
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

class Stack extends Context.Service<Stack, GatewayStack>()("test/GatewayStack") {}
const StackLive = Layer.effect(Stack, gatewayStack({ fake: { chunkDelayMs: 5 } }))

interface Target {
  readonly prefix: string
  readonly type: FakeProviderType
  readonly model: string
  /** the header the provider reads its key from, and the value it must hold */
  readonly keyHeader: string
  readonly keyValue: string
  readonly images: boolean
}

const TARGETS: ReadonlyArray<Target> = [
  { prefix: "openai", type: "openai", model: "gpt-4o-mini", keyHeader: "authorization", keyValue: `Bearer ${PROVIDER_KEY}`, images: true },
  { prefix: "azure", type: "azure", model: "my-gpt4o-deployment", keyHeader: "api-key", keyValue: PROVIDER_KEY, images: true },
  { prefix: "anthropic", type: "anthropic", model: "claude-sonnet-4-5", keyHeader: "x-api-key", keyValue: PROVIDER_KEY, images: true },
  { prefix: "gemini", type: "gemini", model: "gemini-2.5-flash", keyHeader: "x-goog-api-key", keyValue: PROVIDER_KEY, images: true },
  { prefix: "bedrock", type: "bedrock", model: "amazon.nova-pro-v1:0", keyHeader: "authorization", keyValue: `Bearer ${PROVIDER_KEY}`, images: true },
  { prefix: COMPAT_UPSTREAM, type: "openai_compatible", model: "llama3.1:8b", keyHeader: "authorization", keyValue: `Bearer ${PROVIDER_KEY}`, images: true }
]

const TOOLS: Array<OpenAI.Chat.Completions.ChatCompletionTool> = [{
  type: "function",
  function: {
    name: "lookup_invoice",
    description: "Find an invoice by number",
    parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] }
  }
}]

/** A 1×1 PNG. */
const PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="

const clientFor = (stack: GatewayStack, query: Record<string, string> = { agent_id: "agent-e2e", agent_name: "E2E agent", execution_id: "exec-1" }) =>
  gatewayClient(stack, { query, providerKey: PROVIDER_KEY })

const lastRequest = (stack: GatewayStack, type: FakeProviderType): RecordedRequest => {
  const requests = stack.fake.requestsOf(type)
  assert.isAbove(requests.length, 0, `the ${type} provider received no request`)
  return requests.at(-1)!
}

/** The provider got the caller's key in its own header, and nothing of the gateway key anywhere. */
const assertCredentials = (stack: GatewayStack, target: Target) => {
  const request = lastRequest(stack, target.type)
  assert.strictEqual(request.headers[target.keyHeader], target.keyValue)
  const seen = JSON.stringify({ headers: request.headers, body: request.body, path: request.path })
  assert.notInclude(seen, stack.gatewayKey)
  assert.notInclude(seen, "ldg_gw_")
  assert.notInclude(seen, "agent-e2e", "attribution stays in the gateway")
}

/** The capture's fields for one call, and that it holds no credential. */
const assertCapture = (stack: GatewayStack, capture: Capture, expected: {
  readonly ledgerId: string
  readonly target: Target
  readonly stream: boolean
}) => {
  assert.strictEqual(capture.v, 2)
  assert.strictEqual(capture.api, "chat")
  assert.strictEqual(capture.ledger_id, expected.ledgerId)
  assert.deepInclude(capture, {
    tenant_id: stack.principal.tenant_id,
    workspace_id: stack.principal.workspace_id,
    user_id: stack.principal.user_id,
    key_id: stack.principal.token_id,
    agent_id: "agent-e2e",
    agent_name: "E2E agent",
    execution_id: "exec-1",
    provider: expected.target.prefix,
    provider_type: expected.target.type,
    model: expected.target.model,
    stream: expected.stream,
    status: 200,
    error: null,
    aborted: false
  })
  assert.strictEqual(JSON.parse(capture.request).model, `${expected.target.prefix}/${expected.target.model}`)
  assert.isNotNull(capture.response)
  assert.strictEqual(JSON.parse(capture.response!).object, "chat.completion")
  // non-streamed answers of OpenAI-type providers are relayed unparsed: their usage is read by the builder
  const passedThrough = !expected.stream && ["openai", "azure", "openai_compatible"].includes(expected.target.type)
  assert.strictEqual(capture.usage === null, passedThrough)
  assert.isAbove(captureUsage(capture)?.prompt_tokens ?? 0, 0)
  assert.isAtLeast(capture.ended_at, capture.started_at)
  assert.isNotNull(capture.first_token_at)
  assert.isAtLeast(capture.first_token_at!, capture.started_at)
  assert.isAtMost(capture.first_token_at!, capture.ended_at)
  assert.isAtLeast(capture.upstream_ms, 0)
  assert.isAtMost(capture.upstream_ms, capture.ended_at - capture.started_at + 1)
  const text = JSON.stringify(capture)
  assert.notInclude(text, PROVIDER_KEY)
  assert.notInclude(text, stack.gatewayKey)
}

describe("gateway with the openai client", () => {
  layer(StackLive, { timeout: 120_000, excludeTestServices: true })((it) => {
    for (const target of TARGETS) {
      const model = `${target.prefix}/${target.model}`

      it.effect(`${target.prefix}: non-streamed answer, credentials and capture`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const { data, response } = yield* Effect.promise(() =>
            clientFor(stack).chat.completions.create({
              model,
              messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Where is invoice 42?" }]
            }).withResponse()
          )
          assert.strictEqual(data.choices[0]!.message.content, "Fake answer to: Where is invoice 42?")
          assert.strictEqual(data.choices[0]!.finish_reason, "stop")
          assert.isAbove(data.usage!.total_tokens, 0)
          const ledgerId = response.headers.get("x-ledger-id")!
          assert.match(ledgerId, UUID_V7)
          assertCredentials(stack, target)
          const capture = yield* stack.capture(ledgerId)
          assertCapture(stack, capture, { ledgerId, target, stream: false })
          assert.strictEqual(JSON.parse(capture.response!).choices[0].message.content, "Fake answer to: Where is invoice 42?")
        }))

      it.effect(`${target.prefix}: streamed answer arrives in chunks and is assembled for the capture`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const { data: stream, response } = yield* Effect.promise(() =>
            clientFor(stack).chat.completions.create({
              model,
              stream: true,
              messages: [{ role: "user", content: "Tell me about the quarterly report for the north region" }]
            }).withResponse()
          )
          const ledgerId = response.headers.get("x-ledger-id")!
          assert.match(ledgerId, UUID_V7)
          const arrivals: Array<number> = []
          let text = ""
          let usageChunks = 0
          let finish: string | null = null
          yield* Effect.promise(async () => {
            for await (const chunk of stream) {
              if (chunk.usage) usageChunks++
              const choice = chunk.choices[0]
              if (choice?.delta.content) {
                text += choice.delta.content
                arrivals.push(performance.now())
              }
              if (choice?.finish_reason) finish = choice.finish_reason
            }
          })
          assert.strictEqual(text, "Fake answer to: Tell me about the quarterly report for the north region")
          assert.strictEqual(finish, "stop")
          assert.strictEqual(usageChunks, 0, "no usage chunk the caller did not ask for")
          assert.isAbove(arrivals.length, 5)
          // chunks were relayed as produced (the fake pauses 5 ms between them), not buffered to the end
          assert.isAbove(arrivals.at(-1)! - arrivals[0]!, 20)
          assertCredentials(stack, target)
          const capture = yield* stack.capture(ledgerId)
          assertCapture(stack, capture, { ledgerId, target, stream: true })
          assert.strictEqual(JSON.parse(capture.response!).choices[0].message.content, text)
        }))

      it.effect(`${target.prefix}: tool calls, streamed and not`, () =>
        Effect.gen(function*() {
          const stack = yield* Stack
          const client = clientFor(stack)
          const request = {
            model,
            tools: TOOLS,
            messages: [{ role: "user" as const, content: "[[tool]] invoice 42" }]
          }
          const whole = yield* Effect.promise(() => client.chat.completions.create(request))
          const call = whole.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
          assert.strictEqual(whole.choices[0]!.finish_reason, "tool_calls")
          assert.strictEqual(call.function.name, "lookup_invoice")
          assert.deepStrictEqual(JSON.parse(call.function.arguments), { query: "invoice 42" })

          const { data: stream, response } = yield* Effect.promise(() =>
            client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } }).withResponse()
          )
          const args = new Map<number, { name: string; arguments: string }>()
          let usage = 0
          yield* Effect.promise(async () => {
            for await (const chunk of stream) {
              if (chunk.usage) usage++
              for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
                const entry = args.get(delta.index) ?? { name: "", arguments: "" }
                if (delta.function?.name) entry.name = delta.function.name
                entry.arguments += delta.function?.arguments ?? ""
                args.set(delta.index, entry)
              }
            }
          })
          assert.strictEqual(usage, 1, "the usage chunk the caller asked for")
          assert.strictEqual(args.get(0)!.name, "lookup_invoice")
          assert.deepStrictEqual(JSON.parse(args.get(0)!.arguments), { query: "invoice 42" })

          // the provider's tool turn goes back through the gateway as history
          const followUp = yield* Effect.promise(() =>
            client.chat.completions.create({
              ...request,
              messages: [...request.messages, whole.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: "{\"status\":\"paid\"}" }]
            })
          )
          assert.include(followUp.choices[0]!.message.content!, "Tool said:")

          const capture = yield* stack.capture(response.headers.get("x-ledger-id")!)
          const message = JSON.parse(capture.response!).choices[0].message
          assert.strictEqual(message.tool_calls[0].function.name, "lookup_invoice")
          assert.deepStrictEqual(JSON.parse(message.tool_calls[0].function.arguments), { query: "invoice 42" })
          assert.strictEqual(JSON.parse(capture.response!).choices[0].finish_reason, "tool_calls")
        }))

      if (target.images) {
        it.effect(`${target.prefix}: image input reaches the provider`, () =>
          Effect.gen(function*() {
            const stack = yield* Stack
            const answer = yield* Effect.promise(() =>
              clientFor(stack).chat.completions.create({
                model,
                messages: [{
                  role: "user",
                  content: [{ type: "text", text: "What is in this picture?" }, { type: "image_url", image_url: { url: PNG_DATA_URL } }]
                }]
              })
            )
            assert.strictEqual(answer.choices[0]!.message.content, "Fake answer to: What is in this picture?")
            const body = JSON.stringify(lastRequest(stack, target.type).body)
            assert.include(body, PNG_DATA_URL.slice(PNG_DATA_URL.indexOf(",") + 1), "the image bytes were forwarded")
          }))
      }
    }

    it.effect("OpenAI-wire calls forward the caller's body with only the model changed", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        yield* Effect.promise(() =>
          clientFor(stack).chat.completions.create({
            model: "openai/gpt-4o",
            messages: [{ role: "user", content: "hello" }],
            temperature: 0.25,
            metadata: { ticket: "OPS-7" }
          })
        )
        const body = lastRequest(stack, "openai").body
        assert.deepStrictEqual(body, { model: "gpt-4o", messages: [{ role: "user", content: "hello" }], temperature: 0.25, metadata: { ticket: "OPS-7" } })
      }))

    it.effect("an agent's long conversation is forwarded with only the model changed and captured as sent, streamed or not", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        // ~110 KB, with characters beyond ASCII (the gateway forwards and captures it from the caller's bytes)
        const messages = agentConversation(20) as Array<OpenAI.ChatCompletionMessageParam>
        for (const stream of [false, true]) {
          const ledgerId = yield* Effect.promise(async () => {
            const { data, response } = await clientFor(stack).chat.completions.create({ model: "openai/gpt-4o", messages, stream }).withResponse()
            if (stream) for await (const _ of data as AsyncIterable<unknown>) { /* read to the end */ }
            return response.headers.get("x-ledger-id")!
          })
          const body = lastRequest(stack, "openai").body
          assert.strictEqual(body.model, "gpt-4o")
          assert.deepStrictEqual(body.messages, messages)
          assert.deepStrictEqual(body.stream_options, stream ? { include_usage: true } : undefined)
          const request = JSON.parse((yield* stack.capture(ledgerId)).request)
          assert.strictEqual(request.model, "openai/gpt-4o")
          assert.deepStrictEqual(request.messages, messages)
        }
      }))

    it.effect("GET /v1/models lists the priced models in the OpenAI list shape", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const models = yield* Effect.promise(async () => {
          const list: Array<OpenAI.Models.Model & Record<string, unknown>> = []
          for await (const model of clientFor(stack).models.list()) list.push(model as never)
          return list
        })
        const gpt = models.find((model) => model.id === "openai/gpt-4o")!
        assert.deepInclude(gpt, { object: "model", owned_by: "openai", input_per_mtok: 2.5, output_per_mtok: 10 })
        assert.isTrue(models.some((model) => model.id.startsWith("anthropic/claude-")))
        assert.isTrue(models.some((model) => model.id.startsWith("gemini/")))
        assert.isTrue(models.some((model) => model.id.startsWith("bedrock/")))
      }))

    it.effect("metrics: per-route requests and latency, gateway overhead, capture queue and spool", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        yield* Effect.promise(() =>
          clientFor(stack).chat.completions.create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "count me" }] })
        )
        const text = yield* Effect.promise(() => fetch(`${stack.gatewayUrl}/metrics`).then((res) => res.text()))
        assert.match(text, /ledger_gateway_requests_total\{[^}]*route="POST \/v1\/chat\/completions"[^}]*status="200"[^}]*\} [1-9]/)
        assert.match(text, /ledger_gateway_request_duration_ms_count\{route="POST \/v1\/chat\/completions"\} [1-9]/)
        assert.match(text, /ledger_gateway_overhead_ms_count [1-9]/)
        assert.match(text, /ledger_capture_queue_depth \d+/)
        assert.match(text, /ledger_capture_spool_entries 0/)
        assert.match(text, /ledger_capture_spool_bytes 0/)
        assert.match(text, /ledger_capture_published_total [1-9]/)
      }))
  })
})

/** Reads a streamed answer until it has more than `words` words, then aborts the call (the caller goes away). */
const readThenLeave = (stream: AsyncIterable<OpenAI.ChatCompletionChunk>, controller: AbortController, words: number) =>
  Effect.promise(async () => {
    let received = ""
    try {
      for await (const chunk of stream) {
        received += chunk.choices[0]?.delta.content ?? ""
        if (received.split(" ").length > words) controller.abort()
      }
    } catch {
      // the client raises on abort
    }
    return received
  })

describe("gateway streaming to a caller that goes away", () => {
  it.live("the upstream request is aborted and the partial answer is captured (aborted: true)", () =>
    Effect.gen(function*() {
      // an endless OpenAI-compatible stream that records when its connection is closed
      let upstreamClosed = false
      const endless = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<Http.Server>((resolve) => {
            const server = Http.createServer((req, res) => {
              req.resume()
              res.writeHead(200, { "content-type": "text/event-stream" })
              let n = 0
              const timer = setInterval(() => {
                res.write(`data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: `word${n++} ` }, finish_reason: null }] })}\n\n`)
              }, 10)
              res.on("close", () => {
                clearInterval(timer)
                upstreamClosed = true
              })
            })
            server.listen(0, "127.0.0.1", () => resolve(server))
          })
        ),
        (server) => Effect.sync(() => server.close())
      )
      const stack = yield* gatewayStack({
        upstreams: [{ name: "endless", baseUrl: `http://127.0.0.1:${(endless.address() as AddressInfo).port}/v1` }]
      })
      const controller = new AbortController()
      const { data: stream, response } = yield* Effect.promise(() =>
        clientFor(stack).chat.completions.create(
          { model: "endless/m", stream: true, messages: [{ role: "user", content: "go on forever" }] },
          { signal: controller.signal }
        ).withResponse()
      )
      const ledgerId = response.headers.get("x-ledger-id")!
      yield* readThenLeave(stream, controller, 5)
      const capture = yield* stack.capture(ledgerId)
      assert.isTrue(capture.aborted)
      assert.strictEqual(capture.status, 200)
      assert.isNull(capture.error)
      const partial = JSON.parse(capture.response!).choices[0].message.content as string
      assert.isTrue(partial.startsWith("word0 word1 word2"), partial)
      yield* Effect.sleep(50)
      assert.isTrue(upstreamClosed, "the gateway closed the upstream request")
    }), { timeout: 60_000 })

  it.live("translated streams (anthropic, gemini, bedrock) are captured up to where the caller left", () =>
    Effect.gen(function*() {
      // 30 ms between chunks: the caller leaves after three words of a fifteen-word answer
      const stack = yield* gatewayStack({ stream: "memory", fake: { chunkDelayMs: 30 } })
      const ask = "list every step of the quarterly close for the finance team in order please"
      for (const model of ["anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash", "bedrock/amazon.nova-lite-v1:0"]) {
        const controller = new AbortController()
        const { data: stream, response } = yield* Effect.promise(() =>
          clientFor(stack).chat.completions.create({ model, stream: true, messages: [{ role: "user", content: ask }] }, { signal: controller.signal })
            .withResponse()
        )
        yield* readThenLeave(stream, controller, 3)
        const capture = yield* stack.capture(response.headers.get("x-ledger-id")!)
        assert.deepInclude(capture, { aborted: true, status: 200, error: null }, model)
        const partial = JSON.parse(capture.response!).choices[0].message.content as string
        assert.isTrue(partial.startsWith("Fake answer to:"), `${model}: ${partial}`)
        assert.isBelow(partial.length, `Fake answer to: ${ask}`.length, `${model}: the capture holds what had arrived, not the whole answer`)
      }
    }), { timeout: 60_000 })
})

describe("x-ledger-id (uuid v7)", () => {
  it("ids are RFC 9562 v7, carry their minting time, and strictly increase even within one millisecond", () => {
    const now = Date.now()
    const ids = Array.from({ length: 20_000 }, () => uuidv7(now))
    for (const id of ids.slice(0, 100)) assert.match(id, UUID_V7)
    for (let i = 1; i < ids.length; i++) assert.isTrue(ids[i]! > ids[i - 1]!, `${ids[i - 1]} < ${ids[i]}`)
    assert.strictEqual(new Set(ids).size, ids.length)
    assert.strictEqual(uuidv7Time(ids[0]!), now)
    // more than 4096 in one millisecond borrow the next milliseconds rather than repeat or go back
    assert.isAtMost(uuidv7Time(ids.at(-1)!) - now, 10)
    // a clock that steps back does not make ids go back
    const later = uuidv7(now - 60_000)
    assert.isTrue(later > ids.at(-1)!)
  })
})
