/**
 * How the analytics fibers run (DESIGN §7): one step at a time, every `interval`; a step that fails — the database
 * is down, a bug on odd data — is logged and counted, and the loop restarts it with capped exponential backoff
 * instead of dying. The fiber belongs to its layer's scope, so SIGTERM interrupts it between statements.
 */
import { Cause, Duration, Effect, Metric, Schedule } from "effect"

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
