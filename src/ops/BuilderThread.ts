/**
 * The builder role in a worker thread of its own (docs/ARCHITECTURE.md, "Roles and processes"): in the default
 * process, the decision builders and analytics parse, derive and write off the event loop that answers gateway calls.
 * Measured in bench/serve: on the shared loop they added 12–18 ms to the gateway's p99 at 500 calls/s.
 *
 * The thread (src/builderThread.ts) builds its own store and stream clients from the same environment and runs
 * until told to stop. It is supervised: a thread that exits unexpectedly is started again, with backoff. Its
 * metrics join this process's `/metrics` (Health.addSource). Shutdown asks it to stop — a batch being built commits
 * or stays pending in the stream for the next builder — and cuts it after SHUTDOWN_GRACE.
 */
import { Clock, Context, Deferred, Duration, Effect, Layer } from "effect"
import { Worker } from "node:worker_threads"
import { backoff } from "../supervision/supervise.ts"
import { Health } from "./Health.ts"

const SHUTDOWN_GRACE = Duration.seconds(30)
/** 1 s, doubling, at most 30 s between restarts */
const RESTART_BACKOFF = backoff(Duration.seconds(1), Duration.seconds(30))

/** Messages between the threads. */
export type ToBuilderThread = { readonly type: "metrics"; readonly id: number } | { readonly type: "stop" }
export type FromBuilderThread = { readonly type: "metrics"; readonly id: number; readonly text: string } | { readonly type: "started" }

export class BuilderThread extends Context.Service<BuilderThread, {
  /** the thread's Prometheus exposition ("" while it is not running) */
  readonly metrics: Effect.Effect<string>
}>()("ledger/ops/BuilderThread") {
  static readonly layer = Layer.effect(
    BuilderThread,
    Effect.gen(function*() {
      const health = yield* Health
      let worker: Worker | null = null
      let stopping = false
      let nextRequest = 0
      const answers = new Map<number, (text: string) => void>()

      /** Runs one thread until it exits; fails when it exits without having been asked to. */
      const runThread = Effect.callback<void, { readonly code: number; readonly failure: Error | null }>((resume) => {
        const thread = new Worker(new URL("../builderThread.ts", import.meta.url))
        worker = thread
        thread.on("message", (message: FromBuilderThread) => {
          if (message.type === "metrics") {
            answers.get(message.id)?.(message.text)
            answers.delete(message.id)
          }
        })
        let failure: Error | null = null
        thread.on("error", (error) => (failure = error))
        thread.on("exit", (code) => {
          worker = null
          for (const answer of answers.values()) answer("")
          answers.clear()
          resume(stopping ? Effect.void : Effect.fail({ code, failure }))
        })
      })
      const runOnce = Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        return yield* runThread.pipe(
          Effect.catch(({ code, failure }) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Effect.fail(new Error(`builder thread exited (code ${code}) after ${Math.round((now - started) / 1000)} s${failure === null ? "" : `: ${failure.stack ?? failure.message}`}`))
            )
          )
        )
      })

      const supervise = runOnce.pipe(
        Effect.tapError((error) => Effect.logError("builder thread stopped unexpectedly; starting it again", { error: error.message })),
        Effect.retry({ schedule: RESTART_BACKOFF })
      )
      const done = yield* Deferred.make<void>()
      yield* supervise.pipe(Effect.ensuring(Deferred.succeed(done, undefined)), Effect.forkScoped)
      yield* Effect.logInfo("builders and analytics run in a thread of their own")

      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          stopping = true
          const thread = worker
          if (thread === null) return
          thread.postMessage({ type: "stop" } satisfies ToBuilderThread)
          const stopped = yield* Deferred.await(done).pipe(Effect.timeoutOption(SHUTDOWN_GRACE))
          if (stopped._tag === "None") {
            yield* Effect.logWarning("builder thread did not stop in time; terminating it")
            yield* Effect.promise(() => thread.terminate())
          }
        })
      )

      const metrics = Effect.callback<string>((resume) => {
        const thread = worker
        if (thread === null) return resume(Effect.succeed(""))
        const id = ++nextRequest
        answers.set(id, (text) => resume(Effect.succeed(text)))
        thread.postMessage({ type: "metrics", id } satisfies ToBuilderThread)
        return Effect.sync(() => answers.delete(id))
      })
      yield* health.addSource(metrics)
      return BuilderThread.of({ metrics })
    })
  )
}
