/**
 * The builder role's fibers (docs/ARCHITECTURE.md, step 4 of a call, and "Shards"). Per capture stream shard this
 * process holds: `builderConsumers` consumers of the shard's group, a reclaimer taking over entries idle longer than
 * `reclaimIdleMs` (a dead consumer's), and the pruner of consumers of builders gone. Once per process: the throughput
 * pruner, and the round that decides which shards it holds.
 *
 * Which shards: with one shard (LEDGER_CAPTURE_SHARDS unset) every builder reads it, sharing its group as before.
 * With several, builders hold leases in Redis (CaptureShards.claim): each takes its fair share, renews it every
 * LEASE_ROUND, and a builder that dies loses its leases after LEASE_TTL; its pending entries are then reclaimed by the
 * shard's next holder. A builder that gives a shard up stops reading it after its current batch — a batch read by both
 * holders at that moment only waits on the agents' locks; nothing is built twice (`ledger_id`) or lost (acknowledged
 * after commit).
 */
import { Duration, Effect, Fiber, Layer } from "effect"
import { CaptureShards } from "../capture/CaptureShards.ts"
import { CaptureStream } from "../capture/CaptureStream.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { every, supervise } from "../supervision/supervise.ts"
import { ContentPolicies } from "./ContentPolicies.ts"
import { nextBatchCount } from "./batchSizing.ts"
import { type DecisionBuilder, makeDecisionBuilder, processConsumerName, untilStreamAnswers } from "./DecisionBuilder.ts"
import { pruneThroughput } from "./writes.ts"

/** Waiting for a blocked read; short enough that shutdown and giving up a shard are prompt. */
const READ_BLOCK_MS = 2_000
const PRUNE_INTERVAL = Duration.minutes(5)
/**
 * A consumer of the group that has not read or claimed for this long and holds nothing pending belongs to a builder
 * process that is gone (each start reads under new names): it is removed, so the group's consumer count (ledger
 * status) counts live ones. Live consumers read every READ_BLOCK_MS and the reclaimer claims every 15 s at most.
 */
const CONSUMER_IDLE_LIMIT = Duration.minutes(10)
/** A shard lease not renewed for this long is free: how long a dead builder's shards wait for another. */
const LEASE_TTL = Duration.seconds(10)
/** How often a builder renews its leases and takes or gives up shards. */
const LEASE_ROUND = Duration.millis(2_500)

/** A shard this process reads, until `stopped`. */
interface Held {
  stopped: boolean
}

