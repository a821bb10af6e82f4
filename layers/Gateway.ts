/**
 * The gateway role: the gateway server with its routes, the provider connection pools, the Responses chains the
 * gateway keeps itself and the capture publisher. Shutdown runs in reverse: the server stops accepting and lets in-flight calls finish (their
 * captures are offered), then the publisher drains its queue to the stream or the spool, then the pools close.
 */
import { Layer } from "effect"
import { CapturePublisher } from "../src/capture/CapturePublisher.ts"
import { GatewayRoutesLive } from "../src/gateway/GatewayRoutesLive.ts"
import { GatewayServer } from "../src/gateway/GatewayServer.ts"
import { ResponseChains } from "../src/gateway/responses/ResponseChains.ts"
import { Upstreams } from "../src/providers/Upstreams.ts"

export const GatewayLive = GatewayServer.layer.pipe(
  Layer.provide(GatewayRoutesLive),
  Layer.provideMerge(Layer.mergeAll(CapturePublisher.layer, Upstreams.layer, ResponseChains.layer))
)
