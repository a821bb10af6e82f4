/**
 * The API server (LEDGER_API_PORT): REST `/v1`, MCP `/mcp`, `/.well-known/*`, `/docs` and the ops routes,
 * all on Effect's HTTP router. Each surface contributes its routes as a layer; every request is access-logged
 * and every error response carries a JSON body (AccessLog).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import type { IncomingMessage, ServerResponse } from "node:http"
import { limitedHttpServer } from "../serving/httpServer.ts"
import { LedgerConfig, type LedgerSettings } from "../config/LedgerConfig.ts"
import { AccessLogLive } from "./AccessLog.ts"

const MAX_PATH_PARAMETER_LENGTH = 1024

/**
 * The API's node server. The platform listens before the routes are built and only then adds its request handler;
 * a request that arrived in between (a readiness probe right after start) would wait forever. Until the handler is
 * there, requests get a 503 in the API's error shape with `retry-after`.
 */
const apiServer = (settings: LedgerSettings) => () => {
  const server = limitedHttpServer(settings)
  const starting = (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1", connection: "close" })
    res.end(JSON.stringify({ error: { code: "service_unavailable", message: "the server is starting; try again" } }))
  }
  server.on("request", starting)
  server.on("newListener", (event) => {
    if (event === "request") server.off("request", starting)
  })
  return server
}

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
      Layer.provide(NodeHttpServer.layer(apiServer(config), { port: config.apiPort, host: config.host })),
      Layer.tap(() => Effect.logInfo(`api listening on http://${config.host}:${config.apiPort}`))
    )
  }))