export const BuilderWorkers = Layer.effectDiscard(Effect.gen(function*() {
  const settings = yield* LedgerConfig
  const shards = yield* CaptureShards
  const tenantSql = yield* TenantSql
  const context = yield* Effect.context<LedgerConfig | TenantSql | IntegrityKeys | ContentPolicies>()
  const name = processConsumerName()
  const sharded = shards.streams.length > 1

  // Reclaiming while the database is down would only move entries between stuck consumers and count deliveries
  // against them: probe first.
  const databaseAnswers = tenantSql.control(ScopedSql.use((sql) => sql`SELECT 1`)).pipe(
    Effect.timeout(Duration.seconds(2)),
    Effect.as(true),
    Effect.catchCause(() => Effect.succeed(false))
  )
  const reclaimEvery = Duration.millis(Math.min(Math.max(settings.reclaimIdleMs / 4, 250), 15_000))

  /** The fibers of one shard, until it is given up. */
  const read = Effect.fnUntraced(function*(index: number, stream: CaptureStream["Service"], builder: DecisionBuilder["Service"], held: Held) {
    const label = index === 0 && !sharded ? "" : ` (shard ${index})`
    /**
     * The throughput record (`ledger status`) each loop counts its batches under: one row a second per loop, since a
     * transaction's upsert of a row another open transaction upserted waits for that one to commit — under one
     * name, the consumers of a process's shards committed one after another. Status counts the process, before "/".
     */
    const recordOf = (loop: string) => `${name}/${index}.${loop}`
    /**
     * With a backlog (its last batch was full) a consumer reads and derives its next batch while the current one
     * commits: the derivation needs no database, and the process's event loop would otherwise sit idle through the
     * transaction's round trips (bench/notes/ingest.md, "Consumers read ahead"). Without one it reads after the
     * commit, so the next batch gathers what arrives meanwhile. Batches commit one after another, in the order read; a
     * batch read ahead is committed even if the shard is given up meanwhile, and at shutdown stays pending (reclaimed).
     */
    const consume = (consumer: string, record: string) =>
      Effect.gen(function*() {
        let count = settings.builderBatchSize
        const readNext = (lingerMs: number) =>
          Effect.gen(function*() {
            if (lingerMs > 0) yield* Effect.sleep(Duration.millis(lingerMs))
            const requested = count
            const entries = yield* untilStreamAnswers("read", stream.read(consumer, { count: requested, blockMs: READ_BLOCK_MS }))
            count = nextBatchCount(entries, count, settings)
            return { full: entries.length >= requested, read: entries.length, prepared: yield* builder.prepare(entries) }
          })
        let next = yield* Effect.forkChild(readNext(0))
        while (true) {
          const batch = yield* Fiber.join(next)
          const ahead = batch.full && !held.stopped
          if (ahead) next = yield* Effect.forkChild(readNext(0))
          if (batch.read > 0) yield* builder.commit(record, batch.prepared)
          if (ahead) continue
          if (held.stopped) return
          // a short batch: let the next one gather (see builderLingerMs)
          next = yield* Effect.forkChild(readNext(batch.read > 0 ? settings.builderLingerMs : 0))
        }
      })
    const reclaimer = `${name}-reclaimer`
    let reclaimCount = settings.builderBatchSize
    const reclaim = Effect.gen(function*() {
      yield* Effect.sleep(reclaimEvery)
      if (held.stopped || !(yield* databaseAnswers)) return
      while (true) {
        const requested = reclaimCount
        const entries = yield* stream.reclaim(reclaimer, { minIdleMs: settings.reclaimIdleMs, count: requested })
        if (entries.length === 0) return
        reclaimCount = nextBatchCount(entries, reclaimCount, settings)
        yield* Effect.logInfo("reclaimed idle captures", { count: entries.length, shard: index })
        yield* builder.process(recordOf("reclaimer"), entries)
        if (entries.length < requested) return
      }
    }).pipe(Effect.catch((error) => Effect.logWarning("reclaim failed; retrying", { error: error.message })))
    const pruneConsumers = stream.pruneConsumers({ minIdleMs: Duration.toMillis(CONSUMER_IDLE_LIMIT) }).pipe(
      Effect.tap((removed) => removed.length > 0 ? Effect.logInfo("removed consumers of builders gone", { consumers: removed, shard: index }) : Effect.void),
      Effect.catch((error) => Effect.logDebug("consumer prune failed", { error: error.message })),
      Effect.delay(PRUNE_INTERVAL)
    )
    const untilGivenUp = <A, E, R>(step: Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        while (!held.stopped) yield* step
      })
    for (let i = 0; i < settings.builderConsumers; i++) yield* supervise(`builder consumer ${i}${label}`, consume(`${name}-${i}`, recordOf(String(i))))
    yield* supervise(`builder reclaimer${label}`, untilGivenUp(reclaim))
    yield* supervise(`consumer pruner${label}`, untilGivenUp(pruneConsumers))
  })

  /** One builder per shard read (its dead-letter and ack calls go to that shard), kept for the process's life. */
  const builders = new Map<number, DecisionBuilder["Service"]>()
  const builderOf = Effect.fnUntraced(function*(index: number, stream: CaptureStream["Service"]) {
    const known = builders.get(index)
    if (known !== undefined) return known
    const builder = yield* makeDecisionBuilder.pipe(Effect.provideService(CaptureStream, stream), Effect.provideContext(context))
    builders.set(index, builder)
    return builder
  })

  const holding = new Map<number, Held>()
  /** shards the record named at the last round: what to give up at shutdown */
  let recorded = shards.streams.length
  let roundFailing = false

  /**
   * After LEDGER_CAPTURE_SHARDS was lowered, the shards beyond it are read until empty; then the record comes down to
   * it (a gateway still publishing to them raises it again, and builders read them again).
   */
  const lowerWhenDrained = Effect.fnUntraced(function*(count: number) {
    for (let index = shards.streams.length; index < count; index++) {
      const stats = yield* Effect.flatMap(shards.stream(index), (stream) => stream.stats)
      if (stats.lag !== 0 || stats.pending !== 0) return
    }
    const now = yield* shards.lower(count)
    if (now < count) yield* Effect.logInfo("capture stream shards beyond LEDGER_CAPTURE_SHARDS are drained; no longer read", { shards: now, drained: count - now })
  })

  const round = Effect.gen(function*() {
    recorded = yield* shards.recorded
    const held = new Set(recorded === 1 ? [0] : yield* shards.claim(name, recorded, Duration.toMillis(LEASE_TTL)))
    const given = [...holding.keys()].filter((index) => !held.has(index))
    for (const index of given) {
      holding.get(index)!.stopped = true
      holding.delete(index)
    }
    const taken = [...held].filter((index) => !holding.has(index))
    for (const index of taken) {
      const stream = yield* shards.stream(index)
      const state: Held = { stopped: false }
      holding.set(index, state)
      yield* read(index, stream, yield* builderOf(index, stream), state)
    }
    if (sharded || recorded > 1) {
      if (given.length > 0 || taken.length > 0) {
        yield* Effect.logInfo("builder shards changed", { builder: name, holds: [...holding.keys()].sort((a, b) => a - b), of: recorded })
      }
    }
    if (recorded > shards.streams.length && held.size > 0) yield* lowerWhenDrained(recorded)
  }).pipe(
    Effect.tap(() => {
      if (!roundFailing) return Effect.void
      roundFailing = false
      return Effect.logInfo("capture stream shard leases answer again")
    }),
    // one warning per outage (the shards held are read on meanwhile; their leases lapse if it lasts)
    Effect.catch((error) => {
      if (roundFailing) return Effect.logDebug("capture stream shard round failed", { error: error.message })
      roundFailing = true
      return Effect.logWarning("capture stream shard round failed; retrying every round", { error: error.message })
    })
  )

  // leave the builders' register and free the leases at shutdown, so others take the shards at once
  yield* Effect.addFinalizer(() =>
    recorded === 1 ? Effect.void : shards.release(name, recorded).pipe(Effect.timeout(Duration.seconds(2)), Effect.ignore)
  )
  yield* round
  yield* every("capture shard leases", round, LEASE_ROUND)
  yield* every(
    "throughput pruner",
    pruneThroughput.pipe(
      Effect.provideService(TenantSql, tenantSql),
      Effect.catch((error) => Effect.logDebug("throughput prune failed", { error: error.message }))
    ),
    PRUNE_INTERVAL
  )
  yield* Effect.logInfo("decision builder started", { consumer: name, consumers: settings.builderConsumers, shards: shards.streams.length })
}))
