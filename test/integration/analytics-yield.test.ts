/**
 * Analytics shares the builder role's machine with ingest: it yields while captures wait for the builders, or have
 * waited too long, stopping a materialiser round between batches (but at most a minute in a row), each workspace's analytics runs in one builder process at a time (a lease), and a backlog
 * is materialised round after round without the interval between them.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer, Metric, Option, Redacted, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import { claimWorkspace } from "../../src/analytics/lease.ts"
import { type BuildCursor, changedSinceRead, readBatch } from "../../src/analytics/materialize/cursor.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ModelCalls } from "../../src/analytics/ModelCalls.ts"
import { deferredRounds, yieldingToIngest } from "../../src/analytics/yieldToIngest.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import { batchIds, CaptureStream } from "../../src/capture/CaptureStream.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import { defaultAnalyticsSettings, LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { TEST_REDIS_URL, testKeyPrefix } from "../support/redis.ts"
import { testSettings } from "../support/settings.ts"
import { insertDecisions, makeCapture, seedDecision, TEMPLATES } from "../support/seed.ts"
import { storeLayer } from "../support/stack.ts"

const streamWithLimits = (limits: { readonly yieldBacklog: number; readonly yieldAgeMs: number }) =>
  CaptureShards.single.pipe(
    Layer.provideMerge(MemoryCaptureStream.layer),
    Layer.provideMerge(LedgerConfig.layerFrom(testSettings({ analytics: { ...defaultAnalyticsSettings, ...limits } })))
  )

/** The capture stream in `shards` shards on the test Redis, with a backlog limit or an age limit. */
const shardedWithLimits = (shards: number, limits: { readonly yieldBacklog: number; readonly yieldAgeMs: number }) =>
  Layer.unwrap(Effect.map(testKeyPrefix("analytics-yield"), (prefix) =>
    CaptureShards.redis.pipe(Layer.provideMerge(LedgerConfig.layerFrom(testSettings({
      redisUrl: Option.some(Redacted.make(TEST_REDIS_URL)),
      streamKey: `${prefix}captures`,
      captureShards: shards,
      analytics: { ...defaultAnalyticsSettings, ...limits }
    }))))))

/** A guarded step that counts the rounds it ran. */
const countingRounds = (fiber: string) =>
  Effect.gen(function*() {
    const count = yield* Ref.make(0)
    return { guarded: yield* yieldingToIngest(fiber, () => Ref.update(count, (n) => n + 1)), rounds: Ref.get(count) }
  })

/** A builder's consumer reads what waits in `stream` and commits it. */
const buildAll = (stream: CaptureStream["Service"]) =>
  Effect.flatMap(stream.read("builder-1", { count: 10, blockMs: 0 }), (entries) => stream.ack(entries.map((entry) => entry.id)))

/** A new workspace with `total` decisions of one session, a second apart and ending a second ago (inserted 1,000 at a time). */
const seededWorkspace = (tenant: string, total: number) =>
  Effect.gen(function*() {
    const created = yield* (yield* Credentials).bootstrap({ tenant, workspace: "ops", email: `${tenant}@example.test`, role: "member" })
    const scope = { ...created, key_id: Crypto.randomUUID() }
    const session = Crypto.randomUUID()
    const started = Date.now() - total * 1_000
    for (let from = 0; from < total; from += 1_000) {
      yield* insertDecisions(Array.from({ length: Math.min(1_000, total - from) }, (_, i) =>
        seedDecision(makeCapture({ scope, agent_id: "bulk", at: started + (from + i) * 1_000, template: TEMPLATES[(from + i) % TEMPLATES.length] }), session)
      ))
    }
    return created
  })

