/**
 * Fault tests of the pipeline (docs/ARCHITECTURE.md, "The promises") with builders as real processes (`ledger serve
 * --roles builder`) on real Redis and PostgreSQL: (a) a builder SIGKILLed mid-batch while another runs — every
 * capture becomes a decision exactly once; (b) PostgreSQL "stopped" for ~10 s under load (a TCP proxy cut, the shared
 * server untouched) — builders back off and resume, nothing lost; (c) a poison capture lands in the dead letters with
 * its reason, the pipeline goes on, and `ledger dlq replay` builds it once the cause is fixed.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { createCluster } from "redis"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import * as RedisCaptureStream from "../../src/capture/RedisCaptureStream.ts"
import { clusterKey } from "../../src/capture/redisConnection.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import type { CaptureIdentity } from "../../bench/ingest/captures.ts"
import { pgProxy } from "../support/pg-proxy.ts"
import { redisAdmin, TEST_REDIS_URL, testKeyPrefix } from "../support/redis.ts"
import { startRedisCluster } from "../support/redis-cluster.ts"
import { storeWithPoolLayer } from "../support/stack.ts"
import {
  captureJson,
  decisionCount,
  ledgerEnv,
  MINUTE,
  newWorkspace,
  publish,
  recount,
  runLedger,
  spawnBuilder,
  T0
} from "./builder-harness.ts"
import { eventually } from "../support/eventually.ts"

/** A fresh database and a stream key of its own, reachable in-process (to publish and inspect) and by children. */
const faultStack = Layer.unwrap(Effect.map(testKeyPrefix("faults"), (prefix) =>
  RedisCaptureStream.layer.pipe(Layer.provideMerge(storeWithPoolLayer("postgres", {
    redisUrl: Option.some(Redacted.make(TEST_REDIS_URL)),
    streamKey: `${prefix}captures`
  })))
))

/** Publishes `total` captures in chunks (a steady load), returning their ledger ids. */
const publishLoad = (identity: CaptureIdentity, total: number, options: { readonly chunk: number; readonly everyMs: number }) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    for (let i = 0; i < total; i += options.chunk) {
      const payloads = Array.from({ length: Math.min(options.chunk, total - i) }, (_, j) => {
        const n = i + j
        return captureJson(identity, { agent_id: `agent-${n % 7}`, execution_id: n % 11 === 0 ? `run-${n % 3}` : null, started_at: T0 + n * 20_000, variant: n })
      })
      ids.push(...payloads.map((payload) => JSON.parse(payload).ledger_id as string))
      yield* publish(payloads)
      yield* Effect.sleep(`${options.everyMs} millis`)
    }
    return ids
  })

