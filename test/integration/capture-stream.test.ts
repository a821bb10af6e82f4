/**
 * One contract for both capture streams (docs/ARCHITECTURE.md, "One call", step 3): the Redis one against the local
 * Redis and the in-process one run the same tests, each on a fresh stream. Redis-only: behaviour when Redis is
 * unreachable, and a publish whose reply is lost after Redis applied it.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Redacted, Schedule, type Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import { batchIds, CaptureStream, type Published, type StreamEntry, type StreamUnavailable, TRIM_INTERVAL } from "../../src/capture/CaptureStream.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import * as RedisCaptureStream from "../../src/capture/RedisCaptureStream.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { redisAdmin, TEST_REDIS_URL, tcpProxy, testKeyPrefix } from "../support/redis.ts"
import { type RedisCluster, startRedisCluster } from "../support/redis-cluster.ts"
import { privateRedis } from "../support/redis-server.ts"
import { testSettings } from "../support/settings.ts"

/** Builds the layer of a fresh, empty stream; whatever it leaves behind is removed when the scope closes. */
type FreshStream = (name: string) => Effect.Effect<Layer.Layer<CaptureStream, StreamUnavailable>, never, Scope.Scope>

const redisLayer = (redisUrl: string, streamKey: string) =>
  RedisCaptureStream.layer.pipe(
    Layer.provide(LedgerConfig.layerFrom(testSettings({
      redisUrl: Option.some(Redacted.make(redisUrl)),
      streamKey,
      streamGroup: "builders"
    })))
  )

const freshRedis: FreshStream = (name) =>
  Effect.map(testKeyPrefix(`capture-${name}`), (prefix) => redisLayer(TEST_REDIS_URL, `${prefix}captures`))

const freshMemory: FreshStream = () =>
  Effect.succeed(MemoryCaptureStream.layer.pipe(Layer.provide(LedgerConfig.layerFrom(testSettings()))))

const idOrder = (id: string) => id.split("-").map(BigInt) as [bigint, bigint]
const isAfter = (a: string, b: string) => {
  const [aMs, aSeq] = idOrder(a)
  const [bMs, bSeq] = idOrder(b)
  return aMs > bMs || (aMs === bMs && aSeq > bSeq)
}

/** Runs `effect` and returns its result with the wall-clock milliseconds it took. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = Date.now()
    const result = yield* effect
    return { result, ms: Date.now() - started }
  })

/** The ids a publish appended. */
const appended = <E, R>(publish: Effect.Effect<Published, E, R>) => Effect.map(publish, (published) => published.ids)

const payloadsOf = (entries: ReadonlyArray<StreamEntry>) => entries.map((entry) => entry.payload)

/** ids for the publishes below that are not about idempotency */
const nextBatch = batchIds()

