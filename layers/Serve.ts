/**
 * `ledger serve`: the roles of one process. All three by default; `--roles` picks some, so gateways, builders
 * (one consumer group) and readers scale out independently. Every process answers the ops routes on the
 * API port; the gateway answers them on its own port too. Beside a gateway or the API, builders run in a thread
 * of their own when the database and Redis are external.
 */
import { Layer, Option } from "effect"
import { serveApi } from "../src/api/ApiServer.ts"
import { FirstRunLive } from "../src/ops/FirstRun.ts"
import { Health, OpsRoutes } from "../src/serving/Health.ts"
import { BuilderThread } from "../src/ops/BuilderThread.ts"
import { gatewayWorkers } from "../src/ops/GatewayWorkers.ts"
import { PipelineMetrics } from "../src/ops/PipelineMetrics.ts"
import { ProcessMetrics } from "../src/ops/ProcessMetrics.ts"
import { ServeControlLive } from "../src/ops/ServeControl.ts"
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
  Layer.mergeAll(Health.layer, PipelineMetrics.layer, ProcessMetrics.layer("main")).pipe(
    Layer.provideMerge(Layer.mergeAll(StoreLive, CaptureStreamLive)),
    Layer.provideMerge(config)
  )

export const CoreLive = coreWith(PlatformLive)

/**
 * The builder role beside a gateway or the API: in a thread of its own, off the loop that answers calls — when its
 * store and stream are servers it can reach on its own (the embedded database and the in-process stream live in
 * this thread, so in embedded mode it shares it).
 */
const builderBeside = Layer.unwrap(LedgerConfig.useSync((config): Layer.Layer<never, never, Layer.Success<typeof CoreLive>> =>
  Option.isSome(config.databaseUrl) && Option.isSome(config.redisUrl) ? BuilderThread.layer : BuilderLive
))

/** The gateway on this thread, or in worker threads sharing its port (`--gateway-workers`, LEDGER_GATEWAY_WORKERS). */
const gatewayRole = (workers: number | undefined) =>
  Layer.unwrap(LedgerConfig.useSync((config): Layer.Layer<never, Error, Layer.Success<typeof CoreLive>> => {
    const count = workers ?? config.gatewayWorkers
    return count > 1 ? gatewayWorkers(count) : GatewayLive
  }))

export const serveLayer = (roles: ReadonlySet<Role>, options: { readonly gatewayWorkers?: number } = {}) =>
  Layer.mergeAll(
    // every process answers the ops routes on the API port; the API role adds REST and MCP
    serveApi(roles.has("api") ? ApiRoutesLive : OpsRoutes),
    roles.has("gateway") ? gatewayRole(options.gatewayWorkers) : Layer.empty,
    !roles.has("builder") ? Layer.empty : roles.has("gateway") || roles.has("api") ? builderBeside : BuilderLive,
    roles.has("api") || roles.has("gateway") ? FirstRunLive : Layer.empty,
    // in embedded mode the command line's `admin` commands run here (the database is this process's alone)
    ServeControlLive
  ).pipe(Layer.provide(CoreLive))
