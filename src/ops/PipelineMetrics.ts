/**
 * The pipeline's figures for operators: capture stream gauges refreshed from every shard's `CaptureStream.stats`,
 * added up, and per shard when the stream has several (`ledger_stream_shard_*{shard="<i>"}`) (the builder
 * counts what it builds itself, src/builder/metrics.ts). They are Effect metrics, so `/metrics` on both ports shows
 * them (`PrometheusMetrics.format` in src/serving/Health.ts reads the process's registry).
 */
import { Context, Duration, Effect, Layer, Metric } from "effect"
import { CaptureShards, shardStats, totalStats } from "../capture/CaptureShards.ts"
import type { CaptureStream, StreamStats, StreamUnavailable } from "../capture/CaptureStream.ts"

export const streamLength = Metric.gauge("ledger_stream_length", {
  description: "entries in the capture stream (acknowledged entries are trimmed over time)"
})
export const streamLag = Metric.gauge("ledger_stream_group_lag", {
  description: "captures not yet delivered to the builders' consumer group"
})
export const streamPending = Metric.gauge("ledger_stream_pending", {
  description: "captures delivered to a builder and not yet acknowledged"
})
export const oldestPendingSeconds = Metric.gauge("ledger_stream_oldest_pending_seconds", {
  description: "age of the oldest unacknowledged capture (0 when none)"
})
export const oldestWaitingSeconds = Metric.gauge("ledger_stream_oldest_waiting_seconds", {
  description: "how long ago the oldest capture not yet committed was appended: how far behind ingest runs (0 when none waits)"
})
export const deadLetters = Metric.gauge("ledger_dead_letters", {
  description: "captures in the dead-letter stream (ledger dlq list)"
})
const shardLength = Metric.gauge("ledger_stream_shard_length", { description: "entries in one shard of the capture stream" })
const shardLag = Metric.gauge("ledger_stream_shard_lag", { description: "captures of one shard not yet delivered to its builders' group" })
const shardPending = Metric.gauge("ledger_stream_shard_pending", { description: "captures of one shard delivered and not yet acknowledged" })
const shardOldestPending = Metric.gauge("ledger_stream_shard_oldest_pending_seconds", {
  description: "age of one shard's oldest unacknowledged capture (0 when none)"
})
const shardOldestWaiting = Metric.gauge("ledger_stream_shard_oldest_waiting_seconds", {
  description: "how long ago one shard's oldest capture not yet committed was appended (0 when none waits)"
})
export const streamPersistence = Metric.gauge("ledger_stream_persistence", {
  description: "whether the capture stream's Redis keeps what it holds across a restart: 1 yes (AOF or RDB), 0 no, -1 cannot tell"
})

const REFRESH_INTERVAL = Duration.seconds(5)
/** Redis's persistence settings change rarely: read them once a minute. */
const PERSISTENCE_INTERVAL = Duration.minutes(1)

/**
 * Says — in the log when first seen and whenever it changes, and as a gauge — whether Redis keeps the stream across
 * a restart: without persistence, a restart loses the captures it holds, and only what gateways keep to publish
 * again (LEDGER_CAPTURE_RETAIN_MB) saves them.
 */
const watchPersistence = (stream: CaptureStream["Service"]) => {
  let last: boolean | null | undefined
  return stream.persistence.pipe(
    Effect.tap(({ durable, detail }) =>
      Effect.gen(function*() {
        yield* Metric.update(streamPersistence, durable === null ? -1 : durable ? 1 : 0)
        if (durable === last) return
        last = durable
        if (durable === false) {
          yield* Effect.logWarning(
            "Redis runs without persistence: a restart loses the captures it holds; gateways publish again what they keep (LEDGER_CAPTURE_RETAIN_MB)",
            { redis: detail }
          )
        } else if (durable === null) yield* Effect.logInfo("Redis persistence cannot be told (CONFIG refused)", { redis: detail })
        else yield* Effect.logInfo("Redis persists the capture stream", { redis: detail })
      })
    ),
    Effect.catch((error) => Effect.logDebug("Redis persistence check failed", { error: error.message })),
    Effect.andThen(Effect.sleep(PERSISTENCE_INTERVAL)),
    Effect.forever
  )
}

export class PipelineMetrics extends Context.Service<PipelineMetrics, {
  /** Reads the stream's figures and sets the gauges (the layer does it every few seconds). */
  readonly refresh: Effect.Effect<StreamStats, StreamUnavailable>
}>()("ledger/ops/PipelineMetrics") {
  static readonly layer = Layer.effect(
    PipelineMetrics,
    Effect.gen(function*() {
      const shards = yield* CaptureShards
      const stream = shards.streams[0]!
      const refresh = Effect.gen(function*() {
        const each = yield* shardStats(shards)
        const stats = totalStats(each)
        if (each.length > 1) {
          for (const { shard, stats } of each) {
            const labels = { shard: String(shard) }
            yield* Metric.update(Metric.withAttributes(shardLength, labels), stats.length)
            if (stats.lag !== null) yield* Metric.update(Metric.withAttributes(shardLag, labels), stats.lag)
            yield* Metric.update(Metric.withAttributes(shardPending, labels), stats.pending)
            yield* Metric.update(Metric.withAttributes(shardOldestPending, labels), (stats.oldest_pending_ms ?? 0) / 1000)
            yield* Metric.update(Metric.withAttributes(shardOldestWaiting, labels), (stats.oldest_waiting_ms ?? 0) / 1000)
          }
        }
        yield* Metric.update(streamLength, stats.length)
        // null when Redis cannot tell (entries deleted inside the unread range): keep the last figure
        if (stats.lag !== null) yield* Metric.update(streamLag, stats.lag)
        yield* Metric.update(streamPending, stats.pending)
        yield* Metric.update(oldestPendingSeconds, (stats.oldest_pending_ms ?? 0) / 1000)
        yield* Metric.update(oldestWaitingSeconds, (stats.oldest_waiting_ms ?? 0) / 1000)
        yield* Metric.update(deadLetters, stats.dead_letters)
        return stats
      }).pipe(Effect.withSpan("PipelineMetrics.refresh"))
      // A failed round (stream unreachable) leaves the last figures; the next round tries again.
      yield* refresh.pipe(
        Effect.catch((error) => Effect.logDebug("pipeline metrics refresh failed", { error: error.message })),
        Effect.andThen(Effect.sleep(REFRESH_INTERVAL)),
        Effect.forever,
        Effect.forkScoped
      )
      if (stream.backend === "redis") yield* Effect.forkScoped(watchPersistence(stream))
      return PipelineMetrics.of({ refresh })
    })
  )
}