const contract = (name: string, fresh: FreshStream) => {
  const backend = name === "memory" ? "memory" : "redis"
  return describe(`CaptureStream contract (${name})`, () => {
    const test = (name: string, body: Effect.Effect<void, StreamUnavailable, CaptureStream | Scope.Scope>) =>
      it.live(name, () => Effect.flatMap(fresh(name), (layer) => Effect.provide(body, layer, { local: true })))

    test("publish → read → ack keeps order and ids", Effect.gen(function*() {
      const stream = yield* CaptureStream
      assert.strictEqual(stream.backend, backend)
      assert.deepStrictEqual(yield* appended(stream.publish([], nextBatch())), [])
      const ids = yield* appended(stream.publish(["a", "b", "c"], nextBatch()))
      assert.strictEqual(ids.length, 3)
      for (const id of ids) assert.match(id, /^\d+-\d+$/)
      assert.isTrue(isAfter(ids[1], ids[0]) && isAfter(ids[2], ids[1]))

      const first = yield* stream.read("c1", { count: 2, blockMs: 0 })
      assert.deepStrictEqual(first, [{ id: ids[0], payload: "a", deliveries: 1 }, { id: ids[1], payload: "b", deliveries: 1 }])
      const rest = yield* stream.read("c1", { count: 10, blockMs: 0 })
      assert.deepStrictEqual(rest, [{ id: ids[2], payload: "c", deliveries: 1 }])
      assert.deepStrictEqual(yield* stream.read("c1", { count: 10, blockMs: 0 }), [])

      assert.strictEqual((yield* stream.stats).pending, 3)
      yield* stream.ack(ids)
      yield* stream.ack([])
      const stats = yield* stream.stats
      assert.strictEqual(stats.pending, 0)
      assert.strictEqual(stats.oldest_pending_ms, null)
      // acknowledged entries are not delivered again
      assert.deepStrictEqual(yield* stream.reclaim("c2", { minIdleMs: 0, count: 10 }), [])
    }))

    test("a capture published as its UTF-8 bytes is read as its text", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const texts = ["{\"out\":\" ❯ 2 failed → fix\"}", "{\"ok\":\"✅\"}"]
      const ids = yield* appended(stream.publish([Buffer.from(texts[0]!), texts[1]!], nextBatch()))
      const read = yield* stream.read("c1", { count: 10, blockMs: 0 })
      assert.deepStrictEqual(read.map((entry) => entry.payload), texts)
      yield* stream.ack(ids)
    }))

    test("a batch is appended once: publishing its id again appends nothing", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const producer = batchIds()
      const first = producer()
      assert.strictEqual((yield* appended(stream.publish(["a", "b"], first))).length, 2)
      assert.deepStrictEqual(yield* appended(stream.publish(["a", "b"], first)), [], "the same batch again")
      const second = producer()
      assert.strictEqual((yield* appended(stream.publish(["c"], second))).length, 1)
      assert.deepStrictEqual(yield* appended(stream.publish(["a", "b"], first)), [], "an older batch of the producer")
      assert.deepStrictEqual(yield* appended(stream.publish(["c"], second)), [])
      // another producer numbers its batches on its own
      assert.strictEqual((yield* appended(stream.publish(["d"], batchIds()()))).length, 1)
      assert.deepStrictEqual(payloadsOf(yield* stream.read("c1", { count: 10, blockMs: 0 })), ["a", "b", "c", "d"])
    }))

    test("a publish says what the stream held of its producer; progress gives the committed frontier and the records", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const producer = batchIds()
      const [one, , three] = [producer(), producer(), producer()]
      const first = yield* stream.publish(["a", "b"], one)
      assert.deepStrictEqual([first.previous, first.head], [0, first.ids[1]])
      const again = yield* stream.publish(["a", "b"], one)
      assert.deepStrictEqual([again.ids, again.previous, again.head], [[], 1, first.ids[1]], "a duplicate: the newest entry bounds it")
      // batch 2 never arrives (say, lost): batch 3 finds the record at 1
      const third = yield* stream.publish(["c"], three)
      assert.strictEqual(third.previous, 1)
      assert.isTrue(isAfter(third.head!, first.head!))

      const before = yield* stream.progress([one.producer, "unknown-producer"])
      assert.deepStrictEqual(before.producers, { [one.producer]: 3, "unknown-producer": 0 })
      assert.isTrue(before.committedBefore === null || !isAfter(before.committedBefore, first.ids[0]!), "nothing read: nothing committed")
      const entries = yield* stream.read("c1", { count: 2, blockMs: 0 })
      yield* stream.ack([entries[0]!.id])
      const after = yield* stream.progress([])
      assert.strictEqual(after.committedBefore, entries[1]!.id, "the oldest entry still pending")
      yield* stream.ack([entries[1]!.id])
      const read = yield* stream.read("c1", { count: 10, blockMs: 0 })
      yield* stream.ack(read.map((entry) => entry.id))
      const all = yield* stream.progress([])
      assert.isTrue(isAfter(all.committedBefore!, third.head!), "everything acknowledged: the frontier is past the newest entry")
    }))

    test("a read waits for entries and wakes on publish", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const empty = yield* timed(stream.read("c1", { count: 10, blockMs: 300 }))
      assert.deepStrictEqual(empty.result, [])
      assert.isAtLeast(empty.ms, 250)

      const waiting = yield* Effect.forkChild(timed(stream.read("c1", { count: 10, blockMs: 10_000 })))
      yield* Effect.sleep(200)
      yield* appended(stream.publish(["late"], nextBatch()))
      const woken = yield* Fiber.join(waiting)
      assert.deepStrictEqual(payloadsOf(woken.result), ["late"])
      assert.isAtLeast(woken.ms, 150)
      assert.isBelow(woken.ms, 3_000)
    }))

    test("entries left pending are reclaimed after minIdle with deliveries counted", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const ids = yield* appended(stream.publish(["x", "y"], nextBatch()))
      yield* stream.read("dead-consumer", { count: 10, blockMs: 0 })

      assert.deepStrictEqual(yield* stream.reclaim("c2", { minIdleMs: 300, count: 10 }), [], "not idle long enough")
      yield* Effect.sleep(400)
      const reclaimed = yield* stream.reclaim("c2", { minIdleMs: 300, count: 10 })
      assert.deepStrictEqual(reclaimed, [
        { id: ids[0], payload: "x", deliveries: 2 },
        { id: ids[1], payload: "y", deliveries: 2 }
      ])
      // a claim resets the idle time: nobody else takes them right away
      assert.deepStrictEqual(yield* stream.reclaim("c3", { minIdleMs: 300, count: 10 }), [])

      yield* Effect.sleep(400)
      const one = yield* stream.reclaim("c3", { minIdleMs: 300, count: 1 })
      assert.deepStrictEqual(one, [{ id: ids[0], payload: "x", deliveries: 3 }])

      yield* stream.ack(ids)
      assert.strictEqual((yield* stream.stats).pending, 0)
    }))

    test("deadLetter moves the entry, acknowledges it and shows in stats and list", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const before = Date.now()
      const [id] = yield* appended(stream.publish(["poison"], nextBatch()))
      const [entry] = yield* stream.read("c1", { count: 1, blockMs: 0 })
      yield* stream.deadLetter(entry, "invalid capture: missing ledger_id")

      const stats = yield* stream.stats
      assert.strictEqual(stats.pending, 0)
      assert.strictEqual(stats.dead_letters, 1)
      const letters = yield* stream.listDeadLetters({ count: 10 })
      assert.strictEqual(letters.length, 1)
      const [letter] = letters
      assert.match(letter.id, /^\d+-\d+$/)
      assert.strictEqual(letter.original_id, id)
      assert.strictEqual(letter.payload, "poison")
      assert.strictEqual(letter.reason, "invalid capture: missing ledger_id")
      assert.strictEqual(letter.deliveries, 1)
      assert.isAtLeast(letter.failed_at, before - 1_000)
      assert.isAtMost(letter.failed_at, Date.now() + 1_000)
      assert.deepStrictEqual(yield* stream.reclaim("c2", { minIdleMs: 0, count: 10 }), [])
    }))

    test("replay re-publishes dead letters, all or by id", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const ids = yield* appended(stream.publish(["p1", "p2", "p3"], nextBatch()))
      for (const entry of yield* stream.read("c1", { count: 3, blockMs: 0 })) {
        yield* stream.deadLetter(entry, "boom")
      }
      const letters = yield* stream.listDeadLetters({ count: 10 })
      assert.deepStrictEqual(letters.map((letter) => letter.payload), ["p1", "p2", "p3"])
      assert.deepStrictEqual((yield* stream.listDeadLetters({ count: 2 })).length, 2)

      assert.strictEqual(yield* stream.replayDeadLetters([letters[1].id, "0-1"]), 1)
      assert.deepStrictEqual((yield* stream.listDeadLetters({ count: 10 })).map((letter) => letter.payload), ["p1", "p3"])
      const replayedOne = yield* stream.read("c1", { count: 10, blockMs: 0 })
      assert.deepStrictEqual(payloadsOf(replayedOne), ["p2"])
      assert.isTrue(isAfter(replayedOne[0].id, ids[2]), "a replayed entry gets a new id")
      assert.strictEqual(replayedOne[0].deliveries, 1)

      assert.strictEqual(yield* stream.replayDeadLetters(), 2)
      assert.strictEqual(yield* stream.replayDeadLetters(), 0)
      assert.strictEqual((yield* stream.stats).dead_letters, 0)
      assert.deepStrictEqual(payloadsOf(yield* stream.read("c1", { count: 10, blockMs: 0 })), ["p1", "p3"])
    }))

    test("pruning removes consumers idle with nothing pending, never one holding entries", Effect.gen(function*() {
      const stream = yield* CaptureStream
      assert.deepStrictEqual(yield* stream.pruneConsumers({ minIdleMs: 0 }), [], "a group without consumers")
      const ids = yield* appended(stream.publish(["1", "2", "3"], nextBatch()))
      yield* stream.read("gone-done", { count: 1, blockMs: 0 })
      yield* stream.ack([ids[0]])
      yield* stream.read("gone-holding", { count: 1, blockMs: 0 })
      yield* Effect.sleep(150)
      const fresh = yield* stream.read("alive", { count: 1, blockMs: 0 })
      assert.strictEqual((yield* stream.stats).consumers, 3)

      // idle past the threshold and nothing pending: removed; holding an entry or recently active: kept
      assert.deepStrictEqual(yield* stream.pruneConsumers({ minIdleMs: 100 }), ["gone-done"])
      assert.strictEqual((yield* stream.stats).consumers, 2)
      assert.strictEqual((yield* stream.stats).pending, 2)

      // the entry of the consumer that is gone is still there to reclaim
      const reclaimed = yield* stream.reclaim("reclaimer", { minIdleMs: 100, count: 10 })
      assert.deepStrictEqual(payloadsOf(reclaimed), ["2"])
      yield* stream.ack([reclaimed[0].id, fresh[0].id])
      yield* Effect.sleep(150)
      assert.deepStrictEqual([...(yield* stream.pruneConsumers({ minIdleMs: 100 }))].sort(), ["alive", "gone-holding", "reclaimer"])
      assert.strictEqual((yield* stream.stats).consumers, 0)
      // a pruned name that reads again is simply a consumer again
      yield* appended(stream.publish(["4"], nextBatch()))
      assert.deepStrictEqual(payloadsOf(yield* stream.read("alive", { count: 10, blockMs: 0 })), ["4"])
      assert.strictEqual((yield* stream.stats).consumers, 1)
    }))

    test("stats report length, lag, pending, oldest pending age, how far behind, dead letters and consumers", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const empty = yield* stream.stats
      assert.deepStrictEqual(empty, {
        backend,
        length: 0,
        lag: 0,
        pending: 0,
        oldest_pending_ms: null,
        oldest_waiting_ms: null,
        dead_letters: 0,
        consumers: 0
      })

      const ids = yield* appended(stream.publish(["1", "2", "3", "4", "5"], nextBatch()))
      const read = yield* stream.read("c1", { count: 3, blockMs: 0 })
      yield* stream.ack([ids[1]])
      yield* stream.deadLetter(read[2], "bad")
      yield* Effect.sleep(150)
      const stats = yield* stream.stats
      assert.strictEqual(stats.backend, backend)
      assert.strictEqual(stats.length, 5)
      assert.strictEqual(stats.lag, 2)
      assert.strictEqual(stats.pending, 1)
      assert.isNotNull(stats.oldest_pending_ms)
      assert.isAtLeast(stats.oldest_pending_ms!, 100)
      assert.isBelow(stats.oldest_pending_ms!, 10_000)
      assert.strictEqual(stats.dead_letters, 1)
      assert.strictEqual(stats.consumers, 1)
      // behind: since the pending entry was appended, then since the first never delivered was
      assert.isAtLeast(stats.oldest_waiting_ms!, 150)
      assert.isBelow(stats.oldest_waiting_ms!, 10_000)
      yield* stream.ack([ids[0]])
      const unread = yield* stream.stats
      assert.strictEqual(unread.pending, 0)
      assert.isNull(unread.oldest_pending_ms)
      assert.isAtLeast(unread.oldest_waiting_ms!, 150)
      const rest = yield* stream.read("c1", { count: 10, blockMs: 0 })
      yield* stream.ack(rest.map((entry) => entry.id))
      assert.isNull((yield* stream.stats).oldest_waiting_ms, "every capture committed: nothing waits")
    }))

    test("two consumers of the group share the entries without duplicates", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const ids = yield* appended(stream.publish(Array.from({ length: 40 }, (_, i) => `m${i}`), nextBatch()))
      const consume = (consumer: string) =>
        Effect.gen(function*() {
          const got: Array<StreamEntry> = []
          while (true) {
            const batch = yield* stream.read(consumer, { count: 3, blockMs: 0 })
            if (batch.length === 0) return got
            got.push(...batch)
            yield* stream.ack(batch.map((entry) => entry.id))
            yield* Effect.yieldNow
          }
        })
      const [a, b] = yield* Effect.all([consume("a"), consume("b")], { concurrency: 2 })
      assert.isAbove(a.length, 0)
      assert.isAbove(b.length, 0)
      const seen = [...a, ...b].map((entry) => entry.id)
      assert.strictEqual(new Set(seen).size, seen.length, "no entry delivered twice")
      assert.deepStrictEqual([...seen].sort(), [...ids].sort())
      const stats = yield* stream.stats
      assert.strictEqual(stats.consumers, 2)
      assert.strictEqual(stats.pending, 0)
      assert.strictEqual(stats.lag, 0)
    }))

    test("trim removes acknowledged entries only, never pending or undelivered ones", Effect.gen(function*() {
      const stream = yield* CaptureStream
      const ids = yield* appended(stream.publish(["t0", "t1", "t2", "t3", "t4", "t5"], nextBatch()))
      assert.strictEqual(yield* stream.trim, 0, "nothing delivered yet")
      yield* stream.read("c1", { count: 4, blockMs: 0 })
      yield* stream.ack([ids[0], ids[2]])

      assert.strictEqual(yield* stream.trim, 1, "only t0: t1 is still pending")
      assert.strictEqual((yield* stream.stats).length, 5)
      yield* Effect.sleep(50)
      const reclaimed = yield* stream.reclaim("c2", { minIdleMs: 0, count: 10 })
      assert.deepStrictEqual(payloadsOf(reclaimed), ["t1", "t3"], "pending entries survive a trim")

      yield* stream.ack([ids[1], ids[3]])
      assert.strictEqual(yield* stream.trim, 3)
      const stats = yield* stream.stats
      assert.strictEqual(stats.length, 2)
      assert.strictEqual(stats.lag, 2)
      const undelivered = yield* stream.read("c1", { count: 10, blockMs: 0 })
      assert.deepStrictEqual(payloadsOf(undelivered), ["t4", "t5"], "undelivered entries survive a trim")

      yield* stream.ack(undelivered.map((entry) => entry.id))
      assert.strictEqual(yield* stream.trim, 2)
      assert.strictEqual((yield* stream.stats).length, 0)
      const [next] = yield* appended(stream.publish(["t6"], nextBatch()))
      assert.isTrue(isAfter(next, ids[5]), "ids keep increasing after the stream was emptied")
    }))

    it.effect("the layer trims acknowledged entries every TRIM_INTERVAL", () =>
      Effect.flatMap(fresh("periodic trim"), (layer) =>
        Effect.gen(function*() {
          const stream = yield* CaptureStream
          const ids = yield* appended(stream.publish(["p0", "p1"], nextBatch()))
          yield* stream.read("c1", { count: 1, blockMs: 0 })
          yield* stream.ack([ids[0]])
          yield* TestClock.adjust(TRIM_INTERVAL)
          // The round runs in the layer's fiber (against Redis, real I/O): poll on real time, not the test clock.
          const realPause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
          const length = yield* stream.stats.pipe(
            Effect.map((stats) => stats.length),
            Effect.tap((length) => length === 2 ? realPause : Effect.void),
            Effect.repeat({ while: (length) => length === 2, times: 100 })
          )
          assert.strictEqual(length, 1, "p0 trimmed, p1 undelivered and kept")
        }).pipe(Effect.provide(layer, { local: true }))))
  })
}

