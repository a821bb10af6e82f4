/**
 * Analytics yields to ingest (see `yieldingToIngest`). The analytics fibers themselves run supervised
 * (src/supervision/supervise.ts).
 */
import { Clock, Effect, Metric } from "effect"
import { CaptureShards, shardStats, totalStats } from "../capture/CaptureShards.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"

export const deferredRounds = Metric.counter("ledger_analytics_deferred_rounds_total", {
  description: "Analytics rounds skipped because captures were waiting for the builders (LEDGER_ANALYTICS_YIELD_BACKLOG)",
  incremental: true
})

/** The longest run of skipped rounds: behind a saturated ingest, analytics still runs a round at least this often. */
const MAX_DEFERRAL_MS = 60_000

/**
 * Analytics yields to ingest. Decisions are the promise and analytics is derived from them, so on a busy machine the
 * builders come first: while more than `LEDGER_ANALYTICS_YIELD_BACKLOG` captures wait for them (stream lag and
 * pending, over every shard), `step` is skipped (the guarded step yields undefined) — but never for longer than a
 * minute in a row — and catches up once they drain.
 */
export const yieldingToIngest = <A, E, R>(name: string, step: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const shards = yield* CaptureShards
    const { analytics } = yield* LedgerConfig
    let deferringSince: number | undefined
    return Effect.gen(function*() {
      if (analytics.yieldBacklog > 0) {
        // the stream's figures (every shard's) are advisory here: when they cannot be read, analytics runs
        const backlog = yield* shardStats(shards).pipe(
          Effect.map((each) => {
            const stats = totalStats(each)
            return (stats.lag ?? 0) + stats.pending
          }),
          Effect.orElseSucceed(() => 0)
        )
        const now = yield* Clock.currentTimeMillis
        if (backlog > analytics.yieldBacklog && now - (deferringSince ??= now) < MAX_DEFERRAL_MS) {
          yield* Metric.update(Metric.withAttributes(deferredRounds, { fiber: name }), 1)
          return
        }
      }
      deferringSince = undefined
      return yield* step
    })
  })
