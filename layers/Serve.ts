/**
 * `ledger serve`: the roles of one process. All three by default; `--roles` picks some, so gateways, builders
 * (one consumer group) and readers scale out independently. Every process answers the ops routes on the
 * API port; the gateway answers them on its own port too.
 */
import { Layer } from "effect"
import { serveApi } from "../src/api/ApiServer.ts"
import { FirstRunLive } from "../src/ops/FirstRun.ts"
import { Health, OpsRoutes } from "../src/ops/Health.ts"
import { PipelineMetrics } from "../src/ops/PipelineMetrics.ts"
import { ApiRoutesLive } from "./Api.ts"
import { BuilderLive } from "./Builder.ts"
import { CaptureStreamLive } from "./Capture.ts"
import { GatewayLive } from "./Gateway.ts"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"
import { PlatformLive } from "./Platform.ts"
import { StoreLive } from "./Store.ts"

export const ROLES = ["gateway", "builder", "api"] as const
export type Role = typeof ROLES[number]

/** Services every role shares — store, capture stream, health, the pipeline gauges every `/metrics` shows — over
 * the given configuration (tests pass fixed settings). */
export const coreWith = <E, R>(config: Layer.Layer<LedgerConfig, E, R>) =>
  Layer.mergeAll(Health.layer, PipelineMetrics.layer).pipe(
    Layer.provideMerge(Layer.mergeAll(StoreLive, CaptureStreamLive)),
    Layer.provideMerge(config)
  )

export const CoreLive = coreWith(PlatformLive)

export const serveLayer = (roles: ReadonlySet<Role>) =>
  Layer.mergeAll(
    // every process answers the ops routes on the API port; the API role adds REST and MCP
    serveApi(roles.has("api") ? ApiRoutesLive : OpsRoutes),
    roles.has("gateway") ? GatewayLive : Layer.empty,
    roles.has("builder") ? BuilderLive : Layer.empty,
    roles.has("api") || roles.has("gateway") ? FirstRunLive : Layer.empty
  ).pipe(Layer.provide(CoreLive))
