/**
 * The builder role in a worker thread of its own (docs/ARCHITECTURE.md, "Roles and processes"): in the default
 * process, the decision builders and analytics parse, derive and write off the event loop that answers gateway calls.
 * Measured in bench/serve: on the shared loop they added 12–18 ms to the gateway's p99 at 500 calls/s.
 *
 * The thread (src/builderThreadMain.ts) builds its own store and stream clients from the same environment; RoleThread
 * supervises it, adds its metrics to this process's `/metrics`, and on shutdown asks it to stop — a batch being built
 * commits or stays pending in the stream for the next builder — cutting it after SHUTDOWN_GRACE.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { runRoleThread } from "./RoleThread.ts"

const SHUTDOWN_GRACE = Duration.seconds(30)

export class BuilderThread extends Context.Service<BuilderThread, {
  /** the thread's Prometheus exposition ("" while it is not running) */
  readonly metrics: Effect.Effect<string>
}>()("ledger/ops/BuilderThread") {
  static readonly layer = Layer.effect(
    BuilderThread,
    Effect.gen(function*() {
      const metrics = yield* runRoleThread({ name: "builder", entry: new URL("../builderThreadMain.ts", import.meta.url), grace: SHUTDOWN_GRACE })
      yield* Effect.logInfo("builders and analytics run in a thread of their own")
      return BuilderThread.of({ metrics })
    })
  )
}
