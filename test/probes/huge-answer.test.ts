/**
 * Probe: one caller's 100 MB streamed answer (an upstream behind LEDGER_UPSTREAMS gone wrong) stalls nobody. Through a
 * real `ledger serve` — with external PostgreSQL and Redis, and in the embedded default — the answer is relayed
 * whole, its decision is recorded with the capture cut to LEDGER_CAPTURE_MAX_ANSWER_BYTES and marked with the full
 * size, another tenant's REST reads and gateway calls keep answering within a second while it streams and for the
 * 45 s after, and SIGTERM stops the process within 10 s.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { testDatabase } from "../support/db.ts"
import { TEST_REDIS_URL } from "../support/redis.ts"
import { type ServeProcess, serveProcess } from "../support/serve-process.ts"

const ANSWER_BYTES = 100 * 1024 * 1024
const DELTA_CHARS = 64 * 1024
const WATCH_AFTER_MS = 45_000
const SLOWEST_MS = 1_000

/** An OpenAI-compatible upstream whose every streamed answer is ANSWER_BYTES of text deltas, then finish and usage. */
const hugeUpstream = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
      const delta = `data: ${JSON.stringify({ id: "c-huge", object: "chat.completion.chunk", created: 1, model: "big", choices: [{ index: 0, delta: { content: "x".repeat(DELTA_CHARS) }, finish_reason: null }] })}\n\n`
      const server = Http.createServer((req, res) => {
        req.resume()
        req.on("end", () => {
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write(`data: ${JSON.stringify({ id: "c-huge", object: "chat.completion.chunk", created: 1, model: "big", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })}\n\n`)
          let sent = 0
          const more = () => {
            while (sent < ANSWER_BYTES) {
              sent += DELTA_CHARS
              if (!res.write(delta)) return void res.once("drain", more)
            }
            res.write(`data: ${JSON.stringify({ id: "c-huge", object: "chat.completion.chunk", created: 1, model: "big", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`)
            res.write(`data: ${JSON.stringify({ id: "c-huge", object: "chat.completion.chunk", created: 1, model: "big", choices: [], usage: { prompt_tokens: 5, completion_tokens: 25_000_000, total_tokens: 25_000_005 } })}\n\n`)
            res.end("data: [DONE]\n\n")
          }
          more()
        })
      })
      server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server }))
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const chat = (serve: ServeProcess, key: string, model: string, agent: string) =>
  fetch(`${serve.gatewayUrl}/v1/chat/completions?agent_id=${agent}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-service-provider-api-key": "sk-probe-0123456789" },
    body: JSON.stringify({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "tell me everything" }] })
  })

/** Another tenant's REST read and gateway call every 250 ms until `until` says stop: each one's status and time. */
const watchOtherTenant = (serve: ServeProcess, other: { readonly pat: string; readonly gateway_key: string }, until: () => boolean) =>
  Effect.promise(async () => {
    const samples: Array<{ readonly what: string; readonly status: number; readonly ms: number }> = []
    const timed = async (what: string, call: () => Promise<Response>) => {
      const t0 = performance.now()
      const status = await call().then(async (response) => (await response.arrayBuffer(), response.status), () => 0)
      samples.push({ what, status, ms: performance.now() - t0 })
    }
    while (!until()) {
      await Promise.all([
        timed("rest", () => fetch(`${serve.apiUrl}/v1/agents`, { headers: { authorization: `Bearer ${other.pat}` }, signal: AbortSignal.timeout(10_000) })),
        timed("gateway", () => chat(serve, other.gateway_key, "openai/gpt-4o-mini", "bystander")),
        new Promise((resolve) => setTimeout(resolve, 250))
      ])
    }
    return samples
  })

/** The decision of the huge call, once built: its trail as REST gives it. */
const hugeDecision = (serve: ServeProcess, pat: string) =>
  Effect.promise(async () => {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      const list = await (await fetch(`${serve.apiUrl}/v1/decisions?agent_id=huge-agent`, { headers: { authorization: `Bearer ${pat}` } })).json() as any
      const summary = list.data?.[0]
      if (summary !== undefined) {
        const detail = await fetch(`${serve.apiUrl}/v1/sessions/${summary.session_id}/decisions/${summary.ledger_id}`, { headers: { authorization: `Bearer ${pat}` } })
        return await detail.json() as any
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    return undefined
  })

const probe = (backend: "external" | "embedded") =>
  Effect.gen(function*() {
    const upstream = yield* hugeUpstream
    const database = backend === "external" ? yield* testDatabase : undefined
    const serve = yield* serveProcess({
      ...(database === undefined ? {} : { databaseUrl: database.url, redisUrl: TEST_REDIS_URL }),
      env: { LEDGER_UPSTREAMS: `huge=${upstream.url}` }
    })
    const other = JSON.parse(yield* serve.ledger(["admin", "bootstrap", "--tenant", "bystanders", "--workspace", "main", "--email", "b@bystanders.test", "--json"])) as {
      readonly pat: string
      readonly gateway_key: string
    }
    let watching = true
    const watcher = yield* Effect.forkChild(watchOtherTenant(serve, other, () => !watching))

    // the huge call, read to its end as the caller reads it
    const t0 = performance.now()
    const relayed = yield* Effect.promise(async () => {
      const response = await chat(serve, serve.gatewayKey, "huge/big", "huge-agent")
      let content = 0
      let tail = ""
      const decoder = new TextDecoder()
      for await (const chunk of response.body!) {
        tail += decoder.decode(chunk, { stream: true })
        let end = tail.indexOf("\n\n")
        while (end !== -1) {
          const data = tail.slice(6, end)
          tail = tail.slice(end + 2)
          if (data !== "[DONE]") content += (JSON.parse(data).choices?.[0]?.delta?.content ?? "").length
          end = tail.indexOf("\n\n")
        }
      }
      return { status: response.status, content, ledgerId: response.headers.get("x-ledger-id") }
    })
    const streamedMs = performance.now() - t0
    assert.strictEqual(relayed.status, 200)
    assert.isAtLeast(relayed.content, ANSWER_BYTES, "the caller got the whole answer")

    yield* Effect.sleep(WATCH_AFTER_MS)
    watching = false
    const samples = yield* Fiber.join(watcher)

    const decision = yield* hugeDecision(serve, serve.pat)
    assert.isDefined(decision, `no decision for the huge call:\n${serve.output().slice(-3_000)}`)
    assert.strictEqual(decision.ledger_id, relayed.ledgerId)
    assert.match(JSON.stringify(decision), /the answer was 10\d\.\d MB; the capture kept 4\.0 MB of it/, "the decision says the capture was cut")

    const failed = samples.filter((sample) => sample.status !== 200)
    const slowest = samples.reduce((max, sample) => Math.max(max, sample.ms), 0)
    assert.deepStrictEqual(failed, [], `${backend}: another tenant's calls failed`)
    assert.isAtLeast(samples.length, 2 * (WATCH_AFTER_MS / 1_000), `${backend}: the watch ran`)
    assert.isAtMost(slowest, SLOWEST_MS, `${backend}: slowest of ${samples.length} calls ${Math.round(slowest)} ms (streamed in ${Math.round(streamedMs)} ms)`)

    const stopping = performance.now()
    const code = yield* serve.kill("SIGTERM")
    const stopMs = performance.now() - stopping
    assert.include([0, 130], code, serve.output().slice(-3_000))
    assert.isBelow(stopMs, 10_000, `${backend}: SIGTERM stopped the process in ${Math.round(stopMs)} ms`)

    // what is stored: the answer within the limit, marked; the ledger still proves itself
    const exported = (yield* serve.ledger(["export", "--format", "jsonl"])).trim().split("\n").map((line) => JSON.parse(line))
    const stored = exported.find((line) => line.ledger_id === relayed.ledgerId)
    assert.isAtMost(Buffer.byteLength(stored.raw_response), 4 * 1024 * 1024, "the stored answer is within the limit")
    assert.strictEqual(JSON.parse(stored.raw_response).ledger_truncated.limit_bytes, 4 * 1024 * 1024)
    assert.match(yield* serve.ledger(["verify"]), /: OK$/m)
  }).pipe(Effect.scoped)

describe("a 100 MB answer", () => {
  it.live("with external PostgreSQL and Redis: relayed whole, recorded cut and marked; another tenant unaffected; SIGTERM in 10 s", () => probe("external"), 180_000)
  it.live("in the embedded default: relayed whole, recorded cut and marked; another tenant unaffected; SIGTERM in 10 s", () => probe("embedded"), 180_000)
})
