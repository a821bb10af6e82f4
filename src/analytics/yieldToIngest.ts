/**
 * How the analytics fibers run (DESIGN §7): one step at a time, every `interval`; a step that fails — the database
 * is down, a bug on odd data — is logged and counted, and the loop restarts it with capped exponential backoff
 * instead of dying. The fiber belongs to its layer's scope, so SIGTERM interrupts it between statements.
 */
import { Cause, Clock, Duration, Effect, Metric, Schedule } from "effect"
import { CaptureStream } from "../capture/CaptureStream.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"

export const stepFailures = Metric.counter("ledger_analytics_step_failures_total", {
  description: "Analytics fiber steps that failed and were retried with backoff",
  incremental: true
})

/** 0.5 s, 1 s, 2 s … capped at 30 s; reset by the next successful step. */
const BACKOFF = Schedule.min([Schedule.exponential("500 millis"), Schedule.spaced("30 seconds")])

export const superviseLoop = <E, R>(name: string, step: Effect.Effect<unknown, E, R>, interval: Duration.Input) =>
  step.pipe(
    // defects too: a bug on one odd row must not end analytics for good
    Effect.sandbox,
    Effect.tapError((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.void
        : Effect.logError(`${name} failed; retrying with backoff`, Cause.pretty(cause)).pipe(
          Effect.andThen(Metric.update(Metric.withAttributes(stepFailures, { fiber: name }), 1))
        )
    ),
    Effect.retry({ schedule: BACKOFF, while: (cause) => !Cause.hasInterruptsOnly(cause) }),
    Effect.andThen(Effect.sleep(interval)),
    Effect.forever,
    Effect.forkScoped,
    Effect.asVoid
  )

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
