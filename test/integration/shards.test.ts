/**
 * The sharded capture stream (docs/ARCHITECTURE.md, "Shards") with builders as real processes (`ledger serve --roles
 * builder`) on real Redis and PostgreSQL, on one Redis and on a three-node Redis Cluster: captures published over four
 * shards by workspace, then a resharding to two while two builders run and one of them is SIGKILLed mid-batch. Every
 * capture becomes a decision exactly once, every shard — the two retired ones too — ends with nothing pending, and the
 * shard record comes down to two once the retired shards are drained. And readiness answers for every shard, not the
 * first alone.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { createClient, createCluster } from "redis"
import type { CaptureIdentity } from "../../bench/ingest/captures.ts"
import { CaptureShards, shardKey } from "../../src/capture/CaptureShards.ts"
import { batchIds } from "../../src/capture/CaptureStream.ts"
import { clusterKey } from "../../src/capture/redisConnection.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { Health } from "../../src/serving/Health.ts"
import { TEST_REDIS_URL, testKeyPrefix } from "../support/redis.ts"
import { startRedisCluster } from "../support/redis-cluster.ts"
import { storeWithPoolLayer } from "../support/stack.ts"
import type { PipelineReport } from "../../src/ops/Status.ts"
import { captureJson, decisionCount, ledgerEnv, newWorkspace, recount, runLedger, spawnBuilder, T0 } from "./builder-harness.ts"
import { eventually } from "../support/eventually.ts"

const BEFORE = 4
const AFTER = 2
const AGENTS = 8

/** A fresh database, and the capture stream in BEFORE shards under a key of its own. */
const stackOn = (redisUrl: Effect.Effect<string, never, Scope.Scope>, name: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const url = yield* redisUrl
    const prefix = yield* testKeyPrefix(name)
    return CaptureShards.redis.pipe(Layer.provideMerge(storeWithPoolLayer("postgres", {
      redisUrl: Option.some(Redacted.make(url)),
      streamKey: `${prefix}captures`,
      captureShards: BEFORE
    })))
  }))

const oneRedis = stackOn(Effect.succeed(TEST_REDIS_URL), "shards")
const cluster = stackOn(
  Effect.map(Effect.acquireRelease(Effect.promise(startRedisCluster), (cluster) => Effect.promise(cluster.stop)), (cluster) => cluster.urls[0]!),
  "shards-cluster"
)

/** The same stream seen with `count` shards (what a gateway started with LEDGER_CAPTURE_SHARDS=count publishes to). */
const shardsOf = (count: number) =>
  Effect.gen(function*() {
    const settings = yield* LedgerConfig
    // fresh: the stack's own (BEFORE shards) is memoised
    const built = yield* Layer.build(Layer.fresh(CaptureShards.redis).pipe(Layer.provide(LedgerConfig.layerFrom({ ...settings, captureShards: count }))))
    assert.strictEqual(Context.get(built, CaptureShards).streams.length, count)
    return Context.get(built, CaptureShards)
  })

/** Publishes each capture to its workspace's shard, one batch per shard. */
const publishByAgent = (shards: CaptureShards["Service"], payloads: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const byShard = new Map<number, Array<string>>()
    for (const payload of payloads) {
      const shard = shards.shardOf(JSON.parse(payload))
      byShard.set(shard, [...byShard.get(shard) ?? [], payload])
    }
    for (const [shard, batch] of byShard) yield* shards.streams[shard]!.publish(batch, batchIds()())
  })

const load = (workspaces: ReadonlyArray<CaptureIdentity>, from: number, count: number) =>
  Array.from({ length: count }, (_, i) => {
    const n = from + i
    const identity = workspaces[n % workspaces.length]!
    return captureJson(identity, { agent_id: `agent-${Math.floor(n / workspaces.length) % AGENTS}`, started_at: T0 + n * 20_000, variant: n })
  })

/** New workspaces (tenant ids are random) until each of `shards` shards has two of them. */
const workspacesOverShards = (shards: CaptureShards["Service"]) =>
  Effect.gen(function*() {
    const workspaces: Array<CaptureIdentity> = []
    const perShard = shards.streams.map(() => 0)
    while (perShard.some((count) => count < 2)) {
      const identity = yield* newWorkspace()
      perShard[shards.shardOf(identity)]!++
      workspaces.push(identity)
    }
    return workspaces
  })