describe("analytics yields to ingest", () => {
  it.effect("skips rounds while more captures than the limit wait, at most a minute in a row, and runs once they drain", () =>
    Effect.gen(function*() {
      const stream = yield* CaptureStream
      const { guarded, rounds } = yield* countingRounds("test-fiber")
      const deferred = Metric.withAttributes(deferredRounds, { fiber: "test-fiber" })
      const deferredBefore = (yield* Metric.value(deferred)).count

      yield* guarded
      assert.strictEqual(yield* rounds, 1, "no backlog: the round runs")

      yield* stream.publish(["a", "b", "c"], batchIds()())
      yield* guarded
      yield* TestClock.adjust("30 seconds")
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "three captures waiting, limit two: rounds are skipped")
      assert.strictEqual((yield* Metric.value(deferred)).count - deferredBefore, 2)

      yield* TestClock.adjust("31 seconds")
      yield* guarded
      assert.strictEqual(yield* rounds, 2, "after a minute of skipping, a round runs anyway")
      yield* guarded
      assert.strictEqual(yield* rounds, 2, "and the next one yields again")

      yield* buildAll(stream)
      yield* guarded
      assert.strictEqual(yield* rounds, 3, "the backlog drained: rounds run")
    }).pipe(Effect.provide(streamWithLimits({ yieldBacklog: 2, yieldAgeMs: 0 }))))

  it.effect("never yields when both limits are 0", () =>
    Effect.gen(function*() {
      const stream = yield* CaptureStream
      const { guarded, rounds } = yield* countingRounds("test-fiber-unlimited")
      yield* stream.publish(["a", "b", "c"], batchIds()())
      yield* TestClock.adjust("10 seconds")
      yield* guarded
      assert.strictEqual(yield* rounds, 1)
    }).pipe(Effect.provide(streamWithLimits({ yieldBacklog: 0, yieldAgeMs: 0 }))))

  it.effect("skips rounds while the oldest capture not yet committed arrived longer ago than the age limit", () =>
    Effect.gen(function*() {
      const stream = yield* CaptureStream
      const { guarded, rounds } = yield* countingRounds("test-fiber-age")

      yield* stream.publish(["a"], batchIds()())
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "one capture, just arrived: the round runs")
      yield* TestClock.adjust("301 millis")
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "unread for longer than the limit: the round yields")
      const entries = yield* stream.read("builder-1", { count: 10, blockMs: 0 })
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "read but not committed: still waiting, still yields")
      yield* stream.ack(entries.map((entry) => entry.id))
      yield* guarded
      assert.strictEqual(yield* rounds, 2, "committed: the round runs")
    }).pipe(Effect.provide(streamWithLimits({ yieldBacklog: 0, yieldAgeMs: 300 }))))

  it.effect("tells a running step to stop early once ingest falls behind, except in the round a minute of yielding forces", () =>
    Effect.gen(function*() {
      const stream = yield* CaptureStream
      const asked = yield* Ref.make<Array<boolean>>([])
      // a step that asks, as the materialiser does between its batches
      const guarded = yield* yieldingToIngest("test-fiber-stop", (stopEarly) =>
        Effect.flatMap(stopEarly, (stop) => Ref.update(asked, (answers) => [...answers, stop])))

      yield* guarded
      assert.deepStrictEqual(yield* Ref.get(asked), [false], "nothing waits")
      yield* stream.publish(["a"], batchIds()())
      yield* TestClock.adjust("301 millis")
      yield* guarded
      assert.deepStrictEqual(yield* Ref.get(asked), [false], "behind at the start: the step does not run")
      yield* TestClock.adjust("60 seconds")
      yield* guarded
      assert.deepStrictEqual(yield* Ref.get(asked), [false, false], "a minute of yielding: this round runs whole")

      // ingest caught up, then falls behind while a step runs: the step asks and is told to stop
      const running = yield* yieldingToIngest("test-fiber-stop", (stopEarly) =>
        Effect.gen(function*() {
          yield* stream.publish(["b"], batchIds()())
          yield* TestClock.adjust("301 millis")
          return yield* stopEarly
        }))
      yield* buildAll(stream)
      assert.isTrue(yield* running)
    }).pipe(Effect.provide(streamWithLimits({ yieldBacklog: 0, yieldAgeMs: 300 }))))

  it.effect("counts the backlog of every shard, not only the first", () =>
    Effect.gen(function*() {
      const shards = yield* CaptureShards
      const { guarded, rounds } = yield* countingRounds("test-fiber-shards")
      yield* shards.streams[2]!.publish(["a", "b", "c"], batchIds()())
      yield* guarded
      assert.strictEqual(yield* rounds, 0, "three captures waiting in the third shard, limit two: the round yields")
      yield* buildAll(shards.streams[2]!)
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "drained: the round runs")
    }).pipe(Effect.provide(shardedWithLimits(3, { yieldBacklog: 2, yieldAgeMs: 0 })), Effect.scoped))

  it.effect("reads the age of every shard from Redis", () =>
    Effect.gen(function*() {
      const shards = yield* CaptureShards
      const { guarded, rounds } = yield* countingRounds("test-fiber-shard-age")
      yield* shards.streams[1]!.publish(["a"], batchIds()())
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "just arrived")
      yield* Effect.sleep("400 millis").pipe(TestClock.withLive)
      yield* guarded
      assert.strictEqual(yield* rounds, 1, "waiting in the second shard longer than 300 ms by Redis's clock: the round yields")
      yield* buildAll(shards.streams[1]!)
      yield* guarded
      assert.strictEqual(yield* rounds, 2, "committed: the round runs")
    }).pipe(Effect.provide(shardedWithLimits(2, { yieldBacklog: 0, yieldAgeMs: 300 })), Effect.scoped))
})

