/**
 * The gateway role: the gateway server with its routes, the provider connection pools, the Responses chains the
 * gateway keeps itself and the capture publisher. Shutdown runs in reverse: the server stops accepting and lets in-flight calls finish (their
 * captures are offered), then the publisher drains its queue to the stream or the spool, then the pools close.
 */
import { Layer } from "effect"
import { CapturePublisher } from "../src/capture/CapturePublisher.ts"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"
import { GatewayRoutesLive } from "../src/gateway/GatewayRoutesLive.ts"
import { GatewayServer, GatewayWorker } from "../src/gateway/GatewayServer.ts"
import { ResponseChains } from "../src/gateway/responses/ResponseChains.ts"
import { Upstreams } from "../src/providers/Upstreams.ts"

export const GatewayLive = GatewayServer.layer.pipe(
  Layer.provide(GatewayRoutesLive),
  Layer.provideMerge(Layer.mergeAll(CapturePublisher.layer, Upstreams.layer, ResponseChains.layer))
)

/**
 * Gateway worker `index` of `count` (src/gatewayThreadMain.ts): the same role on the shared port, with a spool of its own
 * and the Responses chains shared with the other workers.
 */
export const gatewayWorkerLive = (worker: { readonly index: number; readonly count: number }) =>
  Layer.unwrap(LedgerConfig.useSync((config) =>
    GatewayServer.layer.pipe(
      Layer.provide(GatewayRoutesLive),
      Layer.provideMerge(Layer.mergeAll(
        CapturePublisher.layerFor(worker),
        Upstreams.layer,
        ResponseChains.layerShared(`ledger-response-chains:${config.gatewayPort}`)
      )),
      Layer.provide(Layer.succeed(GatewayWorker, worker))
    )
  ))
