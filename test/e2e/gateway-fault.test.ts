/**
 * Promise 2 under a real outage: the Redis behind the capture stream goes away (a TCP proxy cuts every
 * connection and refuses new ones) for several seconds in the middle of a burst of calls. Every call is
 * answered; the captures made meanwhile go to the spool; after Redis returns every capture is in the stream
 * exactly once — checked by reading the stream back (count and ledger ids). The outage begins the worst way: a
 * publish reaches Redis and is applied, but the connection drops before its reply arrives. The publisher cannot
 * tell, spools the batch, and replays it under the same batch id; the stream recognises it and appends nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { gatewayStack } from "../support/gateway-stack.ts"
import { tcpProxy } from "../support/redis.ts"

const CONCURRENCY = 6
const OUTAGE_MS = 4_000

const metric = (name: string) =>
  Effect.map(PrometheusMetrics.format(), (text) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0))

describe("gateway when the stream backend goes away", () => {
  it.live("every call is answered; after recovery every capture is in the stream exactly once", () =>
    Effect.gen(function*() {
      const proxy = yield* tcpProxy
      const stack = yield* gatewayStack({ redisUrl: proxy.url })
      const answered: Array<string> = []
      const failures: Array<string> = []
      let spooledDuringOutage = 0
      let running = true

      const call = (n: number) =>
        Effect.promise(async () => {
          const stream = n % 4 === 0
          const res = await fetch(`${stack.baseURL}/chat/completions?agent_id=agent-fault&execution_id=burst`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${stack.gatewayKey}`,
              "content-type": "application/json",
              "x-service-provider-api-key": "sk-fault"
            },
            body: JSON.stringify({
              model: n % 2 === 0 ? "openai/gpt-4o-mini" : "anthropic/claude-haiku-4-5",
              stream,
              messages: [{ role: "user", content: `[[slow:3]] call number ${n}` }]
            })
          })
          const text = await res.text()
          const complete = stream ? text.endsWith("data: [DONE]\n\n") : text.includes(`call number ${n}`)
          if (res.status !== 200 || !complete) failures.push(`${n}: ${res.status} ${text.slice(0, 200)}`)
          else answered.push(res.headers.get("x-ledger-id")!)
        })

      let next = 0
      const worker = Effect.gen(function*() {
        while (running) yield* call(next++)
      })
      const workers = yield* Effect.forEach(Array.from({ length: CONCURRENCY }), () => Effect.forkChild(worker))

      // a warm start: calls flowing and captures in the stream before the cut
      while (answered.length < 100) yield* Effect.sleep(20)
      const beforeOutage = answered.length
      const failuresBefore = yield* metric("ledger_capture_publish_failures_total")
      const alreadyPublishedBefore = yield* metric("ledger_capture_batches_already_published_total")
      // the next publish lands but its reply is lost; then Redis stays away
      const cut = yield* proxy.loseNextReply("EVALSHA")
      yield* cut
      yield* proxy.stop
      const outageStart = Date.now()
      while (Date.now() - outageStart < OUTAGE_MS) {
        yield* Effect.sleep(250)
        spooledDuringOutage = Math.max(spooledDuringOutage, yield* metric("ledger_capture_spool_entries"))
      }
      const duringOutage = answered.length - beforeOutage
      yield* proxy.start
      yield* Effect.sleep(1_000)
      running = false
      yield* Fiber.joinAll(workers)

      assert.deepStrictEqual(failures.slice(0, 5), [], `every call was answered (${failures.length} were not)`)
      assert.isAbove(duringOutage, 50, "calls kept being answered while Redis was away")
      assert.isAbove(spooledDuringOutage, 20, "captures went to the spool during the outage")
      assert.isAbove(yield* metric("ledger_capture_publish_failures_total"), failuresBefore)

      // the spool is replayed once the client has reconnected
      yield* stack.settled.pipe(Effect.timeout(30_000))
      const captures = yield* stack.captures
      const ids = captures.map((capture) => capture.ledger_id)
      const repeated = ids.filter((id, i) => ids.indexOf(id) !== i)
      assert.deepStrictEqual(repeated, [], "no capture is in the stream twice")
      // nothing lost, nothing invented: the ids in the stream are exactly the answered calls, each once
      assert.strictEqual(ids.length, answered.length)
      assert.deepStrictEqual([...ids].sort(), [...answered].sort())
      assert.strictEqual(
        (yield* metric("ledger_capture_batches_already_published_total")) - alreadyPublishedBefore,
        1,
        "the batch whose reply was lost was replayed and recognised"
      )
      for (const capture of captures) {
        assert.strictEqual(capture.agent_id, "agent-fault")
        assert.strictEqual(capture.status, 200)
      }
    }), { timeout: 90_000 })
})
