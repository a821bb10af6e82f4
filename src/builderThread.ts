/**
 * The builder thread of the default `ledger serve` (src/ops/BuilderThread.ts starts it): the builder role — decision
 * builders and analytics — on this thread's own event loop, with its own store and stream clients built from the
 * same environment, and this thread's process metrics. It answers the main thread's requests for its metrics and
 * stops when asked (or when the main thread goes).
 */
import { Cause, Effect, Fiber, Layer } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as Os from "node:os"
import { parentPort } from "node:worker_threads"
import { BuilderLive } from "../layers/Builder.ts"
import { CaptureStreamLive } from "../layers/Capture.ts"
import { PlatformLive } from "../layers/Platform.ts"
import { StoreLive } from "../layers/Store.ts"
import type { FromBuilderThread, ToBuilderThread } from "./ops/BuilderThread.ts"
import { ProcessMetrics } from "./ops/ProcessMetrics.ts"

const port = parentPort
if (port === null) throw new Error("src/builderThread.ts runs as a worker thread of ledger serve")

// Below the gateway's thread for the CPU: when both want a core, the call waiting for its answer goes first (on Linux
// a nice value belongs to the thread that sets it). Lowering needs no privilege; where it fails, the thread runs as is.
try {
  Os.setPriority(Os.constants.priority.PRIORITY_BELOW_NORMAL)
} catch {
  // not supported here
}

const BuilderThreadLive = Layer.mergeAll(BuilderLive, ProcessMetrics.layer("builder")).pipe(
  Layer.provide(Layer.mergeAll(StoreLive, CaptureStreamLive)),
  Layer.provide(PlatformLive)
)

let stopping = false
const fiber = Effect.runFork(Layer.launch(BuilderThreadLive).pipe(
  Effect.tapCause((cause) => Effect.logError("builder thread failed", { cause: Cause.pretty(cause) })),
  Effect.annotateLogs({ thread: "builder" })
))
// the layers ended on their own (a failure at start): exit, for the main thread to start the thread again
fiber.addObserver(() => {
  if (!stopping) process.exit(1)
})

port.on("message", (message: ToBuilderThread) => {
  if (message.type === "metrics") {
    void Effect.runPromise(PrometheusMetrics.format()).then((text) =>
      port.postMessage({ type: "metrics", id: message.id, text } satisfies FromBuilderThread)
    )
  } else {
    stopping = true
    // the layers release their clients; with nothing left on its loop, the thread exits
    void Effect.runPromise(Fiber.interrupt(fiber)).then(() => port.close())
  }
})
