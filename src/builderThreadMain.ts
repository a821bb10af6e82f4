/**
 * The builder thread of the default `ledger serve` (src/ops/BuilderThread.ts starts it): the builder role — decision
 * builders and analytics — on this thread's own event loop, with its own store and stream clients built from the
 * same environment, and this thread's process metrics.
 */
import { Layer } from "effect"
import * as Os from "node:os"
import { BuilderLive } from "../layers/Builder.ts"
import { CaptureStreamLive } from "../layers/Capture.ts"
import { PlatformLive } from "../layers/Platform.ts"
import { StoreLive } from "../layers/Store.ts"
import { launchInRoleThread } from "./ops/inRoleThread.ts"
import { ProcessMetrics } from "./ops/ProcessMetrics.ts"

// Below the gateway's thread for the CPU: when both want a core, the call waiting for its answer goes first (on Linux
// a nice value belongs to the thread that sets it). Lowering needs no privilege; where it fails, the thread runs as is.
try {
  Os.setPriority(Os.constants.priority.PRIORITY_BELOW_NORMAL)
} catch {
  // not supported here
}

launchInRoleThread(
  "builder",
  Layer.mergeAll(BuilderLive, ProcessMetrics.layer("builder")).pipe(
    Layer.provide(Layer.mergeAll(StoreLive, CaptureStreamLive)),
    Layer.provide(PlatformLive)
  )
)
