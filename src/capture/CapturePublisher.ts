/**
 * The capture publisher (docs/ARCHITECTURE.md, step 3 of a call; the first two promises): the gateway hands each capture (its JSON text, built once)
 * to `offer`, which returns at once; a batching fiber publishes to the capture stream.
 *
 * - The mailbox is a bounded Effect `Queue` (LEDGER_CAPTURE_QUEUE_CAPACITY captures, and at most
 *   QUEUE_MAX_BYTES of text). A capture that does not fit goes straight to the spool: never dropped silently.
 * - A batch the stream refuses (Redis down or slow past its command timeout) is appended to the spool. While the
 *   spool holds entries, new batches are appended behind them, and the spool is replayed oldest first, one batch
 *   per publish, retried with backoff, so the stream receives captures in the order they were spooled.
 * - Shutdown ends the queue: the fiber publishes (or spools) what is left, within DRAIN_TIMEOUT; anything it did
 *   not get to is spooled. The spool is replayed by the next start.
 *
 * Exactly once into the stream: every publish carries a batch id (CaptureStream's BatchId), and a batch keeps its
 * id through the spool and every retry, so a publish that failed after Redis applied it (the reply was lost) is
 * dropped by the stream when replayed. Batches taken from the queue are numbered by this publisher in the order
 * they are published; the spool numbers the captures it receives unpublished in file order. The builder still
 * deduplicates by `ledger_id` (a record expired before a very late retry).
 *
 * On Redis, what is published is also kept until the builders have committed it, and published again if Redis
 * comes back without it (Republisher).
 */
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Layer, Metric, Option, Queue, type Scope } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { CaptureShards } from "./CaptureShards.ts"
import { type BatchId, batchIds, captureBytes, type CapturePayload, type CaptureStream, captureText } from "./CaptureStream.ts"
import { makeRepublisher, RECONCILE_MS } from "./Republisher.ts"
import { backoff, steppedBackoff, supervise } from "../supervision/supervise.ts"
import { adoptSpool, orphanSpoolDirs } from "./adoptSpools.ts"
import { shardSpoolDir, Spool, type SpoolStats } from "./Spool.ts"

/** Captures held in memory by the queue: UTF-16 code units of texts, bytes of encoded ones (they carry whole bodies). */
const QUEUE_MAX_BYTES = 64 * 1024 * 1024
/** Most text the spool puts in one batch of captures it received unpublished (a replay publishes one batch). */
const SPOOL_BATCH_MAX_BYTES = 4 * 1024 * 1024
/** Between replays of the spool while the stream refuses them. */
const REPLAY_BACKOFF = backoff(Duration.millis(100), Duration.seconds(5))
/**
 * After the first capture of a batch, how long to wait for more (up to LEDGER_CAPTURE_BATCH_SIZE): a quiet gateway
 * then publishes many captures per round trip instead of one, and a busy one publishes full batches. Every batch
 * costs the event loop a fiber round, a script call and a reply; 20 ms rather than 5 ms cut the gateway's CPU per
 * call by ~5 % at 32 connections (bench/notes/gateway.md, "Captures promoted by the GC, and the publisher's linger").
 * Captures reach the stream that much later; callers never wait.
 */
const LINGER_MS = 20
/** While the spool is waiting for a retry, how often the queue is still moved behind it. */
const RECOVERY_POLL_MS = 50
const DRAIN_TIMEOUT = Duration.seconds(10)

export interface PublisherStats {
  /** captures waiting in memory */
  readonly queued: number
  readonly spool: SpoolStats
}