contract("memory", freshMemory)
contract("redis", freshRedis)

// A three-node Redis Cluster of this file's own, started on first use: the stream's keys share one slot (a hash tag),
// on whichever node owns it.
let cluster: Promise<RedisCluster> | undefined
afterAll(async () => {
  await (await cluster)?.stop()
})
/** A stream on the cluster, named by LEDGER_REDIS_CLUSTER (its nodes) or by a REDIS_URL that is one of its nodes. */
const freshCluster = (naming: "nodes" | "one node"): FreshStream => (name) =>
  Effect.gen(function*() {
    const { urls } = yield* Effect.promise(() => (cluster ??= startRedisCluster()))
    return RedisCaptureStream.layer.pipe(
      Layer.provide(LedgerConfig.layerFrom(testSettings({
        ...(naming === "nodes" ? { redisCluster: urls.map((url) => Redacted.make(url)) } : { redisUrl: Option.some(Redacted.make(urls[1]!)) }),
        streamKey: `capture-${name.replace(/[^a-z0-9]+/gi, "-")}-${Crypto.randomBytes(4).toString("hex")}`,
        streamGroup: "builders"
      })))
    )
  })
contract("redis cluster, LEDGER_REDIS_CLUSTER", freshCluster("nodes"))
contract("redis cluster, REDIS_URL", freshCluster("one node"))

