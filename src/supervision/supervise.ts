/**
 * How the long-running fibers run (docs/ARCHITECTURE.md, "Roles and processes"): the capture publisher, the builders'
 * consumers and reclaimer, the analytics fibers, the planner statistics, the builder thread and the watcher. Each is
 * started by its layer for the life of the layer's scope, keeps going through failures — logged, counted, and
 * started again after a capped, jittered exponential backoff — and stops when the scope closes (SIGTERM).
 *
 * One recipe for every wait after a failure, on Effect's `Schedule` (and so on `Clock`: `TestClock` drives it in tests).
 */
import { Cause, Clock, Duration, Effect, type Fiber, Metric, Schedule, type Scope } from "effect"

/** Capped exponential backoff: `base`, doubling, at most `cap`; jittered, so that many processes do not retry in step. */
export const backoff = (base: Duration.Input, cap: Duration.Input) =>
  Schedule.min([Schedule.exponential(base), Schedule.spaced(cap)]).pipe(Schedule.jittered)

/** Restarts of a fiber that failed: quick at first, then every 30 s at most. */
export const RESTART = backoff(Duration.millis(500), Duration.seconds(30))

export const fiberFailures = Metric.counter("ledger_fiber_failures_total", {
  description: "failures of the long-running fibers (by fiber), each followed by a restart with backoff",
  incremental: true
})

/**
 * Runs `loop` in a fiber of the current scope: when it fails or dies, the cause is logged and counted, and it runs
 * again after `restart`'s delay; interruption stops it. A loop that ends on its own is not started again. Returns
 * the fiber (the publisher joins its own to drain at shutdown).
 */
export const supervise = <E, R>(
  name: string,
  loop: Effect.Effect<unknown, E, R>,
  restart: Schedule.Schedule<unknown, Cause.Cause<E>> = RESTART
): Effect.Effect<Fiber.Fiber<void>, never, R | Scope.Scope> =>
  loop.pipe(
    Effect.sandbox,
    Effect.tapError((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.void
        : Effect.logError(`${name} failed; starting it again`, { cause: Cause.pretty(cause) }).pipe(
          Effect.andThen(Metric.update(Metric.withAttributes(fiberFailures, { fiber: name }), 1))
        )
    ),
    Effect.retry({ schedule: restart, while: (cause) => !Cause.hasInterruptsOnly(cause) }),
    Effect.asVoid,
    Effect.catchCause(() => Effect.void),
    Effect.forkScoped
  )

/** `step` every `interval` (after each step ends), supervised. */
export const every = <E, R>(name: string, step: Effect.Effect<unknown, E, R>, interval: Duration.Input) =>
  supervise(name, step.pipe(Effect.andThen(Effect.sleep(interval)), Effect.forever))

/**
 * A sweep (deletes of what expired) every `interval`, supervised: what it deleted is logged when it deleted anything,
 * a failed round is logged as a warning and retried the next time.
 */
export const sweepEvery = <R>(
  name: string,
  sweep: Effect.Effect<Record<string, number>, { readonly message: string }, R>,
  interval: Duration.Input
) =>
  every(
    name,
    sweep.pipe(
      Effect.tap((deleted) => (Object.values(deleted).some((n) => n > 0) ? Effect.logInfo(`${name}: deleted`, deleted) : Effect.void)),
      Effect.catch((error) => Effect.logWarning(`${name} failed; the next round retries`, { error: error.message }))
    ),
    interval
  )

/**
 * A backoff stepped by hand, for a loop that keeps working while it waits (the publisher moves its queue into the
 * spool until the next replay is due): `next` is the delay before the next attempt, `reset` starts over after a
 * success.
 */
export const steppedBackoff = Effect.fnUntraced(function*(schedule: Schedule.Schedule<Duration.Duration>) {
  let step = yield* Schedule.toStep(schedule)
  return {
    next: Effect.gen(function*() {
      const [, delay] = yield* step(yield* Clock.currentTimeMillis, undefined)
      return Duration.toMillis(delay)
    }).pipe(Effect.orDie),
    reset: Effect.gen(function*() {
      step = yield* Schedule.toStep(schedule)
    })
  }
})