const queueDepth = Metric.gauge("ledger_capture_queue_depth", { description: "captures waiting in the gateway's in-memory queue" })
const spoolEntries = Metric.gauge("ledger_capture_spool_entries", { description: "captures in the spool waiting for replay" })
const spoolBytes = Metric.gauge("ledger_capture_spool_bytes", { description: "bytes in the spool waiting for replay" })
const published = Metric.counter("ledger_capture_published_total", { description: "captures appended to the capture stream", incremental: true })
const publishFailures = Metric.counter("ledger_capture_publish_failures_total", { description: "stream publishes that failed (their captures were spooled or stay spooled)", incremental: true })
const alreadyPublished = Metric.counter("ledger_capture_batches_already_published_total", {
  description: "spooled batches the stream already held when replayed (a publish landed but its reply was lost); not appended again",
  incremental: true
})
const spooled = Metric.counter("ledger_capture_spooled_total", { description: "captures written to the spool", incremental: true })
const lost = Metric.counter("ledger_capture_lost_total", { description: "captures neither published nor spooled (the spool could not be written)", incremental: true })

/** One shard's publisher: what the module comment describes, for one stream and one spool directory. */
interface ShardPublisher {
  offer(payload: CapturePayload): void
  readonly queued: () => number
  readonly spoolStats: () => SpoolStats
  readonly settled: Effect.Effect<void>
}

/** Labels one shard's figures when there are several (`shard="<i>"`); a single stream's stay unlabelled. */
const labelled = <M extends Metric.Metric<any, any>>(metric: M, attributes: Metric.Metric.AttributeSet | undefined): M =>
  attributes === undefined ? metric : Metric.withAttributes(metric, attributes) as M