const idsOf = (payloads: ReadonlyArray<string>) => payloads.map((payload) => JSON.parse(payload).ledger_id as string)

/** Captures delivered to a process's consumers and not yet acknowledged, over every shard (XPENDING per shard). */
const pendingWith = (pid: number) =>
  Effect.scoped(Effect.gen(function*() {
    const settings = yield* LedgerConfig
    const url = Redacted.value(Option.getOrThrow(settings.redisUrl))
    const onCluster = url !== TEST_REDIS_URL
    type Client = ReturnType<typeof createClient>
    const client = yield* Effect.acquireRelease(
      Effect.promise((): Promise<Client> =>
        onCluster ? createCluster({ rootNodes: [{ url }] }).connect() as unknown as Promise<Client> : createClient({ url }).connect() as Promise<Client>
      ),
      (client) => Effect.sync(() => client.destroy())
    )
    let pending = 0
    for (let shard = 0; shard < BEFORE; shard++) {
      const key = shardKey(settings.streamKey, shard)
      const summary = yield* Effect.promise(() =>
        client.xPending(onCluster ? clusterKey(key) : key, settings.streamGroup).catch(() => ({ consumers: [] }))
      )
      for (const consumer of summary.consumers ?? []) {
        if (consumer.name.includes(`-${pid}-`)) pending += Number(consumer.deliveriesCounter)
      }
    }
    return pending
  }))

const storedIds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return (yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions ORDER BY ledger_id`).map((row) => row.ledger_id)
})

/** The throughput records (`ledger status`) of one builder process, by its pid. */
const throughputRecords = (pid: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ consumer: string }>`SELECT DISTINCT consumer FROM pipeline_throughput WHERE consumer LIKE ${`%-${pid}-%`}`
    return rows.map((row) => row.consumer)
  })

const reshardedWhileKilled = (stack: typeof oneRedis, on: string) =>
  layer(stack, { timeout: 240_000, excludeTestServices: true })(`resharding ${BEFORE} → ${AFTER} with a builder killed mid-batch (${on})`, (it) => {
    it.effect("every capture becomes a decision exactly once; every shard drains; the record comes down", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const before = yield* CaptureShards
        const workspaces = yield* workspacesOverShards(before)
        assert.strictEqual(yield* before.register, BEFORE)
        // a backlog over four shards, every one of them holding some
        const backlog = load(workspaces, 0, 800)
        yield* publishByAgent(before, backlog)
        for (const stream of before.streams) assert.isAbove((yield* stream.stats).length, 0)
        // `ledger status` shows the backlog shard by shard
        const status = yield* runLedger(["status", "--json"], ledgerEnv(settings, { LEDGER_CAPTURE_SHARDS: String(BEFORE) }))
        assert.strictEqual(status.code, 0, status.stderr)
        const figures = (JSON.parse(status.stdout) as PipelineReport).stream!
        assert.deepStrictEqual(figures.shards!.map((shard) => shard.shard), [0, 1, 2, 3])
        assert.isTrue(figures.shards!.every((shard) => (shard.lag ?? 0) > 0))
        assert.strictEqual(figures.lag, backlog.length)

        // builders and the gateway now run with two shards
        const after = yield* shardsOf(AFTER)
        const env = ledgerEnv(settings, {
          LEDGER_CAPTURE_SHARDS: String(AFTER),
          LEDGER_RECLAIM_IDLE_MS: "1500",
          LEDGER_BUILDER_BATCH_SIZE: "40",
          LEDGER_LOG_LEVEL: "info"
        })
        const victim = yield* spawnBuilder(env)
        const survivor = yield* spawnBuilder(env)
        const live = load(workspaces, 800, 1_600)
        const publisher = yield* Effect.forkChild(Effect.gen(function*() {
          for (let i = 0; i < live.length; i += 60) {
            yield* publishByAgent(after, live.slice(i, i + 60))
            yield* Effect.sleep("25 millis")
          }
        }))

        yield* eventually("some decisions", Effect.map(decisionCount, (n) => n >= 300))
        yield* victim.killHolding(pendingWith(victim.pid))
        assert.isAbove(yield* pendingWith(victim.pid), 0, "the killed builder left captures pending")
        // the victim may have drained the retired shards and lowered the record already; a line it logged in the last
        // moments (logs are written in 25 ms batches) died with it
        const loweredBeforeKill = (yield* after.recorded) === AFTER

        yield* Fiber.join(publisher)
        const published = [...idsOf(backlog), ...idsOf(live)]
        yield* eventually("every capture built", Effect.map(decisionCount, (n) => n >= published.length), 120).pipe(
          Effect.tapDefect(() => Effect.sync(() => console.error(survivor.logs())))
        )
        for (let shard = 0; shard < BEFORE; shard++) {
          const stream = yield* before.stream(shard)
          yield* eventually(`shard ${shard} drained`, Effect.map(stream.stats, (stats) => stats.pending === 0 && stats.lag === 0), 30)
          assert.strictEqual((yield* stream.stats).dead_letters, 0)
        }
        assert.deepStrictEqual(yield* storedIds, [...published].sort())
        assert.deepStrictEqual(yield* recount, [])
        // each consumer loop counts its batches under a record of its own (shard and loop after the process's name), so
        // the transactions of a process's shards never wait on one another's throughput row
        const records = yield* throughputRecords(survivor.pid)
        assert.isAbove(new Set(records.map((record) => record.split("/")[1])).size, 1, records.join(", "))
        for (const record of records) assert.match(record, /^[\w.-]+\/\d+\.(\d+|reclaimer)$/)
        yield* eventually("the shard record lowered", Effect.map(after.recorded, (count) => count === AFTER), 30).pipe(
          Effect.tapDefect(() => Effect.sync(() => console.error(survivor.logs().split("\n").filter((l) => /shard/i.test(l)).join("\n"))))
        )
        // per-shard figures on /metrics (refreshed every few seconds), for the shards the record names
        const metrics = Effect.promise(() => fetch(`http://127.0.0.1:${survivor.port}/metrics`).then((response) => response.text()))
        yield* eventually("per-shard lag on /metrics", Effect.map(metrics, (text) => /^ledger_stream_shard_lag\{shard="1"\} 0$/m.test(text)), 30)
        assert.match(survivor.logs(), /reclaimed idle captures/)
        // the survivor lowered the record, and said so, if it was still up at the kill
        if (!loweredBeforeKill) assert.match(survivor.logs(), /capture stream shards beyond LEDGER_CAPTURE_SHARDS are drained/)
        assert.match(survivor.logs(), /builder shards changed/)
        assert.isFalse(survivor.exited())
      }), 200_000)
  })

