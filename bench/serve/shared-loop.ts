/**
 * The default process as it was before builders got a thread of their own: every role — gateway, builders and
 * analytics, API — on one event loop. The baseline of bench/serve/run.ts; started with the same environment as
 * `ledger serve`, stopped by SIGTERM.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { BuilderLive } from "../../layers/Builder.ts"
import { GatewayLive } from "../../layers/Gateway.ts"
import { CoreLive } from "../../layers/Serve.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import { FirstRunLive } from "../../src/ops/FirstRun.ts"

NodeRuntime.runMain(Layer.launch(
  Layer.mergeAll(serveApi(ApiRoutesLive), GatewayLive, BuilderLive, FirstRunLive).pipe(Layer.provide(CoreLive))
))