const makeShardPublisher = (
  stream: CaptureStream["Service"],
  place: { readonly dir: string; readonly orphans: ReadonlyArray<string>; readonly retainBytes: number; readonly attributes?: Metric.Metric.AttributeSet }
) =>
  Effect.gen(function*(): Effect.fn.Return<ShardPublisher, never, LedgerConfig | Scope.Scope> {
    const config = yield* LedgerConfig
    const context = yield* Effect.context<never>()
    const batchSize = Math.max(1, config.captureBatchSize)
    const dir = place.dir
    const limits = { maxEntries: batchSize * 4, maxBytes: SPOOL_BATCH_MAX_BYTES }
    const spool = Spool.open(dir, limits)
    for (const orphan of place.orphans) {
      const moved = adoptSpool(orphan, spool, limits)
      yield* Effect.logInfo("took over a capture spool no longer published from (a gateway worker or a shard gone)", { dir: orphan, into: dir, captures: moved })
    }
    /** ids of the batches this publisher takes from the queue, in the order it publishes them */
    const nextBatchId = batchIds()
    if (spool.droppedTornBytes > 0) {
      yield* Effect.logWarning("capture spool ended in a partly written entry (a crash while spooling); dropped it", {
        bytes: spool.droppedTornBytes
      })
    }
    if (!spool.isEmpty) yield* Effect.logInfo("capture spool holds captures from a previous run; replaying", spool.stats)
    // the in-process stream dies with the process: there is nothing to publish again to
    const republisher = stream.backend === "redis"
      ? yield* makeRepublisher(stream, spool, dir, place.retainBytes, context, place.attributes)
      : undefined
    /** epoch ms of the next check of what the republisher keeps */
    let reconcileAt = 0

    const queue = yield* Queue.bounded<CapturePayload, Cause.Done>(Math.max(1, config.captureQueueCapacity))
    let queuedBytes = 0
    /** captures accepted by the queue and not yet published or spooled */
    let pending = 0
    const replayBackoff = yield* steppedBackoff(REPLAY_BACKOFF)
    /** the stream refuses publishes (since the last success) */
    let failing = false
    /** epoch ms before which the spool is not replayed (backoff after a failure) */
    let replayNotBefore = 0
    /** shutdown has begun: finish the queue, stop replaying */
    let ending = false
    /** the publisher has stopped: offers go straight to the spool */
    let closed = false

    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)

    /**
     * Appends to the spool, under the batch id it was published with if it was; a spool that cannot be written
     * loses the captures, loudly.
     */
    const spill = (payloads: ReadonlyArray<CapturePayload>, published?: BatchId) => {
      try {
        const texts = payloads.map(captureText)
        if (published === undefined) spool.append(texts)
        else spool.appendPublished(published, texts)
        spooled.updateUnsafe(payloads.length, context)
      } catch (cause) {
        lost.updateUnsafe(payloads.length, context)
        log(Effect.logError("captures lost: the spool could not be written", { count: payloads.length, path: spool.path, cause: String(cause) }))
      }
    }

    const offer = (payload: CapturePayload) => {
      if (!closed && queuedBytes + payload.length <= QUEUE_MAX_BYTES && Queue.offerUnsafe(queue, payload)) {
        queuedBytes += payload.length
        pending++
        return
      }
      spill([payload])
    }

    const taken = (batch: Array<CapturePayload>) => {
      for (const payload of batch) queuedBytes -= payload.length
      return batch
    }

    /**
     * Empties a batch once it is in the stream or the spool. A finished step's closures (which hold the batch)
     * stay reachable until the next GC — seen with --trace-gc-nvp, the exact holder inside the fiber's bookkeeping
     * not pinned down — so under load every capture survived a young-generation GC and was promoted: 3.3 MB per
     * scavenge at 16k calls/s, 0.2 MB with this; ~4 % of the gateway's CPU per call (bench/notes/gateway.md,
     * "Captures promoted by the GC, and the publisher's linger").
     */
    const release = (batch: Array<CapturePayload>) => {
      batch.length = 0
    }

    /** A batch taken from the queue goes to the spool. */
    const spillTaken = (batch: Array<CapturePayload>, published?: BatchId) => {
      spill(batch, published)
      pending -= batch.length
      release(batch)
    }

    const publishFailed = Effect.fnUntraced(function*(cause: Cause.Cause<unknown>, count: number) {
      publishFailures.updateUnsafe(1, context)
      // one warning per outage, not one per retry
      if (!failing) {
        failing = true
        const error = Cause.squash(cause)
        yield* Effect.logWarning("capture stream unavailable; spooling captures", {
          error: error instanceof Error ? error.message : String(error),
          count
        })
      }
      replayNotBefore = (yield* Clock.currentTimeMillis) + (yield* replayBackoff.next)
    })

    const publishSucceeded = Effect.suspend(() => {
      failing = false
      return replayBackoff.reset
    })

    /**
     * Publishes a batch taken from the queue, or spools it (behind what is already spooled, keeping order). A
     * failed publish is spooled under its id: it is replayed before this publisher publishes another batch.
     */
    const publishBatch = (batch: Array<CapturePayload>) => {
      if (!spool.isEmpty) return Effect.sync(() => spillTaken(batch))
      const id = nextBatchId()
      let kept = false
      // encoded once for Redis and the retention alike (CapturePayload); the in-process stream keeps the texts
      const payloads: Array<CapturePayload> = stream.backend === "redis" ? batch.map(captureBytes) : batch
      return Effect.gen(function*() {
        const exit = yield* Effect.exit(stream.publish(payloads, id))
        kept = true
        const count = batch.length
        if (Exit.isSuccess(exit)) {
          if (republisher !== undefined) yield* republisher.published(id, exit.value, payloads)
          pending -= count
          published.updateUnsafe(count, context)
          yield* publishSucceeded
          release(batch)
          release(payloads)
          return
        }
        spillTaken(batch, id)
        yield* publishFailed(exit.cause, count)
      }).pipe(
        // interrupted mid-publish (shutdown past its deadline): keep the batch, under its id (it may have landed)
        Effect.onInterrupt(() => Effect.sync(() => kept || spillTaken(batch, id)))
      )
    }

    /** Publishes the oldest spooled batch, under its id; on success the spool moves past it. */
    const replay = Effect.gen(function*() {
      const batch = spool.read()
      if (batch === undefined) return
      const exit = yield* Effect.exit(stream.publish(batch.payloads, batch.batch))
      if (Exit.isFailure(exit)) return yield* publishFailed(exit.cause, batch.payloads.length)
      spool.commit(batch.end, batch.payloads.length)
      if (republisher !== undefined) yield* republisher.published(batch.batch, exit.value, batch.payloads)
      if (exit.value.ids.length > 0) published.updateUnsafe(batch.payloads.length, context)
      else {
        alreadyPublished.updateUnsafe(1, context)
        yield* Effect.logInfo("spooled capture batch was already in the stream (its publish landed, the reply was lost); not appended again", {
          captures: batch.payloads.length
        })
      }
      yield* publishSucceeded
      if (spool.isEmpty) yield* Effect.logInfo("capture spool replayed")
    })

    /** Up to `max` captures from the queue: waits for one when `wait`, else takes what is there. */
    const nextBatch = (wait: boolean, max = batchSize) =>
      wait || Queue.sizeUnsafe(queue) > 0
        ? Effect.map(Queue.takeBetween(queue, 1, max), taken)
        : Effect.succeed<Array<CapturePayload>>([])

    /**
     * Waits for a first capture — while the republisher keeps anything, no longer than its next check — then
     * lingers briefly for more unless the batch is full already.
     */
    const collect = Effect.gen(function*() {
      const first = republisher === undefined || republisher.idle
        ? yield* nextBatch(true)
        : yield* nextBatch(true).pipe(
          Effect.timeoutOption(Math.max(0, reconcileAt - (yield* Clock.currentTimeMillis))),
          Effect.map(Option.getOrElse((): Array<CapturePayload> => []))
        )
      if (first.length === 0 || first.length >= batchSize || ending) return first
      yield* Effect.sleep(LINGER_MS).pipe(Effect.onInterrupt(() => Effect.sync(() => spillTaken(first))))
      const more = yield* nextBatch(false, batchSize - first.length)
      // one array per batch, so that releasing it lets go of every capture in it
      for (const payload of more) first.push(payload)
      release(more)
      return first
    })

    /** Checks what the republisher keeps against the stream, once a RECONCILE_MS. */
    const reconcile = Effect.gen(function*() {
      if (republisher === undefined || republisher.idle) return
      const now = yield* Clock.currentTimeMillis
      if (now < reconcileAt) return
      reconcileAt = now + RECONCILE_MS
      yield* republisher.reconcile
    })

    /** One round; fails with Done once shutdown has begun and the queue is empty. */
    const step = Effect.gen(function*() {
      yield* reconcile
      if (spool.isEmpty) {
        const batch = yield* collect
        return batch.length === 0 ? undefined : yield* publishBatch(batch)
      }
      // recovering: move the queue behind the spool, replay when the backoff allows
      const batch = yield* nextBatch(false)
      if (batch.length > 0) spillTaken(batch)
      if (ending) return Queue.sizeUnsafe(queue) === 0 ? yield* Cause.done() : undefined
      const now = yield* Clock.currentTimeMillis
      if (now >= replayNotBefore) yield* replay
      else if (batch.length === 0) yield* Effect.sleep(Math.min(RECOVERY_POLL_MS, replayNotBefore - now))
    })

    // Runs until shutdown has drained the queue (Done); a defect starts it again after a pause.
    const fiber = yield* supervise(
      "capture publisher",
      step.pipe(
        Effect.forever,
        Effect.catchCause((cause) => Cause.hasFails(cause) && Cause.isDone(Cause.squash(cause)) ? Effect.void : Effect.failCause(cause))
      )
    )

    const registrations = [
      Metric.registerUnsafe(labelled(queueDepth, place.attributes), context, { get: () => ({ value: Queue.sizeUnsafe(queue) }), update: () => {}, modify: () => {} }),
      Metric.registerUnsafe(labelled(spoolEntries, place.attributes), context, { get: () => ({ value: spool.stats.entries }), update: () => {}, modify: () => {} }),
      Metric.registerUnsafe(labelled(spoolBytes, place.attributes), context, { get: () => ({ value: spool.stats.bytes }), update: () => {}, modify: () => {} })
    ]

    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        ending = true
        yield* Queue.end(queue)
        const drained = yield* Fiber.join(fiber).pipe(Effect.timeoutOption(DRAIN_TIMEOUT))
        if (Option.isNone(drained)) yield* Fiber.interrupt(fiber)
        // from here on, offers (a request finishing late) go straight to the spool
        closed = true
        const left = taken(yield* Queue.clear(queue))
        if (left.length > 0) spillTaken(left)
        for (const registration of registrations) registration.remove()
        const remaining = spool.stats
        if (remaining.entries > 0) yield* Effect.logInfo("capture spool kept for the next start", remaining)
        spool.close()
        republisher?.close()
      })
    )

    const settled = Effect.gen(function*() {
      while (pending > 0 || !spool.isEmpty) yield* Effect.sleep(10)
    })

    return { offer, queued: () => Queue.sizeUnsafe(queue), spoolStats: () => spool.stats, settled }
  })