layer(Health.layer.pipe(Layer.provideMerge(oneRedis)), { timeout: 60_000, excludeTestServices: true })("readiness over shards", (it) => {
  it.effect("a shard that does not answer makes the process unready, and is named (by ledger status too)", () =>
    Effect.gen(function*() {
      const settings = yield* LedgerConfig
      const health = yield* Health
      assert.deepStrictEqual(yield* health.readiness, { ready: true, database: "ok", stream: "ok" })
      // shard 2's key holding something that is not a stream: every command on it fails, as on a node that is down
      const client = yield* Effect.acquireRelease(
        Effect.promise(() => createClient({ url: TEST_REDIS_URL }).connect()),
        (client) => Effect.promise(() => client.quit())
      )
      const key = shardKey(settings.streamKey, 2)
      yield* Effect.promise(() => client.del(key).then(() => client.set(key, "not a stream")))
      assert.deepStrictEqual(yield* health.readiness, { ready: false, database: "ok", stream: "unavailable", unavailable_shards: [2] })
      // `ledger status` says which shard
      const status = yield* runLedger(["status", "--json"], ledgerEnv(settings, { LEDGER_CAPTURE_SHARDS: String(BEFORE) }))
      const problems = (JSON.parse(status.stdout) as PipelineReport).problems
      assert.isTrue(problems.some((problem) => problem.startsWith("stream: shard 2: ")), problems.join("\n"))
      yield* Effect.promise(() => client.del(key))
      assert.deepStrictEqual(yield* health.readiness, { ready: true, database: "ok", stream: "ok" })
    }))
})

describe("capture stream shards", () => {
  reshardedWhileKilled(oneRedis, "one Redis")
  reshardedWhileKilled(cluster, "a three-node Redis Cluster")
})