const storedIds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return (yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions ORDER BY ledger_id`).map((row) => row.ledger_id)
})

/**
 * The same on a three-node Redis Cluster of its own, started for the suite: REDIS_URL names one of its nodes (every
 * process finds it is a cluster's), and the test looks at the stream through a cluster client.
 */
const clusterFaultStack = Layer.unwrap(Effect.map(
  Effect.acquireRelease(Effect.promise(startRedisCluster), (cluster) => Effect.promise(cluster.stop)),
  (cluster) =>
    RedisCaptureStream.layer.pipe(Layer.provideMerge(storeWithPoolLayer("postgres", {
      redisUrl: Option.some(Redacted.make(cluster.urls[0]!)),
      streamKey: "faults:captures"
    })))
))

/** A client of the stream's Redis and the stream's key there, to look at what the builders cannot tell. */
type StreamRedis = Effect.Effect<{ readonly redis: Effect.Success<typeof redisAdmin>; readonly key: string }, never, LedgerConfig | Scope.Scope>

const oneRedis: StreamRedis = Effect.gen(function*() {
  return { redis: yield* redisAdmin, key: (yield* LedgerConfig).streamKey }
})

const clusterRedis: StreamRedis = Effect.gen(function*() {
  const settings = yield* LedgerConfig
  const url = Option.getOrThrow(settings.redisUrl)
  const cluster = yield* Effect.acquireRelease(
    Effect.promise(() => createCluster({ rootNodes: [{ url: Redacted.value(url) }] }).connect()),
    (cluster) => Effect.sync(() => cluster.destroy())
  )
  // a cluster client answers the commands of one, routed by key
  return { redis: cluster as unknown as Effect.Success<typeof redisAdmin>, key: clusterKey(settings.streamKey) }
})

const consumersOf = (streamRedis: StreamRedis, pid: number) =>
  Effect.scoped(Effect.gen(function*() {
    const settings = yield* LedgerConfig
    const { key, redis } = yield* streamRedis
    const summary = yield* Effect.promise(() => redis.xPending(key, settings.streamGroup))
    return (summary.consumers ?? []).filter((consumer) => consumer.name.includes(`-${pid}-`)).reduce((sum, consumer) => sum + Number(consumer.deliveriesCounter), 0)
  }))

const killedMidBatch = (stack: typeof faultStack, on: string, streamRedis: StreamRedis, startLog?: string) =>
  layer(stack, { timeout: 180_000, excludeTestServices: true })(`(a) a builder killed mid-batch (${on})`, (it) => {
    it.effect("every capture becomes a decision exactly once, and rollups equal the recount", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const identity = yield* newWorkspace()
        const env = ledgerEnv(settings, { LEDGER_RECLAIM_IDLE_MS: "1500", LEDGER_BUILDER_BATCH_SIZE: "40", LEDGER_LOG_LEVEL: "info" })
        const victim = yield* spawnBuilder(env)
        const survivor = yield* spawnBuilder(env)

        const publisher = yield* Effect.forkChild(publishLoad(identity, 2_400, { chunk: 60, everyMs: 25 }))
        // kill it while it holds delivered, unacknowledged captures: mid-batch
        yield* eventually("some decisions", Effect.map(decisionCount, (n) => n >= 300))
        yield* victim.killHolding(consumersOf(streamRedis, victim.pid))
        const orphaned = yield* consumersOf(streamRedis, victim.pid)
        assert.isAbove(orphaned, 0, "the killed builder left captures pending")

        const published = yield* Fiber.join(publisher)
        yield* eventually("every capture built", Effect.map(decisionCount, (n) => n >= published.length), 90)
        const stream = yield* CaptureStream
        yield* eventually("nothing pending", Effect.map(stream.stats, (stats) => stats.pending === 0), 30)

        assert.deepStrictEqual(yield* storedIds, [...published].sort())
        assert.deepStrictEqual(yield* recount, [])
        assert.strictEqual((yield* stream.stats).dead_letters, 0)
        assert.match(survivor.logs(), /reclaimed idle captures/)
        if (startLog !== undefined) assert.include(survivor.logs(), startLog)
        assert.isFalse(survivor.exited())
      }), 120_000)
  })

describe("pipeline faults", () => {
  killedMidBatch(faultStack, "one Redis", oneRedis)
  killedMidBatch(clusterFaultStack, "a three-node Redis Cluster", clusterRedis, "REDIS_URL names a node of a Redis Cluster")

  layer(faultStack, { timeout: 180_000, excludeTestServices: true })("(b) PostgreSQL stopped under load", (it) => {
    it.effect("builders back off and resume; nothing is lost", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const identity = yield* newWorkspace()
        const proxy = yield* pgProxy(Option.match(settings.databaseUrl, { onNone: () => "", onSome: Redacted.value }))
        const env = ledgerEnv(settings, { DATABASE_URL: proxy.url, LEDGER_BUILDER_BATCH_SIZE: "50" })
        const builders = [yield* spawnBuilder(env), yield* spawnBuilder(env)]

        const publisher = yield* Effect.forkChild(publishLoad(identity, 3_000, { chunk: 40, everyMs: 50 }))
        yield* eventually("building under load", Effect.map(decisionCount, (n) => n >= 200))
        yield* proxy.stop
        // a COMMIT already forwarded when the connections were cut may still land
        yield* Effect.sleep("500 millis")
        const builtWhenStopped = yield* decisionCount
        yield* Effect.sleep("10 seconds")
        const stream = yield* CaptureStream
        const during = yield* stream.stats
        assert.strictEqual(yield* decisionCount, builtWhenStopped, "nothing commits while the database is away")
        assert.isAbove(during.pending + (during.lag ?? 0), 0, "captures wait in the stream")
        yield* proxy.start

        const published = yield* Fiber.join(publisher)
        yield* eventually("every capture built", Effect.map(decisionCount, (n) => n >= published.length), 90).pipe(
          Effect.tapDefect(() => Effect.sync(() => console.error(builders.map((b) => b.logs()).join("\n----\n"))))
        )
        yield* eventually("nothing pending", Effect.map(stream.stats, (stats) => stats.pending === 0), 30)
        assert.deepStrictEqual(yield* storedIds, [...published].sort())
        assert.deepStrictEqual(yield* recount, [])
        assert.strictEqual((yield* stream.stats).dead_letters, 0)
        for (const builder of builders) {
          assert.isFalse(builder.exited(), "the builders outlive the outage")
          assert.isAbove((yield* builder.metric("ledger_builder_retries_total")) ?? 0, 0, "it backed off")
          assert.match(builder.logs(), /batch write failed; backing off/)
        }
      }), 150_000)
  })

  layer(faultStack, { timeout: 180_000, excludeTestServices: true })("(c) a poison capture", (it) => {
    it.effect("is dead-lettered with its reason, the pipeline goes on, and `ledger dlq replay` builds it after the fix", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const sql = yield* SqlClient.SqlClient
        const stream = yield* CaptureStream
        const identity = yield* newWorkspace()
        // the "bug": the database refuses one model's calls
        yield* sql`ALTER TABLE decisions ADD CONSTRAINT test_no_poison CHECK (model <> 'poisoned-model')`
        const env = ledgerEnv(settings)
        yield* spawnBuilder(env)

        const good = (from: number, count: number) =>
          Array.from({ length: count }, (_, i) => captureJson(identity, { agent_id: "agent-p", started_at: T0 + (from + i) * MINUTE, variant: from + i }))
        const poison = JSON.parse(captureJson(identity, { agent_id: "agent-p", started_at: T0 + 100 * MINUTE }))
        poison.model = "poisoned-model"
        yield* publish([...good(0, 20), JSON.stringify(poison), "{\"v\":1,\"ledger_id\":\"cut-off", ...good(20, 20)])
        yield* eventually("the good ones built", Effect.map(decisionCount, (n) => n === 40))
        yield* eventually("two dead letters", Effect.map(stream.stats, (stats) => stats.dead_letters === 2))

        const listed = yield* runLedger(["dlq", "list", "--json"], env)
        assert.strictEqual(listed.code, 0, listed.stderr)
        const letters = JSON.parse(listed.stdout) as Array<{ id: string; reason: string; ledger_id: string | null; deliveries: number }>
        const poisoned = letters.find((letter) => letter.ledger_id === poison.ledger_id)!
        assert.match(poisoned.reason, /^database refused the decision: .*violates check constraint "test_no_poison"/)
        assert.match(letters.find((letter) => letter !== poisoned)!.reason, /^invalid capture: /)
        const table = yield* runLedger(["dlq", "list"], env)
        assert.match(table.stdout, /ID\s+FAILED AT\s+DELIVERIES\s+LEDGER ID\s+AGENT\s+REASON/)
        assert.include(table.stdout, poison.ledger_id)

        // the pipeline goes on
        yield* publish(good(40, 10))
        yield* eventually("later captures built", Effect.map(decisionCount, (n) => n === 50))

        // the fix, then the replay of that one letter
        yield* sql`ALTER TABLE decisions DROP CONSTRAINT test_no_poison`
        const replayed = yield* runLedger(["dlq", "replay", poisoned.id, "--json"], env)
        assert.strictEqual(replayed.code, 0, replayed.stderr)
        assert.deepStrictEqual(JSON.parse(replayed.stdout), { replayed: 1 })
        yield* eventually("the poison built", Effect.map(decisionCount, (n) => n === 51))
        const [row] = yield* sql<{ model: string }>`SELECT model FROM decisions WHERE ledger_id = ${poison.ledger_id}`
        assert.strictEqual(row!.model, "poisoned-model")
        const remaining = yield* stream.listDeadLetters({ count: 10 })
        assert.strictEqual(remaining.length, 1)
        assert.match(remaining[0]!.reason, /^invalid capture: /)
        assert.deepStrictEqual(yield* recount, [])
      }), 120_000)
  })
})