describe("analytics leases", () => {
  layer(storeLayer("postgres"), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("one holder per workspace; the holder renews; a lapsed lease is taken over", () =>
      Effect.gen(function*() {
        const tenantSql = yield* TenantSql
        const created = yield* (yield* Credentials).bootstrap({ tenant: "lease", workspace: "ops", email: "lease@example.test", role: "member" })
        const scope = { tenant_id: created.tenant_id, workspace_id: created.workspace_id }
        const [first, second] = [Crypto.randomUUID(), Crypto.randomUUID()]

        assert.isTrue(yield* claimWorkspace(tenantSql, scope, first))
        assert.isFalse(yield* claimWorkspace(tenantSql, scope, second), "held by the first process")
        assert.isTrue(yield* claimWorkspace(tenantSql, scope, first), "the holder renews")

        // the first process stops renewing: its lease lapses
        yield* tenantSql.write(scope, ScopedSql.use((sql) => sql`UPDATE analytics_progress SET lease_until = now() - interval '1 second'`))
        assert.isTrue(yield* claimWorkspace(tenantSql, scope, second), "taken over once lapsed")
        assert.isFalse(yield* claimWorkspace(tenantSql, scope, first))
      }))
  })
})

describe("materialiser batches", () => {
  layer(storeLayer("postgres"), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a batch holds at most 16 MB of raw exchanges, reads the batch after it from where it stopped, and knows what moved since", () =>
      Effect.gen(function*() {
        const created = yield* (yield* Credentials).bootstrap({ tenant: "long", workspace: "ops", email: "long@example.test", role: "member" })
        const scope = { ...created, key_id: Crypto.randomUUID() }
        const session = Crypto.randomUUID()
        const started = Date.now() - 60_000
        // a short call, three long agent calls of 7 MB of transcript, a short one
        yield* insertDecisions(Array.from({ length: 5 }, (_, i) =>
          seedDecision(makeCapture({ scope, agent_id: "coder", at: started + i * 1_000, template: TEMPLATES[0] }), session)))
        const tenantSql = yield* TenantSql
        const ids = yield* tenantSql.write(created, ScopedSql.use((sql) => sql<{ id: string }>`
          SELECT ledger_id::text AS id FROM decisions ORDER BY built_at, ledger_id`))
        yield* tenantSql.write(created, ScopedSql.use((sql) => sql`UPDATE decisions SET raw_request = repeat('x', 7000000)
          WHERE ledger_id = ANY(${ids.slice(1, 4).map((row) => row.id)}::uuid[])`))

        const read = (after?: BuildCursor) => tenantSql.write(created, readBatch(after))
        const first = yield* read()
        assert.deepStrictEqual(first.rows.map((row) => row.ledger_id), ids.slice(0, 3).map((row) => row.id), "the short call and two long ones: 14 MB")
        assert.isTrue(first.more)
        const second = yield* read(first.last)
        assert.deepStrictEqual(second.rows.map((row) => row.ledger_id), ids.slice(3).map((row) => row.id))
        assert.isFalse(second.more)
        const third = yield* read(second.last)
        assert.deepStrictEqual([third.rows.length, third.last, third.more], [0, undefined, false])

        // a decision erased (or rebuilt) after its batch was read has moved: the batch's write leaves it out
        assert.strictEqual((yield* tenantSql.write(created, changedSinceRead(second.rows))).size, 0)
        yield* tenantSql.write(created, ScopedSql.use((sql) => sql`UPDATE decisions SET built_at = clock_timestamp()
          WHERE ledger_id = ${ids[4]!.id}::uuid`))
        assert.deepStrictEqual([...yield* tenantSql.write(created, changedSinceRead(second.rows))], [ids[4]!.id])
      }))
  })
})

