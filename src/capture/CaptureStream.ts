/**
 * The capture stream: the durable hand-off between gateways and decision builders (docs/ARCHITECTURE.md, "One call",
 * step 3).
 *
 * Two implementations share this interface and one contract test suite: Redis Streams with a consumer
 * group (production) and an in-process stream (embedded mode, single process). Payloads are capture
 * records as JSON text, serialised once by the publisher and validated with Schema by the consumer.
 */
import { Context, Duration, Effect, Schema } from "effect"
import * as Crypto from "node:crypto"

export class StreamUnavailable extends Schema.TaggedError<StreamUnavailable>()("StreamUnavailable", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** One delivered entry. `deliveries` counts how many times the group has handed it out (1 on first read). */
export interface StreamEntry {
  readonly id: string
  readonly payload: string
  readonly deliveries: number
}

export interface DeadLetter {
  /** id in the dead-letter stream */
  readonly id: string
  /** id the entry had in the capture stream */
  readonly original_id: string
  readonly payload: string
  readonly reason: string
  readonly deliveries: number
  /** epoch ms */
  readonly failed_at: number
}

/**
 * Names a batch so that publishing it is idempotent: the producer that formed it (a random id per publisher
 * instance) and its number within that producer. The stream records each producer's highest number appended and
 * appends nothing for a batch numbered at or below it, so a publish whose reply was lost (the connection dropped
 * after Redis applied it) can be retried with the same id without appending the batch twice.
 *
 * Publishers keep two rules: a producer numbers its batches upwards in the order it publishes them, and after a
 * failed publish it retries that batch (same payloads, same id) before publishing any later batch of the
 * producer. Breaking them risks a loss (a later batch recorded first makes the retried one look like a
 * duplicate); a record expired or evicted before the retry risks only a duplicate (`ledger_id` dedup catches it).
 */
export interface BatchId {
  readonly producer: string
  readonly seq: number
}

/** A new producer: returns its batch ids, numbered 1, 2, 3, ... */
export const batchIds = (): () => BatchId => {
  const producer = Crypto.randomUUID()
  let seq = 0
  return () => ({ producer, seq: ++seq })
}

/** What a publish did, and what the stream knew of the producer when it did it. */
export interface Published {
  /** stream ids of what this call appended: none for an empty or already appended batch */
  readonly ids: ReadonlyArray<string>
  /**
   * the producer's highest batch number the stream held before this call: 0 when it holds none (the producer's
   * first batch, a record expired, or a stream that lost what it held). Below `seq - 1`, batches between are gone.
   */
  readonly previous: number
  /** the newest entry id in the stream after this call (no entry of the batch is newer); null for an empty stream */
  readonly head: string | null
}

/** How far the builders have got, and what the stream holds of some producers (read in one step). */
export interface StreamProgress {
  /**
   * Every entry with an id below this has been acknowledged by the builders — its decision committed (or its
   * capture dead-lettered); null when the stream cannot tell (no stream or group yet)
   */
  readonly committedBefore: string | null
  /** the highest batch number the stream holds per producer asked about (0: none) */
  readonly producers: Readonly<Record<string, number>>
}

/** Whether the stream's store keeps what it holds across a restart. */
export interface StreamPersistence {
  /** true with AOF or RDB snapshots, false with neither, null when it cannot be told */
  readonly durable: boolean | null
  /** what was found, e.g. `appendonly=no save=""` */
  readonly detail: string
}

/** The id right after `id` (`<ms>-<seq>`): XTRIM MINID keeps entries at or after its argument. */
export const successor = (id: string) => {
  const dash = id.indexOf("-")
  return `${id.slice(0, dash)}-${BigInt(id.slice(dash + 1)) + 1n}`
}

/** Orders stream ids (`<ms>-<seq>`): negative when `a` comes first. */
export const compareIds = (a: string, b: string): number => {
  const [aMs, aSeq] = a.split("-")
  const [bMs, bSeq] = b.split("-")
  const ms = BigInt(aMs!) - BigInt(bMs!)
  if (ms !== 0n) return ms < 0n ? -1 : 1
  const seq = BigInt(aSeq ?? "0") - BigInt(bSeq ?? "0")
  return seq === 0n ? 0 : seq < 0n ? -1 : 1
}

export interface StreamStats {
  readonly backend: "redis" | "memory"
  /** entries in the stream (acknowledged entries are trimmed over time) */
  readonly length: number
  /** entries not yet delivered to the group; null when the backend cannot tell */
  readonly lag: number | null
  /** delivered but not acknowledged */
  readonly pending: number
  /** age of the oldest pending entry, ms since it was last delivered; null when nothing is pending */
  readonly oldest_pending_ms: number | null
  /**
   * how long ago the oldest capture the builders have not committed (pending or never delivered) was appended, ms by
   * the stream's clock — how far behind its captures ingest runs; null when none waits
   */
  readonly oldest_waiting_ms: number | null
  readonly dead_letters: number
  readonly consumers: number
}

/**
 * A capture as it is published: its JSON text, or that text's UTF-8 bytes. The gateway's publisher sends Redis the
 * bytes, encoded once and written to the retention as they are: node-redis joins a command's string arguments into
 * one string, which for a batch of agents' long calls is tens of megabytes copied, measured and encoded again
 * (bench/notes/gateway.md, "The gateway on long agent conversations").
 */
export type CapturePayload = string | Buffer

/** A capture's JSON text. */
export const captureText = (payload: CapturePayload): string => (typeof payload === "string" ? payload : payload.toString("utf8"))

/** A capture's UTF-8 bytes. */
export const captureBytes = (payload: CapturePayload): Buffer => (typeof payload === "string" ? Buffer.from(payload) : payload)

export class CaptureStream extends Context.Service<CaptureStream, {
  readonly backend: "redis" | "memory"
  /**
   * Appends payloads in order, all or none, unless the batch was appended already (see BatchId); says what it
   * appended and what the stream held of the producer before.
   */
  publish(payloads: ReadonlyArray<CapturePayload>, batch: BatchId): Effect.Effect<Published, StreamUnavailable>
  /** The builders' committed frontier and the given producers' highest batch numbers, read at one moment. */
  progress(producers: ReadonlyArray<string>): Effect.Effect<StreamProgress, StreamUnavailable>
  /** Whether the stream survives a restart of its store (Redis persistence). */
  readonly persistence: Effect.Effect<StreamPersistence, StreamUnavailable>
  /** Reads new entries for `consumer` of the builders' group, waiting up to `blockMs` when there are none. */
  read(consumer: string, options: { readonly count: number; readonly blockMs: number }): Effect.Effect<ReadonlyArray<StreamEntry>, StreamUnavailable>
  /** Acknowledges entries after their decisions are committed. */
  ack(ids: ReadonlyArray<string>): Effect.Effect<void, StreamUnavailable>
  /** Claims entries other consumers left pending longer than `minIdleMs` (a consumer that died mid-batch). */
  reclaim(consumer: string, options: { readonly minIdleMs: number; readonly count: number }): Effect.Effect<ReadonlyArray<StreamEntry>, StreamUnavailable>
  /** Moves an entry to the dead-letter stream with the reason, and acknowledges it in the capture stream. */
  deadLetter(entry: StreamEntry, reason: string): Effect.Effect<void, StreamUnavailable>
  listDeadLetters(options: { readonly count: number }): Effect.Effect<ReadonlyArray<DeadLetter>, StreamUnavailable>
  /** Re-publishes dead letters (all, or the given dead-letter ids) and removes them from the dead-letter stream. */
  replayDeadLetters(ids?: ReadonlyArray<string>): Effect.Effect<number, StreamUnavailable>
  readonly stats: Effect.Effect<StreamStats, StreamUnavailable>
  /**
   * Removes the group's consumers that hold no pending entry and have not read or claimed for `minIdleMs`: names
   * of processes gone (every builder start reads under new names). Atomic per consumer, so an entry delivered to
   * a consumer as it is removed is never left outside the pending list. Returns the names removed.
   */
  pruneConsumers(options: { readonly minIdleMs: number }): Effect.Effect<ReadonlyArray<string>, StreamUnavailable>
  /**
   * Removes acknowledged entries from the head of the stream, never an entry still pending or not yet delivered;
   * returns how many were removed. Each layer already runs it periodically; exposed for tests and operators.
   */
  readonly trim: Effect.Effect<number, StreamUnavailable>
}>()("ledger/capture/CaptureStream") {}

/** How often a layer trims acknowledged entries: frequent enough to bound memory, rare enough to cost nothing. */
export const TRIM_INTERVAL = Duration.seconds(10)

/**
 * Runs `trim` every TRIM_INTERVAL in a fiber tied to the layer's scope. A failed round (Redis down) is logged and
 * the next round tries again, so the loop outlives outages and stops only when the layer is released.
 */
export const trimPeriodically = (trim: Effect.Effect<number, StreamUnavailable>) =>
  trim.pipe(
    Effect.tap((removed) => removed > 0 ? Effect.logDebug("capture stream trimmed", { removed }) : Effect.void),
    Effect.catch((error) => Effect.logWarning("capture stream trim failed", { error: error.message })),
    Effect.delay(TRIM_INTERVAL),
    Effect.forever,
    Effect.forkScoped
  )
