/**
 * The thread side of RoleThread: launches a role's layer on this worker thread's event loop, answers the main
 * thread's requests for this thread's metrics, stops when asked (or when the main thread goes), and can ask the main
 * thread for the whole process's metrics.
 */
import { Cause, Effect, Fiber, Layer } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { parentPort } from "node:worker_threads"
import type { FromRoleThread, ToRoleThread } from "./RoleThread.ts"

const port = parentPort
const answers = new Map<number, (text: string) => void>()
let nextRequest = 0

/** The whole process's metrics (every thread's), from the main thread. */
export const processMetrics = Effect.callback<string>((resume) => {
  if (port === null) return resume(Effect.succeed(""))
  const id = ++nextRequest
  answers.set(id, (text) => resume(Effect.succeed(text)))
  port.postMessage({ type: "process-metrics", id } satisfies FromRoleThread)
  return Effect.sync(() => answers.delete(id))
})

/**
 * Runs `layer` until the main thread asks this thread to stop. `exposition` turns this thread's metrics into what
 * the main thread merges (e.g. a label telling workers apart).
 */
export const launchInRoleThread = (
  name: string,
  layer: Layer.Layer<never, unknown>,
  exposition: (text: string) => string = (text) => text
) => {
  if (port === null) throw new Error(`the ${name} thread runs as a worker thread of ledger serve`)
  let stopping = false
  const fiber = Effect.runFork(Layer.launch(layer).pipe(
    Effect.tapCause((cause) => Effect.logError(`${name} thread failed`, { cause: Cause.pretty(cause) })),
    Effect.annotateLogs({ thread: name })
  ))
  // the layers ended on their own (a failure at start): exit, for the main thread to start the thread again
  fiber.addObserver(() => {
    if (!stopping) process.exit(1)
  })
  port.on("message", (message: ToRoleThread) => {
    if (message.type === "metrics") {
      void Effect.runPromise(PrometheusMetrics.format()).then((text) =>
        port.postMessage({ type: "metrics", id: message.id, text: exposition(text) } satisfies FromRoleThread)
      )
    } else if (message.type === "process-metrics") {
      answers.get(message.id)?.(message.text)
      answers.delete(message.id)
    } else {
      stopping = true
      // the layers release their clients; with nothing left on its loop, the thread exits
      void Effect.runPromise(Fiber.interrupt(fiber)).then(() => port.close())
    }
  })
}