describe("analytics pacing", () => {
  const pacedStore = CaptureShards.single.pipe(
    Layer.provideMerge(MemoryCaptureStream.layer),
    Layer.provideMerge(storeLayer("postgres", { analytics: { ...defaultAnalyticsSettings, intervalMs: 600_000, yieldBacklog: 0 } }))
  )
  const materializer = Materializer.layer.pipe(Layer.provide(ModelCalls.layer))
  layer(materializer.pipe(Layer.provideMerge(pacedStore)), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("a round that leaves a workspace behind is followed at once, not after the interval", () =>
      Effect.gen(function*() {
        // more than one round's share of a workspace (10 batches of 500)
        const total = 5_300
        const created = yield* seededWorkspace("paced", total)
        const tenantSql = yield* TenantSql
        const materialized = tenantSql.write(created, ScopedSql.use((sql) => sql<{ n: number }>`SELECT coalesce(sum(decisions), 0)::int AS n FROM hourly_rollups`))
          .pipe(Effect.map(([row]) => row!.n))

        // the fiber's rounds (interval: ten minutes): the second follows the first at once
        yield* Layer.build(Materializer.fiber)
        const deadline = Date.now() + 45_000
        while ((yield* materialized) < total && Date.now() < deadline) yield* Effect.sleep(200)
        assert.strictEqual(yield* materialized, total, "every decision materialised well within the interval")
        // read ahead of their writes, the batches still come to one search row per decision and the cursor on the last
        const [progress] = yield* tenantSql.write(created, ScopedSql.use((sql) => sql<{ rows: number; behind: number }>`
          SELECT (SELECT count(*)::int FROM decision_search) AS rows,
            (SELECT count(*)::int FROM decisions d JOIN analytics_progress p
              ON (d.built_at, d.ledger_id) > (p.built_cursor, p.built_cursor_id)) AS behind`))
        assert.deepStrictEqual(progress, { rows: total, behind: 0 })
        const outcome = yield* Materializer.use((m) => m.round())
        assert.deepStrictEqual(outcome, { materialized: 0, behind: false }, "caught up")
      }).pipe(Effect.scoped), 90_000)

    it.effect("a round stops between batches when told ingest fell behind, and the next round goes on from there", () =>
      Effect.gen(function*() {
        // three batches' worth (500 a batch)
        yield* seededWorkspace("stopped", 1_200)
        const asked = yield* Ref.make(0)
        const stopEarly = Effect.as(Ref.update(asked, (n) => n + 1), true)

        const stopped = yield* Materializer.use((m) => m.round(stopEarly))
        assert.deepStrictEqual(stopped, { materialized: 500, behind: true }, "one batch, then it stopped: the workspace is left behind")
        assert.isAtLeast(yield* Ref.get(asked), 1)
        const rest = yield* Materializer.use((m) => m.round())
        assert.deepStrictEqual(rest, { materialized: 700, behind: false })
      }), 90_000)
  })
})