describe("RedisCaptureStream when Redis changes behind its back", () => {
  const redisStream = (name: string) =>
    Effect.gen(function*() {
      const key = `${yield* testKeyPrefix(name)}captures`
      const stream = Context.get(yield* Layer.build(redisLayer(TEST_REDIS_URL, key)), CaptureStream)
      return { key, stream, admin: yield* redisAdmin }
    })

  it.live("reclaim drops pending entries deleted from the stream and keeps the others", () =>
    Effect.gen(function*() {
      const { admin, key, stream } = yield* redisStream("capture-deleted")
      const ids = yield* appended(stream.publish(["kept", "deleted"], nextBatch()))
      yield* stream.read("dead-consumer", { count: 10, blockMs: 0 })
      yield* Effect.promise(() => admin.xDel(key, ids[1]))
      const reclaimed = yield* stream.reclaim("c2", { minIdleMs: 0, count: 10 })
      assert.deepStrictEqual(reclaimed, [{ id: ids[0], payload: "kept", deliveries: 2 }])
      assert.strictEqual((yield* stream.stats).pending, 1)
    }))

  it.live("recreates the group when the stream was lost (Redis restarted without persistence)", () =>
    Effect.gen(function*() {
      const { admin, key, stream } = yield* redisStream("capture-lost")
      yield* appended(stream.publish(["gone"], nextBatch()))
      yield* stream.read("c1", { count: 10, blockMs: 0 })
      yield* Effect.promise(() => admin.del(key))
      yield* appended(stream.publish(["fresh"], nextBatch()))
      assert.deepStrictEqual(payloadsOf(yield* stream.read("c1", { count: 10, blockMs: 0 })), ["fresh"])
      assert.strictEqual((yield* stream.stats).pending, 1)
    }))
})

