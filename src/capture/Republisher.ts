/**
 * Nothing answered is lost when Redis loses what it held (docs/ARCHITECTURE.md, "The promises": no capture is lost):
 * a restart without persistence, a crash between fsyncs, a failover to a replica that was behind. The publisher keeps
 * every batch the stream took in its PublishedRetention until the builders' committed frontier (what the consumer group has
 * acknowledged: builders acknowledge after their transaction commits) passes it, and publishes everything kept again
 * when the stream turns out to have lost batches of its producers:
 * - a publish finds the producer's record below the batch before it (`Published.previous < seq - 1`), or
 * - the periodic check finds a producer's record below the highest batch kept of it.
 * Producer records are written by the same script that appends a batch, so they are lost exactly with the batches
 * (a restart, an AOF replay and a replica all hold a prefix of the scripts run). The check and the publishes run
 * on the publisher's one fiber, so a record a later publish re-created cannot hide a loss. What is published again
 * goes through the spool under a new producer; the builders drop what had been built already (`ledger_id`).
 */
import { type Context, Effect, Metric } from "effect"
import { type BatchId, batchIds, type CapturePayload, type CaptureStream, type Published } from "./CaptureStream.ts"
import { PublishedRetention } from "./PublishedRetention.ts"
import type { Spool } from "./Spool.ts"

/** How often what is kept is checked against the stream. */
export const RECONCILE_MS = 1_000

const retainedEntries = Metric.gauge("ledger_capture_retained_entries", {
  description: "captures published and not yet committed by the builders, kept on disk to publish again if Redis loses them"
})
const retainedBytes = Metric.gauge("ledger_capture_retained_bytes", { description: "bytes of ledger_capture_retained_entries" })
const republished = Metric.counter("ledger_capture_republished_total", {
  description: "captures published again because Redis came back without them",
  incremental: true
})
const forgotten = Metric.counter("ledger_capture_retention_forgotten_total", {
  description: "captures no longer kept for publishing again: the retention bound (LEDGER_CAPTURE_RETAIN_MB) was reached",
  incremental: true
})

export interface Republisher {
  /** Nothing kept: no check is due. */
  readonly idle: boolean
  /** A batch is in the stream: keep it; if the stream had lost batches of its producer, publish all kept again. */
  published(batch: BatchId, result: Published, payloads: ReadonlyArray<CapturePayload>): Effect.Effect<void>
  /** Forgets what the builders committed, or publishes everything kept again if the stream lost some of it. */
  readonly reconcile: Effect.Effect<void>
  close(): void
}

export const makeRepublisher = Effect.fnUntraced(function*(
  stream: CaptureStream["Service"],
  spool: Spool,
  dir: string,
  maxBytes: number,
  context: Context.Context<never>,
  /** labels of this shard's figures, when the stream has several */
  attributes?: Metric.Metric.AttributeSet
): Effect.fn.Return<Republisher> {
  const retention = PublishedRetention.open(dir, maxBytes)
  const entriesGauge = attributes === undefined ? retainedEntries : Metric.withAttributes(retainedEntries, attributes)
  const bytesGauge = attributes === undefined ? retainedBytes : Metric.withAttributes(retainedBytes, attributes)
  if (retention.droppedTornBytes > 0) {
    yield* Effect.logWarning("capture retention ended in a partly written batch (a crash while writing it); dropped it", {
      bytes: retention.droppedTornBytes
    })
  }
  let warnedFull = false

  const measure = () => {
    const stats = retention.stats
    entriesGauge.updateUnsafe(stats.entries, context)
    bytesGauge.updateUnsafe(stats.bytes, context)
  }
  measure()

  /** Everything kept goes back through the spool, under a producer of its own. */
  const publishAgain = Effect.fnUntraced(function*(why: string) {
    const batches = retention.takeAll()
    const nextId = batchIds()
    let captures = 0
    for (const { payloads } of batches) {
      spool.appendPublished(nextId(), payloads)
      captures += payloads.length
    }
    measure()
    if (captures === 0) return
    republished.updateUnsafe(captures, context)
    yield* Effect.logWarning("Redis lost captures it held (restarted without persistence, or failed over); publishing them again", {
      why,
      captures
    })
  })

  const keep = Effect.fnUntraced(function*(batch: BatchId, head: string, payloads: ReadonlyArray<CapturePayload>) {
    const dropped = retention.add(batch, head, payloads)
    measure()
    if (dropped === 0) {
      warnedFull = false
      return
    }
    forgotten.updateUnsafe(dropped, context)
    if (warnedFull) return
    warnedFull = true
    yield* Effect.logWarning("capture retention full (LEDGER_CAPTURE_RETAIN_MB): the oldest uncommitted captures are protected by Redis alone", {
      forgotten: dropped
    })
  })

  const published = (batch: BatchId, result: Published, payloads: ReadonlyArray<CapturePayload>) =>
    Effect.gen(function*() {
      if (result.previous < batch.seq - 1) {
        yield* publishAgain(`batch ${batch.seq} of a producer found the stream holding only up to batch ${result.previous}`)
      }
      // an empty stream holds nothing of this batch: what it had was acknowledged and trimmed
      if (result.head !== null) yield* keep(batch, result.head, payloads)
    }).pipe(
      Effect.catchDefect((cause) => Effect.logError("capture retention could not be written", { cause: String(cause) }))
    )

  const reconcile = Effect.gen(function*() {
    const highest = retention.highestSeqs()
    const progress = yield* stream.progress([...highest.keys()])
    for (const [producer, seq] of highest) {
      const held = progress.producers[producer] ?? 0
      if (held < seq) return yield* publishAgain(`the stream holds batches of a producer up to ${held}, ${seq} were published`)
    }
    if (progress.committedBefore !== null) {
      retention.committedBefore(progress.committedBefore)
      measure()
    }
  }).pipe(
    Effect.catchTag("StreamUnavailable", (error) => Effect.logDebug("capture retention check failed", { error: error.message })),
    Effect.catchDefect((cause) => Effect.logError("capture retention check failed", { cause: String(cause) }))
  )

  return {
    get idle() {
      return retention.isEmpty
    },
    published,
    reconcile,
    close: () => retention.close()
  }
})
