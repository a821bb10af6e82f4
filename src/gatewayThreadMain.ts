/**
 * A gateway worker of `ledger serve --gateway-workers N` (src/ops/GatewayWorkers.ts starts them): the gateway role on
 * this thread's own event loop, listening on the shared gateway port, with its own store and stream clients built from
 * the same environment, its own capture spool, and this thread's process metrics. Its `/metrics` on the gateway port
 * answer with the whole process's; its own series carry `gateway_worker`.
 */
import { Layer } from "effect"
import { workerData } from "node:worker_threads"
import { CaptureStreamLive } from "../layers/Capture.ts"
import { gatewayWorkerLive } from "../layers/Gateway.ts"
import { PlatformLive } from "../layers/Platform.ts"
import { StoreLive } from "../layers/Store.ts"
import { withLabel } from "./serving/exposition.ts"
import { Health } from "./serving/Health.ts"
import { launchInRoleThread, processMetrics } from "./ops/inRoleThread.ts"
import { ProcessMetrics } from "./ops/ProcessMetrics.ts"

const worker = workerData as { readonly index: number; readonly count: number }

launchInRoleThread(
  `gateway-${worker.index}`,
  Layer.mergeAll(gatewayWorkerLive(worker), ProcessMetrics.layer(`gateway-${worker.index}`)).pipe(
    Layer.provide(Health.layerInThread(processMetrics)),
    Layer.provide(Layer.mergeAll(StoreLive, CaptureStreamLive)),
    Layer.provide(PlatformLive)
  ),
  (text) => withLabel(text, "gateway_worker", String(worker.index))
)
