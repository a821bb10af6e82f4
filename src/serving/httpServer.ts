/**
 * The node HTTP server both ports run on, with the slow-client limits of the settings: a client dribbling its
 * headers or its body is cut at `httpHeadersTimeoutMs` / `httpRequestTimeoutMs` (Node checks every second rather
 * than its default 30), and a port holds at most `httpMaxConnections` connections. Idle keep-alive connections
 * close after 65 s, longer than the usual 60 s of load balancers in front.
 */
import * as Http from "node:http"
import type { LedgerSettings } from "../config/LedgerConfig.ts"

const KEEP_ALIVE_MS = 65_000
const CHECK_EVERY_MS = 1_000

export const limitedHttpServer = (
  settings: Pick<LedgerSettings, "httpHeadersTimeoutMs" | "httpRequestTimeoutMs" | "httpMaxConnections">,
  handler?: Http.RequestListener
): Http.Server => {
  const options: Http.ServerOptions = {
    keepAliveTimeout: KEEP_ALIVE_MS,
    headersTimeout: settings.httpHeadersTimeoutMs,
    requestTimeout: settings.httpRequestTimeoutMs,
    connectionsCheckingInterval: CHECK_EVERY_MS
  }
  const server = handler === undefined ? Http.createServer(options) : Http.createServer(options, handler)
  server.maxConnections = settings.httpMaxConnections
  return server
}
