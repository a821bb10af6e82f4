/** Waiting in tests for something another process or fiber does in its own time. */
import { Effect } from "effect"

/** Polls `check` every 100 ms until it holds; dies after `seconds` naming `what` was waited for. */
export const eventually = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, seconds = 60) =>
  Effect.gen(function*() {
    const deadline = Date.now() + seconds * 1000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out after ${seconds} s waiting for ${what}`))
      yield* Effect.sleep("100 millis")
    }
  })
