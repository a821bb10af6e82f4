/**
 * The MCP surface on the API port (docs/ARCHITECTURE.md, "Surfaces"; docs/configuration.md):
 *
 *   POST /mcp                                          streamable HTTP (stateless; GET/DELETE answer 405)
 *   GET  /.well-known/oauth-protected-resource/mcp     RFC 9728 metadata (and the root variant)
 *   + the authorization server's routes (./oauth/OAuthRoutes.ts)
 *
 * Order of checks on /mcp: Host/Origin against DNS rebinding (loopback names and the public URL's host), then the
 * bearer token (a Personal Access Token or an OAuth access token bound to this resource), then the protocol.
 */
import { Effect, Layer } from "effect"
import { type Headers, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Authenticator, bearerToken } from "../auth/Authenticator.ts"
import { addressOf } from "../auth/browser.ts"
import { LedgerConfig, type LedgerSettings } from "../config/LedgerConfig.ts"
import { tokenKind } from "../auth/Credentials.ts"
import { McpServer } from "./McpServer.ts"
import { OAuthRoutes } from "../oauth/OAuthRoutes.ts"
import { OAuthStore, OAuthSweeper } from "../auth/OAuthStore.ts"
import { LEDGER_SCOPE, mcpUrls, protectedResourceMetadata } from "../oauth/urls.ts"

const LOOPBACK_HOSTNAMES = ["localhost", "127.0.0.1", "[::1]"]
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "[::]"])

/** Hostnames a browser may legitimately use to reach this server (port-agnostic, like the SDK's host validation). */
export const allowedHostnames = (config: LedgerSettings): ReadonlySet<string> => {
  const names = new Set(LOOPBACK_HOSTNAMES)
  names.add(new URL(config.publicUrl).hostname.toLowerCase())
  if (!WILDCARD_HOSTS.has(config.host)) names.add(hostnameOf(config.host.includes(":") ? `[${config.host}]` : config.host) ?? "")
  return names
}

const hostnameOf = (authority: string): string | undefined => {
  try {
    return new URL(`http://${authority}`).hostname.toLowerCase()
  } catch {
    return undefined
  }
}

const originHostname = (origin: string): string | undefined => {
  try {
    return new URL(origin).hostname.toLowerCase()
  } catch {
    return undefined
  }
}

/** Why the request's Host or Origin is refused, if it is. */
export const rebindingProblem = (headers: Headers.Headers, allowed: ReadonlySet<string>): string | undefined => {
  const host = headers.host === undefined ? undefined : hostnameOf(headers.host)
  if (host === undefined || !allowed.has(host)) return `Host ${headers.host ?? "(missing)"} is not allowed`
  const origin = headers.origin
  if (origin !== undefined && !allowed.has(originHostname(origin) ?? "")) return `Origin ${origin} is not allowed`
  return undefined
}

const jsonRpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers })

/** Quoted-string content of an auth-param (RFC 9110 §11.2). */
const quote = (value: string) => value.replace(/["\\]/g, "\\$&")

export const McpEndpointRoutes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const config = yield* LedgerConfig
  const authenticator = yield* Authenticator
  const mcp = yield* McpServer
  const urls = mcpUrls(config.publicUrl)
  const allowed = allowedHostnames(config)

  const cors = (origin: string | undefined): Record<string, string> =>
    origin === undefined ? {} : {
      "access-control-allow-origin": origin,
      "access-control-expose-headers": "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version",
      vary: "Origin"
    }

  const challenge = (refusal?: string) =>
    `Bearer resource_metadata="${urls.resourceMetadata}", scope="${LEDGER_SCOPE}"` +
    (refusal === undefined ? "" : `, error="invalid_token", error_description="${quote(refusal)}"`)

  const handle = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const problem = rebindingProblem(request.headers, allowed)
    if (problem !== undefined) {
      return jsonRpcError(403, -32000, `Forbidden: ${problem} (DNS rebinding protection; set LEDGER_PUBLIC_URL to the URL clients use)`)
    }
    const headers = cors(request.headers.origin)
    if (request.method === "OPTIONS") {
      return HttpServerResponse.empty({
        status: 204,
        headers: {
          ...headers,
          "access-control-allow-methods": "POST, OPTIONS",
          "access-control-allow-headers": "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID",
          "access-control-max-age": "600"
        }
      })
    }
    if (request.method !== "POST") {
      return jsonRpcError(405, -32000, "Method not allowed: this server is stateless, send JSON-RPC messages with POST", {
        ...headers,
        allow: "POST, OPTIONS"
      })
    }
    const token = bearerToken(request.headers.authorization)
    if (token === undefined) {
      return jsonRpcError(401, -32001, "Unauthorized: send Authorization: Bearer <Personal Access Token or OAuth access token>", {
        ...headers,
        "www-authenticate": challenge()
      })
    }
    // a PAT or an OAuth access token; any other kind is refused as "a Personal Access Token is required"
    const principal = yield* authenticator.authenticate(token, tokenKind(token) === "oauth" ? "oauth" : "pat", addressOf(request))
    const response = yield* mcp.handle(principal, yield* HttpServerRequest.toWeb(request))
    return HttpServerResponse.setHeaders(HttpServerResponse.fromWeb(response), headers)
  }, (effect, request) =>
    Effect.catchTags(effect, {
      Unauthorized: (error) =>
        Effect.succeed(jsonRpcError(401, -32001, `Unauthorized: ${error.message}`, {
          ...cors(request.headers.origin),
          "www-authenticate": challenge(error.message)
        })),
      TooManyAttempts: (error) =>
        Effect.succeed(jsonRpcError(429, -32003, `Too many requests: ${error.message}`, {
          ...cors(request.headers.origin),
          "retry-after": String(error.retryAfter)
        })),
      DatabaseUnavailable: () =>
        Effect.succeed(jsonRpcError(503, -32002, "The ledger database is unavailable; retry shortly", {
          ...cors(request.headers.origin),
          "retry-after": "5"
        })),
      RequestParseError: () => Effect.succeed(jsonRpcError(400, -32700, "Parse error: unreadable request", cors(request.headers.origin)))
    }))

  yield* router.add("*", "/mcp", handle)

  const metadata = HttpServerResponse.jsonUnsafe(protectedResourceMetadata(urls), {
    headers: { "access-control-allow-origin": "*", "cache-control": "max-age=300" }
  })
  yield* router.add("GET", "/.well-known/oauth-protected-resource/mcp", metadata)
  yield* router.add("GET", "/.well-known/oauth-protected-resource", metadata)
}))

/** Everything MCP adds to the API server: `/mcp`, the resource metadata, the authorization server and its sweeper. */
export const McpRoutesLive = Layer.mergeAll(McpEndpointRoutes, OAuthRoutes, OAuthSweeper).pipe(
  Layer.provide(Layer.mergeAll(McpServer.layer, OAuthStore.layer))
)
