/**
 * Gateway Key authentication on the hot path.
 */
import { Cause, type Context, Effect, Exit } from "effect"
import type * as Http from "node:http"
import { type Authenticator, bearerToken } from "../api/Authenticator.ts"
import { type DatabaseUnavailable, Unauthorized } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError } from "./providers/index.ts"

/**
 * Authenticates a request's Gateway Key, then calls `onPrincipal` — or `onRefused` with the 401/503 to send. The key
 * comes as `Authorization: Bearer`, or where `apiKeyHeader` allows it (Anthropic clients' default) as `x-api-key`.
 */
export type GatewayAuth = (
  req: Http.IncomingMessage,
  apiKeyHeader: boolean,
  onPrincipal: (principal: Principal) => void,
  onRefused: (error: ProviderError) => void
) => void

interface AuthWaiter {
  readonly onPrincipal: (principal: Principal) => void
  readonly onRefused: (error: ProviderError) => void
}

const unauthorized = (message: string) => gatewayError(401, message, "invalid_api_key", null, "authentication_error")

/**
 * The gateway's authentication: the Authenticator's cached verdict at once, or the store's answer on a miss.
 * Requests that miss the cache with the same key while its lookup runs wait for that one lookup, so a cache
 * entry expiring under load costs one store query, not one per concurrent request.
 */
export const gatewayAuth = (authenticator: Authenticator["Service"], context: Context.Context<never>): GatewayAuth => {
  const lookups = new Map<string, Array<AuthWaiter>>()
  const run = Effect.runCallbackWith(context)

  const settle = (token: string, exit: Exit.Exit<Principal, Unauthorized | DatabaseUnavailable>) => {
    const waiters = lookups.get(token) ?? []
    lookups.delete(token)
    if (Exit.isSuccess(exit)) {
      for (const waiter of waiters) waiter.onPrincipal(exit.value)
      return
    }
    const error = Cause.findErrorOption(exit.cause)
    const refusal = error._tag === "Some" && error.value instanceof Unauthorized
      ? unauthorized(error.value.message)
      : gatewayError(503, "the credential store is unavailable; try again shortly", "service_unavailable", null, "api_error")
    if (refusal.status === 503) {
      run(Effect.logWarning("gateway authentication failed: credential store unavailable", { cause: Cause.pretty(exit.cause) }))
    }
    for (const waiter of waiters) waiter.onRefused(refusal)
  }

  return (req, apiKeyHeader, onPrincipal, onRefused) => {
    const xApiKey = apiKeyHeader ? req.headers["x-api-key"] : undefined
    const token = bearerToken(req.headers.authorization) ?? (typeof xApiKey === "string" && xApiKey !== "" ? xApiKey : undefined)
    if (token === undefined) {
      return onRefused(gatewayError(
        401,
        `missing bearer token: send Authorization: Bearer <Gateway Key>${apiKeyHeader ? " (or x-api-key: <Gateway Key>)" : ""}`,
        "missing_api_key",
        null,
        "authentication_error"
      ))
    }
    const verdict = authenticator.cached(token, "gateway", Date.now())
    if (verdict !== undefined) return verdict instanceof Unauthorized ? onRefused(unauthorized(verdict.message)) : onPrincipal(verdict)
    const waiting = lookups.get(token)
    if (waiting !== undefined) {
      waiting.push({ onPrincipal, onRefused })
      return
    }
    lookups.set(token, [{ onPrincipal, onRefused }])
    run(authenticator.authenticate(token, "gateway"), { onExit: (exit) => settle(token, exit) })
  }
}
