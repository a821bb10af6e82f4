/**
 * No capture is lost when Redis loses what it held: a Redis of the test's own, without persistence, is killed
 * while the stream holds a backlog the builders have not committed (PostgreSQL cut first, so nothing is built),
 * stays away for 8 s under load, and comes back empty. Every call is answered, and every answered call becomes a
 * decision exactly once: the gateway publishes again what Redis lost, and the builders drop what they had built.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { assertNothingLost, awayUnderLoad, callLoad } from "../support/call-load.ts"
import { testDatabase } from "../support/db.ts"
import { pgProxy } from "../support/pg-proxy.ts"
import { recordingStack } from "../support/recording-stack.ts"
import { streamLength } from "../support/redis.ts"
import { privateRedis } from "../support/redis-server.ts"

const metric = (name: string) =>
  Effect.map(PrometheusMetrics.format(), (text) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0))

describe("when Redis comes back empty", () => {
  it.live("with a backlog it held: every call answered, every answered call a decision exactly once", () =>
    Effect.gen(function*() {
      const redis = yield* privateRedis({ appendonly: false })
      const database = yield* testDatabase
      const postgres = yield* pgProxy(database.url)
      const stack = yield* recordingStack({ redisUrl: redis.url, settings: { databaseUrl: Option.some(Redacted.make(postgres.url)) } })
      const republishedBefore = yield* metric("ledger_capture_republished_total")
      const load = yield* callLoad(stack.gatewayUrl, stack.gatewayKey, { concurrency: 6 })
      while (load.answered.length < 100) yield* Effect.sleep(20)

      // the builders cannot commit: what the gateway publishes waits in the stream
      yield* postgres.stop
      yield* Effect.sleep(2_000)
      const backlog = yield* streamLength(redis.url, stack.settings.streamKey)
      assert.isAbove(backlog, 50, "a backlog in the stream when Redis goes")

      yield* awayUnderLoad(load, redis, { ms: 8_000, atLeast: 50 })
      assert.isBelow(yield* streamLength(redis.url, stack.settings.streamKey), backlog, "Redis came back without the backlog")
      yield* postgres.start
      yield* Effect.sleep(1_000)
      yield* assertNothingLost(load, database.url)
      assert.isAbove((yield* metric("ledger_capture_republished_total")) - republishedBefore, 0, "what Redis lost was published again")
    }), { timeout: 120_000 })
})
