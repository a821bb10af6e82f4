/**
 * The API server (LEDGER_API_PORT): REST `/v1`, MCP `/mcp`, `/.well-known/*`, `/docs` and the ops routes,
 * all on Effect's HTTP router. Each surface contributes its routes as a layer; every request is access-logged
 * and every error response carries a JSON body (AccessLog).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { createServer } from "node:http"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { AccessLogLive } from "./AccessLog.ts"

const MAX_PATH_PARAMETER_LENGTH = 1024

/** Serves the given route layers on the API port. */
export const serveApi = <E, R>(routes: Layer.Layer<never, E, R>) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* LedgerConfig
    return HttpRouter.serve(Layer.merge(routes, AccessLogLive), {
      disableListenLog: true,
      disableLogger: true,
      // path parameters (agent ids) are validated by their schemas; the router only bounds them
      routerConfig: { maxParamLength: MAX_PATH_PARAMETER_LENGTH }
    }).pipe(
      Layer.provide(NodeHttpServer.layer(() => createServer({ keepAliveTimeout: 65_000 }), { port: config.apiPort, host: config.host })),
      Layer.tap(() => Effect.logInfo(`api listening on http://${config.host}:${config.apiPort}`))
    )
  }))
