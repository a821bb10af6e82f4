/**
 * A role of `ledger serve` in a worker thread of its own (docs/ARCHITECTURE.md, "Roles and processes"): the builder
 * thread of the default process, and the gateway workers of `--gateway-workers N`. The thread's entry module builds
 * its own store and stream clients from the same environment (src/ops/roleThreadMain.ts) and runs until told to stop.
 *
 * Supervised: a thread that exits unexpectedly is started again, with backoff. Its metrics join this process's
 * `/metrics` (Health.addSource), and it may ask for the whole process's (a gateway worker answers `/metrics` on the
 * gateway port with them). Shutdown asks it to stop — it finishes what it is doing within its own bounds — and cuts
 * it after `grace`.
 */
import { Clock, Deferred, Duration, Effect, type Scope } from "effect"
import { Worker } from "node:worker_threads"
import { backoff } from "../supervision/supervise.ts"
import { Health } from "../serving/Health.ts"
import { ThreadExited } from "../domain/errors.ts"

/** 1 s, doubling, at most 30 s between restarts */
const RESTART_BACKOFF = backoff(Duration.seconds(1), Duration.seconds(30))

/** Messages from the main thread to a role thread. */
export type ToRoleThread =
  | { readonly type: "metrics"; readonly id: number }
  | { readonly type: "process-metrics"; readonly id: number; readonly text: string }
  | { readonly type: "stop" }
/** Messages from a role thread to the main thread. */
export type FromRoleThread =
  | { readonly type: "metrics"; readonly id: number; readonly text: string }
  | { readonly type: "process-metrics"; readonly id: number }

export interface RoleThreadOptions {
  /** for logs: "builder", "gateway worker 1" */
  readonly name: string
  /** the thread's entry module */
  readonly entry: URL
  /** handed to the thread as `workerData` */
  readonly data?: unknown
  /** how long a thread asked to stop may take before it is terminated */
  readonly grace: Duration.Input
}

/**
 * Runs a role thread for as long as the scope lasts: started, restarted when it exits on its own, its metrics added
 * to the process's. Returns the thread's metrics ("" while it is not running).
 */
export const runRoleThread = Effect.fnUntraced(function*(options: RoleThreadOptions): Effect.fn.Return<Effect.Effect<string>, never, Health | Scope.Scope> {
  const health = yield* Health
  const context = yield* Effect.context<never>()
  let worker: Worker | null = null
  let stopping = false
  let nextRequest = 0
  const answers = new Map<number, (text: string) => void>()

  /** Runs one thread until it exits; fails when it exits without having been asked to. */
  const runThread = Effect.callback<void, { readonly code: number; readonly failure: Error | null }>((resume) => {
    const thread = new Worker(options.entry, { workerData: options.data })
    worker = thread
    thread.on("message", (message: FromRoleThread) => {
      if (message.type === "metrics") {
        answers.get(message.id)?.(message.text)
        answers.delete(message.id)
      } else {
        void Effect.runPromiseWith(context)(health.metrics).then((text) =>
          thread.postMessage({ type: "process-metrics", id: message.id, text } satisfies ToRoleThread)
        )
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
          Effect.fail(
            new ThreadExited({
              message: `${options.name} thread exited (code ${code}) after ${Math.round((now - started) / 1000)} s${failure === null ? "" : `: ${failure.stack ?? failure.message}`}`
            })
          )
        )
      )
    )
  })

  const supervised = runOnce.pipe(
    Effect.tapError((error) => Effect.logError(`${options.name} thread stopped unexpectedly; starting it again`, { error: error.message })),
    Effect.retry({ schedule: RESTART_BACKOFF })
  )
  const done = yield* Deferred.make<void>()
  yield* supervised.pipe(Effect.ensuring(Deferred.succeed(done, undefined)), Effect.forkScoped)

  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      stopping = true
      const thread = worker
      if (thread === null) return
      thread.postMessage({ type: "stop" } satisfies ToRoleThread)
      const stopped = yield* Deferred.await(done).pipe(Effect.timeoutOption(options.grace))
      if (stopped._tag === "None") {
        yield* Effect.logWarning(`${options.name} thread did not stop in time; terminating it`)
        yield* Effect.promise(() => thread.terminate())
      }
    })
  )

  const metrics = Effect.callback<string>((resume) => {
    const thread = worker
    if (thread === null) return resume(Effect.succeed(""))
    const id = ++nextRequest
    answers.set(id, (text) => resume(Effect.succeed(text)))
    thread.postMessage({ type: "metrics", id } satisfies ToRoleThread)
    return Effect.sync(() => answers.delete(id))
  })
  yield* health.addSource(metrics)
  return metrics
})
