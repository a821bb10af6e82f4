/**
 * Promise 2 when Redis loses what it held (DESIGN §3): a Redis of the test's own, without persistence, is killed
 * while the stream holds a backlog the builders have not committed (PostgreSQL cut first, so nothing is built),
 * stays away for 8 s under load, and comes back empty. Every call is answered, and every answered call becomes a
 * decision exactly once: the gateway publishes again what Redis lost, and the builders drop what they had built.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { createClient } from "redis"
import { callLoad } from "../support/call-load.ts"
import { testDatabase } from "../support/db.ts"
import { pgProxy } from "../support/pg-proxy.ts"
import { recordingStack } from "../support/recording-stack.ts"
import { privateRedis } from "../support/redis-server.ts"

const OUTAGE_MS = 8_000

const metric = (name: string) =>
  Effect.map(PrometheusMetrics.format(), (text) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0))

/** How many decision rows each answered ledger id has. */
export const decisionRows = (databaseUrl: string, ledgerIds: ReadonlyArray<string>) =>
  PgClient.PgClient.use((sql) =>
    sql<{ rows: number; distinct: number }>`
      SELECT count(*)::int AS rows, count(DISTINCT ledger_id)::int AS distinct
      FROM decisions WHERE ledger_id::text = ANY(${[...ledgerIds]})`
  ).pipe(
    Effect.map(([row]) => row!),
    Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))
  )

const streamLength = (url: string, key: string) =>
  Effect.promise(async () => {
    const client = await createClient({ url }).connect()
    try {
      return await client.xLen(key)
    } finally {
      client.destroy()
    }
  })

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

      yield* redis.stop
      const answeredBeforeOutage = load.answered.length
      yield* Effect.sleep(OUTAGE_MS)
      assert.isAbove(load.answered.length - answeredBeforeOutage, 50, "calls answered while Redis was away")
      yield* redis.start
      assert.isBelow(yield* streamLength(redis.url, stack.settings.streamKey), backlog, "Redis came back without the backlog")
      yield* postgres.start
      yield* Effect.sleep(1_000)
      yield* load.stop

      assert.deepStrictEqual(load.failures.slice(0, 5), [], `every call was answered (${load.failures.length} were not)`)
      const answered = load.answered
      const deadline = Date.now() + 60_000
      let built = yield* decisionRows(database.url, answered)
      while (built.distinct < answered.length && Date.now() < deadline) {
        yield* Effect.sleep(250)
        built = yield* decisionRows(database.url, answered)
      }
      assert.deepStrictEqual(built, { rows: answered.length, distinct: answered.length }, "every answered call a decision, once")
      assert.isAbove((yield* metric("ledger_capture_republished_total")) - republishedBefore, 0, "what Redis lost was published again")
    }), { timeout: 120_000 })
})
