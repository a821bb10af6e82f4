/**
 * Gateway Key authentication on the hot path: a call waits for the credential store only for a key it has never seen
 * accepted. A known key whose cached verdict has expired is served its last accepted verdict at once while the store
 * is asked again in the background, so a revocation still takes effect within seconds, and a database outage fails no
 * call of a known key (up to `gatewayAuthStaleMs`; docs/ARCHITECTURE.md, "The promises") — counted, and logged when
 * it starts and ends.
 */
import { Cause, type Context, Effect, Exit, Metric } from "effect"
import type * as Http from "node:http"
import { type Authenticator, bearerToken } from "../auth/Authenticator.ts"
import { type DatabaseUnavailable, TooManyAttempts, Unauthorized } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError } from "../providers/index.ts"

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

type AuthFailure = Unauthorized | TooManyAttempts | DatabaseUnavailable

/** The refusal in a failed lookup (as opposed to the store not answering). */
const refusalIn = (cause: Cause.Cause<AuthFailure>): Unauthorized | TooManyAttempts | undefined => {
  const error = Cause.findErrorOption(cause)
  return error._tag === "Some" && (error.value instanceof Unauthorized || error.value instanceof TooManyAttempts) ? error.value : undefined
}

const unauthorized = (message: string) => gatewayError(401, message, "invalid_api_key", null, "authentication_error")
const tooManyAttempts = (seconds: number) =>
  gatewayError(429, `too many refused keys from this address: retry in ${seconds} s`, "rate_limited", null, "rate_limit_error")
const refusalError = (refused: Unauthorized | TooManyAttempts) =>
  refused instanceof TooManyAttempts ? tooManyAttempts(refused.retryAfter) : unauthorized(refused.message)

/** How long after a failed background check a key's verdict is asked for again (the store is down: no storm). */
const RECHECK_AFTER_FAILURE_MS = 1_000

const staleVerdicts = Metric.counter("ledger_gateway_auth_stale_total", {
  description: "calls accepted on a Gateway Key's last verdict because the credential store did not answer",
  incremental: true
})
const storeUnavailable = Metric.gauge("ledger_gateway_auth_store_unavailable", {
  description: "1 while the gateway's last credential check failed (the store is unreachable): known keys are served their last verdict"
})

/**
 * The gateway's authentication: the Authenticator's cached verdict at once; for a known key, its last accepted
 * verdict at once while the store is asked again; otherwise the store's answer. Requests that miss the cache with
 * the same key while its lookup runs wait for that one lookup, so a cache entry expiring under load costs one
 * store query, not one per concurrent request.
 */
export const gatewayAuth = (authenticator: Authenticator["Service"], context: Context.Context<never>): GatewayAuth => {
  const lookups = new Map<string, Array<AuthWaiter>>()
  /** keys checked again in the background, and when a key whose check failed may be checked again */
  const rechecks = new Map<string, number>()
  const run = Effect.runCallbackWith(context)
  let unavailableSince: number | null = null
  let servedStale = 0

  const storeAnswered = () => {
    if (unavailableSince === null) return
    run(Effect.logInfo("gateway authentication: the credential store answers again; no more stale verdicts", {
      stale_calls: servedStale,
      outage_ms: Date.now() - unavailableSince
    }))
    unavailableSince = null
    servedStale = 0
    storeUnavailable.updateUnsafe(0, context)
  }

  const storeFailed = (cause: Cause.Cause<unknown>) => {
    if (unavailableSince !== null) return
    unavailableSince = Date.now()
    storeUnavailable.updateUnsafe(1, context)
    run(Effect.logWarning("gateway authentication: credential store unavailable; known Gateway Keys are served their last verdict", {
      cause: Cause.pretty(cause)
    }))
  }

  const settle = (token: string, exit: Exit.Exit<Principal, AuthFailure>) => {
    const waiters = lookups.get(token) ?? []
    lookups.delete(token)
    if (Exit.isSuccess(exit)) {
      storeAnswered()
      for (const waiter of waiters) waiter.onPrincipal(exit.value)
      return
    }
    const refused = refusalIn(exit.cause)
    if (refused !== undefined) storeAnswered()
    else storeFailed(exit.cause)
    const refusal = refused !== undefined
      ? refusalError(refused)
      : gatewayError(503, "the credential store is unavailable; try again shortly", "service_unavailable", null, "api_error")
    for (const waiter of waiters) waiter.onRefused(refusal)
  }

  /** Asks the store again about a key served its last verdict; a refusal (revoked) lands in the cache. */
  const recheck = (token: string, now: number) => {
    const due = rechecks.get(token)
    if (due !== undefined && (due === Infinity || now < due)) return
    rechecks.set(token, Infinity)
    run(authenticator.authenticate(token, "gateway"), {
      onExit: (exit) => {
        if (Exit.isFailure(exit) && refusalIn(exit.cause) === undefined) {
          rechecks.set(token, Date.now() + RECHECK_AFTER_FAILURE_MS)
          storeFailed(exit.cause)
        } else {
          rechecks.delete(token)
          storeAnswered()
        }
      }
    })
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
    const now = Date.now()
    const verdict = authenticator.cached(token, "gateway", now)
    if (verdict !== undefined && !(verdict instanceof Unauthorized)) return onPrincipal(verdict)
    const address = req.socket.remoteAddress ?? "unknown"
    const wait = authenticator.guessingWait(token, "gateway", address, now)
    if (wait > 0) return onRefused(tooManyAttempts(wait))
    if (verdict !== undefined) {
      authenticator.refusedFrom(address, now)
      return onRefused(unauthorized(verdict.message))
    }
    const known = authenticator.lastAccepted(token, "gateway", now)
    if (known !== undefined) {
      recheck(token, now)
      if (unavailableSince !== null) {
        servedStale++
        staleVerdicts.updateUnsafe(1, context)
      }
      return onPrincipal(known)
    }
    const waiting = lookups.get(token)
    if (waiting !== undefined) {
      waiting.push({ onPrincipal, onRefused })
      return
    }
    lookups.set(token, [{ onPrincipal, onRefused }])
    run(authenticator.authenticate(token, "gateway", address), { onExit: (exit) => settle(token, exit) })
  }
}
