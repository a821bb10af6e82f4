/**
 * The gateway's HTTP server (LEDGER_GATEWAY_PORT).
 *
 * A plain `node:http` server rather than Effect's router: the router was measured costing a quarter of the proxy's
 * throughput (bench/notes/gateway.md, "The bare proxy inside Effect's router"), and this path is the caller's
 * latency. The server's lifetime is owned by
 * the layer (closed on scope exit, in-flight requests finish); handlers run Effect code only off the hot path.
 */
import { Context, Effect, Layer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { Duplex } from "node:stream"
import { limitedHttpServer } from "../serving/httpServer.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { Health } from "../serving/Health.ts"
import { gatewayMetrics } from "./GatewayMetrics.ts"
import { providerError } from "../providers/errors.ts"
import type { ProviderError } from "../providers/types.ts"
import { uuidv7 } from "./uuidv7.ts"

/** How long shutdown waits for calls in flight (streams can run for minutes) before cutting them. */
const SHUTDOWN_GRACE_MS = 30_000
const SWEEP_MS = 100

export type RouteHandler = (req: Http.IncomingMessage, res: Http.ServerResponse) => void

/** Takes over a request to upgrade the connection (a WebSocket), keyed by path. */
export type UpgradeHandler = (req: Http.IncomingMessage, socket: Duplex, head: Buffer) => void

/** A chat-completions error `{"error":{"message","type","param","code"}}` with its status; `type` follows the status unless given. */
export const gatewayError = (
  status: number,
  message: string,
  code: string | null,
  param: string | null = null,
  type?: string
): ProviderError => providerError(status, message, type, code, param)

/** Writes a JSON body with its length (no chunked encoding for small answers). */
export const sendJson = (res: Http.ServerResponse, status: number, body: unknown, headers?: Http.OutgoingHttpHeaders) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/**
 * Routes of the gateway surface other than ops, keyed by `METHOD path`, and the paths that take a connection
 * upgrade (`GET` with `Upgrade: websocket`).
 */
export class GatewayRoutes extends Context.Service<GatewayRoutes, {
  readonly routes: ReadonlyMap<string, RouteHandler>
  readonly upgrades: ReadonlyMap<string, UpgradeHandler>
}>()("ledger/gateway/GatewayRoutes") {}

/**
 * Which gateway worker this is (`ledger serve --gateway-workers N`): workers listen on the same port with
 * `SO_REUSEPORT`, and the kernel spreads connections over them. A single gateway is worker 0 of 1.
 */
export const GatewayWorker = Context.Reference<{ readonly index: number; readonly count: number }>("ledger/gateway/GatewayWorker", {
  defaultValue: () => ({ index: 0, count: 1 })
})

export class GatewayServer extends Context.Service<GatewayServer, { readonly port: number }>()("ledger/gateway/GatewayServer") {
  static readonly layer = Layer.effect(
    GatewayServer,
    Effect.gen(function*() {
      const config = yield* LedgerConfig
      const worker = yield* GatewayWorker
      const health = yield* Health
      const { routes, upgrades } = yield* GatewayRoutes
      const context = yield* Effect.context<never>()
      const run = Effect.runPromiseWith(context)
      const metrics = gatewayMetrics(context)

      const ops: Record<string, RouteHandler> = {
        "GET /healthz": (_req, res) => sendJson(res, 200, { status: "ok" }),
        "GET /readyz": (_req, res) =>
          void run(health.readiness).then((r) => sendJson(res, r.ready ? 200 : 503, r)),
        "GET /metrics": (_req, res) =>
          void run(health.metrics).then((text) => {
            res.writeHead(200, { "content-type": "text/plain; version=0.0.4" })
            res.end(text)
          })
      }

      const all = new Map<string, RouteHandler>([...Object.entries(ops), ...routes])
      const paths = new Map<string, Array<string>>()
      for (const key of all.keys()) {
        const [method, path] = key.split(" ") as [string, string]
        paths.set(path, [...(paths.get(path) ?? []), method])
      }

      let closing = false
      const handler = (req: Http.IncomingMessage, res: Http.ServerResponse) => {
        const t0 = performance.now()
        if (closing) res.setHeader("connection", "close")
        const url = req.url ?? "/"
        const q = url.indexOf("?")
        const path = q === -1 ? url : url.slice(0, q)
        const key = `${req.method} ${path}`
        const route = all.get(key)
        // unknown paths share one label: metric series must not grow with what callers send
        const label = route !== undefined ? key : "other"
        res.once("close", () => metrics.request(label, res.statusCode, performance.now() - t0))
        // every answer of the API surface carries an id: the routes set their own (a call's is its decision's ledger_id)
        if (route !== undefined) return route(req, res)
        if (path.startsWith("/v1/")) res.setHeader("x-ledger-id", uuidv7(Date.now()))
        const allowed = paths.get(path)
        if (allowed !== undefined) {
          const error = gatewayError(405, `${req.method} is not allowed on ${path}; use ${allowed.join(", ")}`, "method_not_allowed", null, "invalid_request_error")
          return sendJson(res, error.status, error.body, { allow: allowed.join(", ") })
        }
        const error = gatewayError(404, `no route for ${req.method} ${path.slice(0, 200)}`, "not_found", null, "invalid_request_error")
        sendJson(res, error.status, error.body)
      }

      const server = limitedHttpServer(config, handler)
      server.on("upgrade", (req: Http.IncomingMessage, socket: Duplex, head: Buffer) => {
        const url = req.url ?? "/"
        const q = url.indexOf("?")
        const upgrade = upgrades.get(q === -1 ? url : url.slice(0, q))
        if (upgrade !== undefined && req.method === "GET" && req.headers.upgrade?.toLowerCase() === "websocket") return upgrade(req, socket, head)
        const body = JSON.stringify(gatewayError(404, `no upgrade at ${req.method} ${url.slice(0, 200)}`, "not_found", null, "invalid_request_error").body)
        socket.end(`HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
      })
      yield* Effect.acquireRelease(
        Effect.callback<void, Error>((resume) => {
          server.once("error", (error) => resume(Effect.fail(error)))
          server.listen({ port: config.gatewayPort, host: config.host, reusePort: worker.count > 1 }, () => resume(Effect.void))
        }),
        () =>
          Effect.callback<void>((resume) => {
            // Stop accepting and let in-flight calls finish. Keep-alive connections are closed as they go idle
            // (a connection whose call ends after close() would otherwise linger until its keep-alive timeout);
            // calls still running after the grace period are cut (and captured as aborted).
            closing = true
            const sweep = setInterval(() => server.closeIdleConnections(), SWEEP_MS)
            const cut = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS)
            server.close(() => {
              clearInterval(sweep)
              clearTimeout(cut)
              resume(Effect.void)
            })
            server.closeIdleConnections()
          })
      ).pipe(Effect.orDie)
      const port = (server.address() as AddressInfo).port
      yield* Effect.logInfo(`gateway listening on http://${config.host}:${port}`, worker.count > 1 ? { worker: worker.index } : {})
      return GatewayServer.of({ port })
    })
  )
}