/** How often a gateway publishing to several shards raises the shard record (so builders read every one of them). */
const REGISTER_INTERVAL = Duration.seconds(10)

/**
 * Gateway worker `worker.index`'s publisher: one shard publisher per capture stream shard, each with its own spool
 * directory (shardSpoolDir), and the spools of workers or shards gone handed to them (adoptSpools). A capture goes to
 * its workspace's shard.
 */
const make = (worker: { readonly index: number; readonly count: number }) =>
  Effect.gen(function*(): Effect.fn.Return<CapturePublisher["Service"], never, LedgerConfig | CaptureShards | Scope.Scope> {
    const config = yield* LedgerConfig
    const shards = yield* CaptureShards
    const count = shards.streams.length
    const orphans = orphanSpoolDirs(config.dataDir, worker.index, worker.count, count)
    const publishers: Array<ShardPublisher> = []
    for (const [shard, stream] of shards.streams.entries()) {
      publishers.push(yield* makeShardPublisher(stream, {
        dir: shardSpoolDir(config.dataDir, worker.index, shard),
        orphans: orphans.filter((orphan) => orphan.shard === shard).map((orphan) => orphan.dir),
        retainBytes: Math.floor(config.captureRetainBytes / count),
        ...(count > 1 ? { attributes: { shard: String(shard) } } : {})
      }))
    }
    if (count > 1) {
      // builders read every shard the record names; a gateway keeps it up while it runs (builders lower it after a
      // resharding once the shards beyond it are drained)
      yield* shards.register.pipe(
        Effect.catch((error) => Effect.logDebug("capture shard record not raised; retrying", { error: error.message })),
        Effect.andThen(Effect.sleep(REGISTER_INTERVAL)),
        Effect.forever,
        Effect.forkScoped
      )
    }
    const first = publishers[0]!
    const offer = count === 1
      ? (payload: CapturePayload) => first.offer(payload)
      : (payload: CapturePayload, scope: WorkspaceScope) => publishers[shards.shardOf(scope)]!.offer(payload)
    const stats = Effect.sync((): PublisherStats => {
      let queued = 0
      let entries = 0
      let bytes = 0
      for (const publisher of publishers) {
        queued += publisher.queued()
        const spool = publisher.spoolStats()
        entries += spool.entries
        bytes += spool.bytes
      }
      return { queued, spool: { entries, bytes } }
    })
    const settled = Effect.forEach(publishers, (publisher) => publisher.settled, { discard: true })
    return CapturePublisher.of({ offer, stats, settled })
  })

export class CapturePublisher extends Context.Service<CapturePublisher, {
  /**
   * Hands one capture (JSON text or its UTF-8 bytes, no raw newline) to the publisher, for the shard of its workspace;
   * never waits, never drops silently.
   */
  offer(payload: CapturePayload, scope: WorkspaceScope): void
  readonly stats: Effect.Effect<PublisherStats>
  /** Waits until everything offered so far is in the stream: queue empty, nothing in flight, spool replayed. */
  readonly settled: Effect.Effect<void>
}>()("ledger/capture/CapturePublisher") {
  /**
   * The publisher of gateway worker `index` of `count`: its own spool directories (shardSpoolDir), and the spools of
   * workers that no longer run handed to it (adoptSpools).
   */
  static layerFor(worker: { readonly index: number; readonly count: number }): Layer.Layer<CapturePublisher, never, LedgerConfig | CaptureShards> {
    return Layer.effect(CapturePublisher, make(worker))
  }

  /** The publisher of a single gateway (gateway worker 0 of 1). */
  static readonly layer = CapturePublisher.layerFor({ index: 0, count: 1 })
}
