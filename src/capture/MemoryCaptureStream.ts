/**
 * In-process capture stream for embedded mode (no REDIS_URL, one process), with the semantics of a Redis
 * stream read by one consumer group: `<ms>-<seq>` ids, a pending list per entry (consumer, delivery count,
 * last delivery time), blocking reads, reclaim by idle time, dead letters and trimming of acknowledged entries.
 * Nothing survives a restart: durability in embedded mode comes from the gateway's spool and the database.
 * Publishing is idempotent per batch like on Redis: the highest batch number appended is remembered for the
 * latest MAX_PRODUCERS producers (a producer is one publisher instance, so a process has a handful).
 *
 * State is plain mutable data touched only inside `Effect.sync` blocks: JavaScript runs one fiber step at a
 * time, so each block is atomic without locks.
 */
import { Clock, Deferred, Effect, Layer } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { type BatchId, type CapturePayload, CaptureStream, captureText, type DeadLetter, type StreamEntry, successor, trimPeriodically } from "./CaptureStream.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

/** producers whose last batch is remembered; the least recently publishing one is forgotten first */
const MAX_PRODUCERS = 10_000

interface LogEntry {
  readonly id: string
  readonly payload: string
}

interface PendingEntry {
  readonly payload: string
  consumer: string
  deliveries: number
  lastDeliveryAt: number
}

/** Ids like Redis: milliseconds, then a sequence within the millisecond; never smaller than the previous id. */
const makeIdGenerator = () => {
  let lastMs = -1
  let seq = 0
  return (now: number): string => {
    if (now > lastMs) {
      lastMs = now
      seq = 0
    } else {
      seq++
    }
    return `${lastMs}-${seq}`
  }
}

