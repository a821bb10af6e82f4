/**
 * The builder's counters and build latency, on every `/metrics` beside the stream's gauges (src/ops/PipelineMetrics.ts).
 */
import { Metric } from "effect"

export const decisionsBuilt = Metric.counter("ledger_decisions_built_total", {
  description: "decisions inserted by the builders of this process",
  incremental: true
})
export const buildLatency = Metric.histogram("ledger_build_latency_seconds", {
  description: "time from the end of a model call (capture) to its decision being committed",
  boundaries: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
})
export const capturesDeadLettered = Metric.counter("ledger_captures_dead_lettered_total", {
  description: "captures this process moved to the dead letters",
  incremental: true
})
export const builderRetries = Metric.counter("ledger_builder_retries_total", {
  description: "batch writes retried after a database failure",
  incremental: true
})
export const lockWait = Metric.counter("ledger_builder_lock_wait_seconds_total", {
  description: "time batches waited to take their agents' locks, held meanwhile by other consumers' batches: while it grows " +
    "about as fast as time itself, the consumers take turns, and more builders over the same agents will not build faster",
  incremental: true
})
