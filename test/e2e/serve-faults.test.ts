/**
 * The default `ledger serve` (every role in one process, external PostgreSQL and Redis) as a user runs it, under
 * steady load, through the faults the service promises to survive: PostgreSQL away for 8 s, Redis away for 8 s, and a
 * Redis that comes back empty with a backlog it held. Every call is answered and every answered call becomes a
 * decision exactly once. Also: builders run in a thread of their own, and `/metrics` has each thread's process
 * metrics.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assertNothingLost, awayUnderLoad, callLoad } from "../support/call-load.ts"
import { testDatabase } from "../support/db.ts"
import { eventually } from "../support/eventually.ts"
import { pgProxy } from "../support/pg-proxy.ts"
import { streamLength, TEST_REDIS_URL, tcpProxy } from "../support/redis.ts"
import { privateRedis } from "../support/redis-server.ts"
import { serveProcess, stopsCleanly } from "../support/serve-process.ts"

const CONCURRENCY = 8
/** 8 s away; at 8 callers far more than 200 calls are answered meanwhile */
const OUTAGE = { ms: 8_000, atLeast: 200 }

const sample = (metrics: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? Number.NaN)

describe("the default ledger serve", () => {
  it.live("builders in a thread of their own; each thread's process metrics on /metrics; a clean SIGTERM", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const serve = yield* serveProcess({ databaseUrl: database.url, redisUrl: TEST_REDIS_URL })
      assert.include(serve.output(), "builders and analytics run in a thread of their own")
      const load = yield* callLoad(serve.gatewayUrl, serve.gatewayKey, { concurrency: 2 })
      while (load.answered.length < 50) yield* Effect.sleep(20)
      yield* assertNothingLost(load, database.url)

      // the metrics refresh every 10 s: wait for a window of both threads
      yield* Effect.sleep(10_500)
      const metrics = yield* serve.metrics
      for (const thread of ["main", "builder"]) {
        for (const name of ["nodejs_eventloop_lag_p50_seconds", "nodejs_eventloop_lag_p99_seconds", "nodejs_heap_size_used_bytes", "nodejs_active_resources_total"]) {
          assert.isAtLeast(sample(metrics, `${name}\\{thread="${thread}"\\}`), 0, `${name} of the ${thread} thread`)
        }
      }
      // (GC pauses appear once a collection ran — a quiet short run may have none; process-metrics.test.ts forces some)
      assert.isAbove(sample(metrics, "process_resident_memory_bytes"), 50_000_000)
      assert.isAbove(sample(metrics, "process_cpu_seconds_total"), 0)
      assert.isAbove(sample(metrics, "process_open_fds"), 5)
      assert.isAbove(sample(metrics, "ledger_decisions_built_total"), 0, "the builder thread's own metrics")
      assert.isAbove(sample(metrics, 'ledger_gateway_requests_total\\{route="POST /v1/chat/completions",status="200"\\}'), 0)
      assert.strictEqual(metrics.match(/^# TYPE nodejs_eventloop_lag_p99_seconds /gm)?.length, 1, "one family, both threads' series")

      yield* stopsCleanly(serve)
    }), { timeout: 120_000 })

  it.live("PostgreSQL away for 8 s under load: no call fails, every answered call a decision once", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const postgres = yield* pgProxy(database.url)
      const serve = yield* serveProcess({ databaseUrl: postgres.url, redisUrl: TEST_REDIS_URL })
      const load = yield* callLoad(serve.gatewayUrl, serve.gatewayKey, { concurrency: CONCURRENCY })
      while (load.answered.length < 200) yield* Effect.sleep(20)
      yield* awayUnderLoad(load, postgres, OUTAGE)
      yield* Effect.sleep(2_000)
      const answered = yield* assertNothingLost(load, database.url)
      assert.isAbove(answered, 1_000)
      assert.include(serve.output(), "known Gateway Keys are served their last verdict")
    }), { timeout: 150_000 })

  it.live("Redis away for 8 s under load (it comes back with its data): no call fails, nothing lost", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const redis = yield* tcpProxy
      const serve = yield* serveProcess({ databaseUrl: database.url, redisUrl: redis.url })
      const load = yield* callLoad(serve.gatewayUrl, serve.gatewayKey, { concurrency: CONCURRENCY })
      while (load.answered.length < 200) yield* Effect.sleep(20)
      yield* awayUnderLoad(load, redis, OUTAGE)
      yield* Effect.sleep(2_000)
      assert.isAbove(yield* assertNothingLost(load, database.url), 1_000)
    }), { timeout: 150_000 })

  it.live("Redis comes back empty (no persistence) after 8 s away, with a backlog it held: no call fails, nothing lost", () =>
    Effect.gen(function*() {
      const redis = yield* privateRedis({ appendonly: false })
      const database = yield* testDatabase
      const postgres = yield* pgProxy(database.url)
      const serve = yield* serveProcess({ databaseUrl: postgres.url, redisUrl: redis.url })
      // the persistence check runs beside the start: its warning can come just after the process is ready
      yield* eventually("the warning that Redis keeps nothing", Effect.sync(() => serve.output().includes("Redis runs without persistence")), 15)
      const load = yield* callLoad(serve.gatewayUrl, serve.gatewayKey, { concurrency: CONCURRENCY })
      while (load.answered.length < 200) yield* Effect.sleep(20)
      // nothing is built while PostgreSQL is away: a backlog builds up in the stream
      yield* postgres.stop
      yield* Effect.sleep(2_000)
      const backlog = yield* streamLength(redis.url, serve.streamKey)
      assert.isAbove(backlog, 100, "a backlog in the stream when Redis goes")

      yield* awayUnderLoad(load, redis, OUTAGE)
      assert.isBelow(yield* streamLength(redis.url, serve.streamKey), backlog, "Redis came back without its backlog")
      yield* postgres.start
      yield* Effect.sleep(2_000)
      assert.isAbove(yield* assertNothingLost(load, database.url), 1_000)
      assert.include(serve.output(), "publishing them again")
    }), { timeout: 150_000 })
})