export const layer: Layer.Layer<CaptureStream, never, LedgerConfig> = Layer.effect(
  CaptureStream,
  Effect.gen(function*() {
    // Read only so the layer has the same requirements as the Redis one; one process has one stream.
    yield* LedgerConfig
    const nextId = makeIdGenerator()
    const nextDeadId = makeIdGenerator()
    /** entries from the oldest not yet trimmed; `log[delivered]` is the first one never handed out */
    const log: Array<LogEntry> = []
    let delivered = 0
    /**
     * Delivered, unacknowledged entries by id. Map iteration follows insertion order, and entries are inserted
     * on first delivery, which happens in id order: iterating the map visits pending entries oldest first.
     */
    const pending = new Map<string, PendingEntry>()
    /** consumer name → when it last read or claimed (epoch ms) */
    const consumers = new Map<string, number>()
    const dead: Array<DeadLetter> = []
    /** highest batch number appended per producer, least recently publishing first */
    const lastBatch = new BoundedMap<string, number>(MAX_PRODUCERS)
    /** the id of the newest entry ever appended (trimming does not forget it) */
    let newest: string | null = null
    /** completed (and replaced) on every publish to wake blocked readers */
    let published = Deferred.makeUnsafe<void>()

    const append = (payloads: ReadonlyArray<string>, now: number): ReadonlyArray<string> => {
      const ids = payloads.map((payload) => {
        const id = nextId(now)
        log.push({ id, payload })
        return id
      })
      if (ids.length > 0) {
        newest = ids.at(-1)!
        Deferred.doneUnsafe(published, Effect.void)
        published = Deferred.makeUnsafe<void>()
      }
      return ids
    }

    /** Records the batch as appended; false when it was already. */
    const firstTime = (batch: BatchId) => {
      const last = lastBatch.get(batch.producer)
      if (last !== undefined && batch.seq <= last) return false
      lastBatch.set(batch.producer, batch.seq)
      return true
    }

    const publish = Effect.fn("CaptureStream.publish")(function*(payloads: ReadonlyArray<CapturePayload>, batch: BatchId) {
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.sync(() => {
        if (payloads.length === 0) return { ids: [], previous: 0, head: null }
        const previous = lastBatch.get(batch.producer) ?? 0
        const texts = payloads.map(captureText)
        const ids = firstTime(batch) ? append(texts, now) : []
        return { ids, previous, head: newest }
      })
    })

    const progress = Effect.fn("CaptureStream.progress")(function*(producers: ReadonlyArray<string>) {
      return yield* Effect.sync(() => {
        const oldestPending = pending.keys().next()
        const committedBefore = !oldestPending.done
          ? oldestPending.value
          : delivered < log.length
          ? log[delivered]!.id
          : newest !== null
          ? successor(newest)
          : null
        return { committedBefore, producers: Object.fromEntries(producers.map((producer) => [producer, lastBatch.get(producer) ?? 0])) }
      })
    })

    const persistence = Effect.succeed({ durable: false, detail: "in-process stream (embedded mode): gone with the process" })

    /** Hands out up to `count` undelivered entries, or returns the signal to wait on when there are none. */
    const take = (consumer: string, count: number, now: number) => {
      consumers.set(consumer, now)
      const batch = log.slice(delivered, delivered + count)
      delivered += batch.length
      for (const entry of batch) {
        pending.set(entry.id, { payload: entry.payload, consumer, deliveries: 1, lastDeliveryAt: now })
      }
      return { entries: batch.map((entry): StreamEntry => ({ ...entry, deliveries: 1 })), wake: published }
    }

    const read = Effect.fn("CaptureStream.read")(
      function*(consumer: string, options: { readonly count: number; readonly blockMs: number }) {
        const deadline = (yield* Clock.currentTimeMillis) + options.blockMs
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const { entries, wake } = yield* Effect.sync(() => take(consumer, options.count, now))
          if (entries.length > 0 || now >= deadline) return entries
          // Another reader may take what woke us: loop until entries arrive or the deadline passes.
          yield* Deferred.await(wake).pipe(Effect.timeoutOption(deadline - now))
        }
      }
    )

    const ack = Effect.fn("CaptureStream.ack")(function*(ids: ReadonlyArray<string>) {
      yield* Effect.sync(() => {
        for (const id of ids) pending.delete(id)
      })
    })

    const reclaim = Effect.fn("CaptureStream.reclaim")(
      function*(consumer: string, options: { readonly minIdleMs: number; readonly count: number }) {
        const now = yield* Clock.currentTimeMillis
        return yield* Effect.sync(() => {
          consumers.set(consumer, now)
          const claimed: Array<StreamEntry> = []
          for (const [id, entry] of pending) {
            if (claimed.length >= options.count) break
            if (now - entry.lastDeliveryAt < options.minIdleMs) continue
            entry.consumer = consumer
            entry.deliveries++
            entry.lastDeliveryAt = now
            claimed.push({ id, payload: entry.payload, deliveries: entry.deliveries })
          }
          return claimed
        })
      }
    )

    const deadLetter = Effect.fn("CaptureStream.deadLetter")(function*(entry: StreamEntry, reason: string) {
      const now = yield* Clock.currentTimeMillis
      yield* Effect.sync(() => {
        dead.push({
          id: nextDeadId(now),
          original_id: entry.id,
          payload: entry.payload,
          reason,
          deliveries: entry.deliveries,
          failed_at: now
        })
        pending.delete(entry.id)
      })
    })

    const listDeadLetters = Effect.fn("CaptureStream.listDeadLetters")(function*(options: { readonly count: number }) {
      return yield* Effect.sync(() => dead.slice(0, options.count))
    })

    const replayDeadLetters = Effect.fn("CaptureStream.replayDeadLetters")(function*(ids?: ReadonlyArray<string>) {
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.sync(() => {
        const wanted = ids === undefined ? undefined : new Set(ids)
        const replayed = dead.filter((letter) => wanted === undefined || wanted.has(letter.id))
        append(replayed.map((letter) => letter.payload), now)
        const kept = dead.filter((letter) => wanted !== undefined && !wanted.has(letter.id))
        dead.splice(0, dead.length, ...kept)
        return replayed.length
      })
    })

    const stats = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.sync(() => {
        const oldest = pending.values().next()
        // pending entries are the oldest not committed; else the first never delivered
        const waiting = pending.keys().next().value ?? log[delivered]?.id
        return {
          backend: "memory" as const,
          length: log.length,
          lag: log.length - delivered,
          pending: pending.size,
          oldest_pending_ms: oldest.done ? null : now - oldest.value.lastDeliveryAt,
          oldest_waiting_ms: waiting === undefined ? null : Math.max(0, now - Number(waiting.split("-")[0])),
          dead_letters: dead.length,
          consumers: consumers.size
        }
      })
    }).pipe(Effect.withSpan("CaptureStream.stats"))

    const pruneConsumers = Effect.fn("CaptureStream.pruneConsumers")(function*(options: { readonly minIdleMs: number }) {
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.sync(() => {
        const holding = new Set<string>()
        for (const entry of pending.values()) holding.add(entry.consumer)
        const removed: Array<string> = []
        for (const [consumer, seenAt] of consumers) {
          if (holding.has(consumer) || now - seenAt <= options.minIdleMs) continue
          consumers.delete(consumer)
          removed.push(consumer)
        }
        return removed
      })
    })

    // Like XTRIM MINID: drop the head up to the first entry still pending or never delivered. Entries acked out
    // of order behind a pending one stay until it is acknowledged.
    const trim = Effect.sync(() => {
      const first = pending.keys().next()
      let keep = 0
      while (keep < delivered && (first.done || log[keep].id !== first.value)) keep++
      log.splice(0, keep)
      delivered -= keep
      return keep
    }).pipe(Effect.withSpan("CaptureStream.trim"))

    yield* trimPeriodically(trim)

    return CaptureStream.of({
      backend: "memory",
      publish,
      progress,
      persistence,
      read,
      ack,
      reclaim,
      deadLetter,
      listDeadLetters,
      replayDeadLetters,
      stats,
      pruneConsumers,
      trim
    })
  })
)