describe("RedisCaptureStream persistence", () => {
  for (const appendonly of [false, true]) {
    it.live(`says whether Redis keeps the stream across a restart (appendonly ${appendonly ? "yes" : "no"}, no snapshots)`, () =>
      Effect.gen(function*() {
        const redis = yield* privateRedis({ appendonly })
        const stream = Context.get(yield* Layer.build(redisLayer(redis.url, "persistence:captures")), CaptureStream)
        const persistence = yield* stream.persistence
        assert.deepStrictEqual(persistence, { durable: appendonly, detail: `appendonly=${appendonly ? "yes" : "no"} save=""` })
      }))
  }
})

describe("RedisCaptureStream when Redis is unreachable", () => {
  it.live("fails fast with StreamUnavailable instead of hanging", () =>
    Effect.gen(function*() {
      const built = yield* timed(Layer.build(redisLayer("redis://127.0.0.1:1", "test:unreachable:captures")))
      assert.isBelow(built.ms, 3_000, "a process started while Redis is down still starts")
      const stream = Context.get(built.result, CaptureStream)
      for (const operation of [
        appended(stream.publish(["lost?"], nextBatch())),
        stream.read("c1", { count: 1, blockMs: 5_000 }),
        stream.ack(["1-0"]),
        stream.stats
      ]) {
        const failed = yield* timed(Effect.flip(operation))
        assert.strictEqual(failed.result._tag, "StreamUnavailable")
        assert.isBelow(failed.ms, 1_000)
      }
    }))

  it.live("recovers on its own when the connection comes back", () =>
    Effect.gen(function*() {
      const proxy = yield* tcpProxy
      const prefix = yield* testKeyPrefix("capture-recovery")
      const context = yield* Layer.build(redisLayer(proxy.url, `${prefix}captures`))
      const stream = Context.get(context, CaptureStream)
      const [first] = yield* appended(stream.publish(["before"], nextBatch()))
      assert.deepStrictEqual(payloadsOf(yield* stream.read("c1", { count: 10, blockMs: 100 })), ["before"])

      yield* proxy.stop
      const failed = yield* timed(Effect.flip(appended(stream.publish(["during"], nextBatch()))))
      assert.strictEqual(failed.result._tag, "StreamUnavailable")
      assert.isBelow(failed.ms, 2_000)
      assert.strictEqual((yield* Effect.flip(stream.read("c1", { count: 10, blockMs: 100 })))._tag, "StreamUnavailable")

      yield* proxy.start
      // reconnect backoff is capped at ~2 s
      const [after] = yield* appended(stream.publish(["after"], nextBatch())).pipe(
        Effect.retry({ schedule: Schedule.spaced(100), times: 60 })
      )
      assert.isTrue(isAfter(after, first))
      const entries = yield* stream.read("c1", { count: 10, blockMs: 100 }).pipe(
        Effect.retry({ schedule: Schedule.spaced(100), times: 60 })
      )
      assert.deepStrictEqual(payloadsOf(entries), ["after"], "the failed publish left nothing behind")
      yield* stream.ack([first, after])
    }))
})

