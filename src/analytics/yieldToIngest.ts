/**
 * Analytics yields to ingest (see `yieldingToIngest`). The analytics fibers themselves run supervised
 * (src/supervision/supervise.ts).
 */
import { Clock, Effect, Metric } from "effect"
import { CaptureShards, shardStats, totalStats } from "../capture/CaptureShards.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"

export const deferredRounds = Metric.counter("ledger_analytics_deferred_rounds_total", {
  description:
    "Times analytics stepped aside because ingest was behind: rounds skipped, and workspaces' batches stopped early (LEDGER_ANALYTICS_YIELD_BACKLOG, LEDGER_ANALYTICS_YIELD_AGE_MS)",
  incremental: true
})

/** The longest run of skipped rounds: behind a saturated ingest, analytics still runs a round at least this often. */
const MAX_DEFERRAL_MS = 60_000

/**
 * Analytics yields to ingest. Decisions are the promise and analytics is derived from them, so on a busy machine the
 * builders come first. Ingest is behind while, over every shard, more than `LEDGER_ANALYTICS_YIELD_BACKLOG` captures
 * wait for the builders (stream lag and pending) or the oldest capture not yet committed arrived more than
 * `LEDGER_ANALYTICS_YIELD_AGE_MS` ago. Meanwhile the guarded step is skipped (it yields undefined), and a step
 * that runs may stop early where it can (`stopEarly` says when ingest has fallen behind) — but never for longer than
 * a minute in a row: then a step runs whole, and analytics catches up once ingest does.
 *
 * The age matters on a machine that analytics and the builders fill together: captures do not pile up there, each
 * batch just takes longer to build, and a materialiser round would otherwise run its seconds of batches to the end
 * (bench/notes/pipeline.md, "Analytics yields by the age of what waits").
 */
export const yieldingToIngest = <A, E, R>(name: string, step: (stopEarly: Effect.Effect<boolean>) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const shards = yield* CaptureShards
    const { analytics } = yield* LedgerConfig
    const deferred = Metric.withAttributes(deferredRounds, { fiber: name })
    // the stream's figures are advisory here: when they cannot be read, analytics runs
    const behind = analytics.yieldBacklog > 0 || analytics.yieldAgeMs > 0
      ? shardStats(shards).pipe(
        Effect.map((each) => {
          const stats = totalStats(each)
          return (analytics.yieldBacklog > 0 && (stats.lag ?? 0) + stats.pending > analytics.yieldBacklog) ||
            (analytics.yieldAgeMs > 0 && (stats.oldest_waiting_ms ?? 0) > analytics.yieldAgeMs)
        }),
        Effect.orElseSucceed(() => false)
      )
      : Effect.succeed(false)
    const stopEarly = Effect.tap(behind, (yes) => yes ? Metric.update(deferred, 1) : Effect.void)
    let deferringSince: number | undefined
    return Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const overdue = now - (deferringSince ?? now) >= MAX_DEFERRAL_MS
      if (!overdue && (yield* behind)) {
        deferringSince ??= now
        yield* Metric.update(deferred, 1)
        return
      }
      deferringSince = undefined
      return yield* step(overdue ? Effect.succeed(false) : stopEarly)
    })
  })
