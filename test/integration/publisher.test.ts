/**
 * The capture publisher (docs/ARCHITECTURE.md, "The promises") against the in-process stream behind a switch that
 * makes it fail, stall, or lose the reply of a publish it applied: batches in order; spill to the spool while the
 * stream is down and replay in order, exactly once, when it returns — also when a publish or a replay landed but its
 * reply was lost, and across a restart; a full queue spills instead of dropping; shutdown drains or spools, and the
 * next start replays what was spooled. (The same against real Redis cut by a TCP proxy:
 * test/e2e/gateway-fault.test.ts.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import { PrometheusMetrics } from "effect/observability"
import { CaptureShards, shardIndex } from "../../src/capture/CaptureShards.ts"
import { CapturePublisher } from "../../src/capture/CapturePublisher.ts"
import { CaptureStream, StreamUnavailable } from "../../src/capture/CaptureStream.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import { readSpoolStats, shardSpoolDir } from "../../src/capture/Spool.ts"
import { LedgerConfig, type LedgerSettings } from "../../src/config/LedgerConfig.ts"
import { tcpProxy, testKeyPrefix } from "../support/redis.ts"
import { testSettings } from "../support/settings.ts"
import { tempDir } from "../support/stack.ts"

/** What the test does to the stream: refuse publishes, hold them until released, or apply them and fail. */
interface StreamSwitch {
  down: boolean
  stall: Deferred.Deferred<void> | null
  /** how many of the next publishes are applied and then fail, as if the reply was lost */
  loseReplies: number
  publishes: number
}

const switchedStream = (sw: StreamSwitch) =>
  Layer.effect(
    CaptureStream,
    Effect.gen(function*() {
      const inner = yield* CaptureStream
      return CaptureStream.of({
        ...inner,
        publish: (payloads, batch) =>
          Effect.suspend(() => {
            sw.publishes++
            if (sw.down) return Effect.fail(new StreamUnavailable({ message: "stream switched off by the test" }))
            const stall = sw.stall
            const publish = stall === null ? inner.publish(payloads, batch) : Effect.andThen(Deferred.await(stall), inner.publish(payloads, batch))
            if (sw.loseReplies === 0) return publish
            sw.loseReplies--
            return Effect.andThen(publish, Effect.fail(new StreamUnavailable({ message: "reply lost (test)" })))
          })
      })
    })
  ).pipe(Layer.provide(MemoryCaptureStream.layer))

/** every capture of these tests is one agent's (one shard) */
const AGENT = { tenant_id: "t", workspace_id: "w", agent_id: "a" }
const payload = (n: number) => JSON.stringify({ n })
const numbers = (payloads: ReadonlyArray<string>) => payloads.map((p) => JSON.parse(p).n as number)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Everything in the stream, read once through the group. */
const readAll = Effect.gen(function*() {
  const stream = yield* CaptureStream
  return (yield* stream.read("test", { count: 100_000, blockMs: 0 })).map((entry) => entry.payload)
})

/** The stream and config outlive the publishers built on them. */
const streamContext = (sw: StreamSwitch, settings: LedgerSettings) =>
  Layer.build(switchedStream(sw).pipe(Layer.provideMerge(LedgerConfig.layerFrom(settings))))

const withPublisher = <A, E, R>(
  context: Context.Context<CaptureStream | LedgerConfig>,
  use: (publisher: CapturePublisher["Service"]) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(Effect.gen(function*() {
    const built = yield* Layer.build(CapturePublisher.layer.pipe(Layer.provide(CaptureShards.single), Layer.provide(Layer.succeedContext(context))))
    return yield* use(Context.get(built, CapturePublisher))
  }))

const metricValue = (name: string) =>
  Effect.map(PrometheusMetrics.format(), (text) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0))

const waitFor = (condition: () => Effect.Effect<boolean>, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!(yield* condition())) {
      if (Date.now() > deadline) return yield* Effect.die(new Error("condition not met in time"))
      yield* Effect.sleep(10)
    }
  })