describe("RedisCaptureStream when a publish's reply is lost", () => {
  it.live("the batch was appended; retrying it with the same id appends nothing", () =>
    Effect.gen(function*() {
      const proxy = yield* tcpProxy
      const key = `${yield* testKeyPrefix("capture-reply-lost")}captures`
      const stream = Context.get(yield* Layer.build(redisLayer(proxy.url, key)), CaptureStream)
      const admin = yield* redisAdmin
      const inStream = Effect.promise(() => admin.xRange(key, "-", "+")).pipe(
        Effect.map((entries) => (entries ?? []).map((entry) => entry.message.c))
      )
      // a first publish loads the script, so the one below is a single EVALSHA
      yield* appended(stream.publish(["before"], nextBatch()))

      const cut = yield* proxy.loseNextReply("EVALSHA")
      const batch = nextBatch()
      const failed = yield* Effect.flip(appended(stream.publish(["in flight 1", "in flight 2"], batch)))
      assert.strictEqual(failed._tag, "StreamUnavailable")
      yield* cut
      assert.deepStrictEqual(yield* inStream, ["before", "in flight 1", "in flight 2"], "Redis applied the publish whose reply was lost")

      // the client reconnects through the proxy; the retry is recognised
      const retried = yield* appended(stream.publish(["in flight 1", "in flight 2"], batch)).pipe(
        Effect.retry({ schedule: Schedule.spaced(100), times: 60 })
      )
      assert.deepStrictEqual(retried, [], "nothing appended by the retry")
      assert.strictEqual((yield* appended(stream.publish(["after"], nextBatch()))).length, 1)
      assert.deepStrictEqual(yield* inStream, ["before", "in flight 1", "in flight 2", "after"])
    }))
})
