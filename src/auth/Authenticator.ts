/**
 * Resolves a bearer token to a principal, for every surface.
 *
 * Results (accepted and refused) are cached for `CACHE_TTL_MS` so the gateway's hot path authenticates with a map
 * lookup; the TTL bounds how long a revoked or expired token keeps working (a revocation takes effect within 5
 * seconds on every surface). Beyond the cache, the last principal the store accepted for each token is remembered
 * with its time: the gateway keeps serving it while the store does not answer (`gatewayAuthStaleMs`;
 * docs/ARCHITECTURE.md, "The promises"). A refusal forgets it.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { DatabaseUnavailable, Unauthorized } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { type BearerKind, Credentials, tokenKind } from "./Credentials.ts"

export const CACHE_TTL_MS = 2_000
const CACHE_MAX_ENTRIES = 10_000

type Verdict = Principal | Unauthorized

interface CacheEntry {
  readonly verdict: Verdict
  readonly until: number
}

const KIND_NAME: Record<BearerKind, string> = { pat: "Personal Access Token", gateway: "Gateway Key", oauth: "OAuth access token" }

/** Extracts the token of an `Authorization: Bearer …` header value. */
export const bearerToken = (header: string | undefined | null): string | undefined => {
  if (!header) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match ? match[1] : undefined
}

export class Authenticator extends Context.Service<Authenticator, {
  /** Resolves a token that must be of `kind`; any other kind, unknown, revoked or expired token is Unauthorized. */
  authenticate(token: string | undefined, kind: BearerKind): Effect.Effect<Principal, Unauthorized | DatabaseUnavailable>
  /** Synchronous cache probe for the hot path: a cached verdict, or undefined when the store must be asked. */
  cached(token: string, kind: BearerKind, now: number): Principal | Unauthorized | undefined
  /**
   * The principal the store last accepted for the token, if it did so within the stale bound: what may be served
   * while the store is asked again (or does not answer). Undefined for tokens never accepted, or refused since.
   */
  lastAccepted(token: string, kind: BearerKind, now: number): Principal | undefined
}>()("ledger/api/Authenticator") {
  static readonly layer = Layer.effect(
    Authenticator,
    Effect.gen(function*() {
      const credentials = yield* Credentials
      // OAuth access tokens are bound to this server's MCP endpoint (RFC 8707 resource = audience)
      const config = yield* LedgerConfig
      const oauthAudience = `${config.publicUrl}/mcp`
      const cache = new Map<string, CacheEntry>()
      const accepted = new Map<string, { readonly principal: Principal; readonly at: number }>()

      const remember = (token: string, verdict: Verdict, now: number) => {
        if (cache.size >= CACHE_MAX_ENTRIES) cache.delete(cache.keys().next().value!)
        cache.set(token, { verdict, until: now + CACHE_TTL_MS })
        // insertion order is recency order: the least recently confirmed token is forgotten first
        accepted.delete(token)
        if (verdict instanceof Unauthorized) return
        if (accepted.size >= CACHE_MAX_ENTRIES) accepted.delete(accepted.keys().next().value!)
        accepted.set(token, { principal: verdict, at: now })
      }

      const lastAccepted = (token: string, kind: BearerKind, now: number) => {
        const entry = accepted.get(token)
        return entry !== undefined && entry.principal.kind === kind && now - entry.at <= config.gatewayAuthStaleMs ? entry.principal : undefined
      }

      const checkKind = (verdict: Verdict, kind: BearerKind): Verdict =>
        verdict instanceof Unauthorized || verdict.kind === kind
          ? verdict
          : new Unauthorized({ message: `a ${KIND_NAME[kind]} is required on this surface` })

      const cached = (token: string, kind: BearerKind, now: number) => {
        const entry = cache.get(token)
        if (entry === undefined) return undefined
        if (entry.until <= now) {
          cache.delete(token)
          return undefined
        }
        return checkKind(entry.verdict, kind)
      }

      const lookup = Effect.fnUntraced(function*(token: string, now: number) {
        const record = yield* credentials.resolve(token)
        const verdict: Verdict = record === undefined
          ? new Unauthorized({ message: "unknown token" })
          : record.revoked_at !== null
          ? new Unauthorized({ message: "token revoked" })
          : record.expires_at !== null && record.expires_at.getTime() <= now
          ? new Unauthorized({ message: "token expired" })
          : record.audience !== null && record.audience !== oauthAudience
          ? new Unauthorized({ message: "token issued for another resource" })
          : {
            tenant_id: record.tenant_id,
            workspace_id: record.workspace_id,
            user_id: record.user_id,
            role: record.role,
            kind: record.kind,
            token_id: record.token_id
          }
        remember(token, verdict, now)
        return verdict
      })

      const authenticate = Effect.fn("Authenticator.authenticate")(function*(token: string | undefined, kind: BearerKind) {
        if (token === undefined || token.length === 0) {
          return yield* new Unauthorized({ message: `missing bearer token: send Authorization: Bearer <${KIND_NAME[kind]}>` })
        }
        const claimed = tokenKind(token)
        if (claimed === undefined) return yield* new Unauthorized({ message: "unknown token" })
        if (claimed !== kind) return yield* new Unauthorized({ message: `a ${KIND_NAME[kind]} is required on this surface` })
        const now = yield* Clock.currentTimeMillis
        const verdict = checkKind(cached(token, kind, now) ?? (yield* lookup(token, now)), kind)
        if (verdict instanceof Unauthorized) return yield* verdict
        return verdict
      })

      return Authenticator.of({ authenticate, cached, lastAccepted })
    })
  )
}