describe("CapturePublisher", () => {
  it.live("publishes in batches, in the order offered", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: false, stall: null, loseReplies: 0, publishes: 0 }
      const context = yield* streamContext(sw, testSettings({ dataDir: yield* tempDir, captureBatchSize: 64 }))
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          for (const n of range(1, 1_000)) publisher.offer(payload(n), AGENT)
          yield* publisher.settled
        }))
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 1_000))
      assert.isBelow(sw.publishes, 200, "batched, not one publish per capture")
    }))

  it.live("while the stream is down captures are spooled; after it returns they are published in order, once", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: true, stall: null, loseReplies: 0, publishes: 0 }
      const dataDir = yield* tempDir
      const context = yield* streamContext(sw, testSettings({ dataDir, captureBatchSize: 16 }))
      const failuresBefore = yield* metricValue("ledger_capture_publish_failures_total")
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          for (const n of range(1, 50)) publisher.offer(payload(n), AGENT)
          yield* waitFor(() => Effect.map(publisher.stats, (stats) => stats.spool.entries === 50 && stats.queued === 0))
          assert.isAbove(yield* metricValue("ledger_capture_publish_failures_total"), failuresBefore)
          assert.strictEqual(yield* metricValue("ledger_capture_spool_entries"), 50)
          assert.isAbove(yield* metricValue("ledger_capture_spool_bytes"), 0)
          // still down: later captures queue up behind the spooled ones
          for (const n of range(51, 80)) publisher.offer(payload(n), AGENT)
          yield* Effect.sleep(300)
          sw.down = false
          for (const n of range(81, 100)) publisher.offer(payload(n), AGENT)
          yield* publisher.settled
          assert.deepStrictEqual((yield* publisher.stats).spool, { entries: 0, bytes: 0 })
        }))
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 100))
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
    }))

  it.live("a publish that landed but whose reply was lost is replayed under its id: each capture once, in order", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: false, stall: null, loseReplies: 1, publishes: 0 }
      const context = yield* streamContext(sw, testSettings({ dataDir: yield* tempDir, captureBatchSize: 16 }))
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          for (const n of range(1, 60)) publisher.offer(payload(n), AGENT)
          yield* publisher.settled
        }))
      assert.strictEqual(sw.loseReplies, 0, "a reply was lost")
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 60))
    }))

  it.live("replays that landed but whose replies were lost are not appended twice", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: true, stall: null, loseReplies: 0, publishes: 0 }
      const context = yield* streamContext(sw, testSettings({ dataDir: yield* tempDir, captureBatchSize: 4 }))
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          for (const n of range(1, 40)) publisher.offer(payload(n), AGENT)
          yield* waitFor(() => Effect.map(publisher.stats, (stats) => stats.spool.entries === 40))
          sw.loseReplies = 3
          sw.down = false
          for (const n of range(41, 50)) publisher.offer(payload(n), AGENT)
          yield* publisher.settled
        }))
      assert.strictEqual(sw.loseReplies, 0, "replies were lost")
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 50))
    }))

  it.live("a batch in doubt at shutdown keeps its id in the spool: the next start appends it once", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: false, stall: null, loseReplies: 1, publishes: 0 }
      const dataDir = yield* tempDir
      const context = yield* streamContext(sw, testSettings({ dataDir, captureBatchSize: 8 }))
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          for (const n of range(1, 8)) publisher.offer(payload(n), AGENT)
          // the first batch lands, its reply is lost: spooled; the stream then goes away
          yield* waitFor(() => Effect.map(publisher.stats, (stats) => stats.spool.entries === 8))
          sw.down = true
          for (const n of range(9, 20)) publisher.offer(payload(n), AGENT)
        }))
      assert.strictEqual(readSpoolStats(dataDir).entries, 20, "spooled on shutdown")
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 8), "the batch in doubt had landed")

      sw.down = false
      yield* withPublisher(context, (publisher) => publisher.settled)
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(9, 20), "the rest, and nothing twice")
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
    }))

  it.live("a full queue spills to the spool instead of dropping, and nothing is lost", () =>
    Effect.gen(function*() {
      const stall = yield* Deferred.make<void>()
      const sw: StreamSwitch = { down: false, stall, loseReplies: 0, publishes: 0 }
      const context = yield* streamContext(sw, testSettings({ dataDir: yield* tempDir, captureQueueCapacity: 4, captureBatchSize: 2 }))
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          // the first batch is taken and stalls in publish; the queue fills; the rest spills
          for (const n of range(1, 100)) publisher.offer(payload(n), AGENT)
          const stats = yield* publisher.stats
          assert.isAtMost(stats.queued, 4)
          assert.isAtLeast(stats.spool.entries, 100 - 4 - 2)
          sw.stall = null
          yield* Deferred.succeed(stall, undefined)
          yield* publisher.settled
        }))
      const published = numbers(yield* Effect.provide(readAll, context))
      assert.deepStrictEqual([...published].sort((a, b) => a - b), range(1, 100), "every capture exactly once")
    }))

  it.live("shutdown drains the queue into the stream", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: false, stall: null, loseReplies: 0, publishes: 0 }
      const dataDir = yield* tempDir
      const context = yield* streamContext(sw, testSettings({ dataDir }))
      yield* withPublisher(context, (publisher) => Effect.sync(() => range(1, 500).forEach((n) => publisher.offer(payload(n), AGENT))))
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 500))
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
    }))

  it.live("shutdown with the stream down spools the queue; the next start replays it in order", () =>
    Effect.gen(function*() {
      const sw: StreamSwitch = { down: true, stall: null, loseReplies: 0, publishes: 0 }
      const dataDir = yield* tempDir
      const context = yield* streamContext(sw, testSettings({ dataDir }))
      yield* withPublisher(context, (publisher) => Effect.sync(() => range(1, 40).forEach((n) => publisher.offer(payload(n), AGENT))))
      assert.strictEqual(readSpoolStats(dataDir).entries, 40, "spooled on shutdown")
      assert.deepStrictEqual(yield* Effect.provide(readAll, context), [])

      sw.down = false
      yield* withPublisher(context, (publisher) =>
        Effect.gen(function*() {
          publisher.offer(payload(41), AGENT)
          yield* publisher.settled
        }))
      assert.deepStrictEqual(numbers(yield* Effect.provide(readAll, context)), range(1, 41))
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
    }))

  it.live("several shards on Redis: each workspace's captures go to its shard in order; Redis away, each shard spools its own; a start with fewer shards replays them all", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const prefix = yield* testKeyPrefix("publisher-shards")
      const proxy = yield* tcpProxy
      const settings = (shards: number) =>
        testSettings({ dataDir, redisUrl: Option.some(Redacted.make(proxy.url)), streamKey: `${prefix}captures`, captureShards: shards })
      // four workspaces of each of the three shards
      const scopes = Array.from({ length: 100 }, (_, i) => ({ tenant_id: "t", workspace_id: `w-${i}`, agent_id: "a" }))
        .filter((scope, _, all) => all.filter((other) => shardIndex(other, 3) === shardIndex(scope, 3)).indexOf(scope) < 4)
      const offered = (from: number, to: number) => range(from, to).map((n) => ({ agent: scopes[n % scopes.length]!, payload: payload(n) }))
      const withShards = <A, E>(shards: number, use: (publisher: CapturePublisher["Service"], streams: CaptureShards["Service"]) => Effect.Effect<A, E>) =>
        Effect.scoped(Effect.gen(function*() {
          const built = yield* Layer.build(
            CapturePublisher.layer.pipe(Layer.provideMerge(Layer.fresh(CaptureShards.redis)), Layer.provideMerge(LedgerConfig.layerFrom(settings(shards))))
          )
          return yield* use(Context.get(built, CapturePublisher), Context.get(built, CaptureShards))
        }))
      const readShard = (stream: CaptureStream["Service"]) =>
        Effect.map(stream.read("test", { count: 100_000, blockMs: 0 }), (entries) => numbers(entries.map((entry) => entry.payload)))

      yield* withShards(3, (publisher, shards) =>
        Effect.gen(function*() {
          for (const { agent, payload } of offered(1, 300)) publisher.offer(payload, agent)
          yield* publisher.settled
          for (const [shard, stream] of shards.streams.entries()) {
            const expected = range(1, 300).filter((n) => shardIndex(scopes[n % scopes.length]!, 3) === shard)
            assert.isNotEmpty(expected)
            assert.deepStrictEqual(yield* readShard(stream), expected, `shard ${shard}: its workspaces' captures, in order`)
          }
          // Redis away: what is offered now waits in each shard's own spool
          yield* proxy.stop
          for (const { agent, payload } of offered(301, 400)) publisher.offer(payload, agent)
          yield* Effect.sleep("500 millis")
        }))
      assert.strictEqual(readSpoolStats(dataDir).entries, 100, "spooled on shutdown, shard by shard")
      assert.isTrue(Fs.existsSync(shardSpoolDir(dataDir, 0, 2)))

      // back with two shards: shard 2's spool is replayed into shard 0, and so is what shard 2 published and the
      // builders never committed (its retention: nobody acknowledged it here), which they would drop as built already
      yield* proxy.start
      yield* withShards(2, (publisher, shards) =>
        Effect.gen(function*() {
          yield* publisher.settled
          const got: Array<number> = []
          for (const stream of shards.streams) got.push(...yield* readShard(stream))
          const retainedOfShard2 = range(1, 300).filter((n) => shardIndex(scopes[n % scopes.length]!, 3) === 2)
          assert.deepStrictEqual(got.sort((a, b) => a - b), [...retainedOfShard2, ...range(301, 400)])
        }))
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
      assert.isFalse(Fs.existsSync(shardSpoolDir(dataDir, 0, 2)), "the retired shard's directory is gone")
    }))
})
