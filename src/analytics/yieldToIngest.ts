/**
 * Analytics yields to ingest (see `yieldingToIngest`). The analytics fibers themselves run supervised
 * (src/supervision/supervise.ts).
 */
import { Clock, Effect, Metric } from "effect"
import { CaptureStream } from "../capture/CaptureStream.ts"
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
 * pending), `step` is skipped — but never for longer than a minute in a row — and catches up once they drain.
 */
export const yieldingToIngest = <A, E, R>(name: string, step: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const stream = yield* CaptureStream
    const { analytics } = yield* LedgerConfig
    let deferringSince: number | undefined
    return Effect.gen(function*() {
      if (analytics.yieldBacklog > 0) {
        // the stream's figures are advisory here: when they cannot be read, analytics runs
        const backlog = yield* stream.stats.pipe(
          Effect.map((stats) => (stats.lag ?? 0) + stats.pending),
          Effect.orElseSucceed(() => 0)
        )
        const now = yield* Clock.currentTimeMillis
        if (backlog > analytics.yieldBacklog && now - (deferringSince ??= now) < MAX_DEFERRAL_MS) {
          yield* Metric.update(Metric.withAttributes(deferredRounds, { fiber: name }), 1)
          return
        }
      }
      deferringSince = undefined
      yield* step
    })
  })
