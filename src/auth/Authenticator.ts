/**
 * Resolves a bearer token to a principal, for every surface.
 *
 * Results (accepted and refused) are cached for `CACHE_TTL_MS` so the gateway's hot path authenticates with a map
 * lookup; the TTL bounds how long a revoked or expired token keeps working (a revocation takes effect within 5
 * seconds on every surface). Beyond the cache, the last principal the store accepted for each token is remembered
 * with its time: the gateway keeps serving it while the store does not answer (`gatewayAuthStaleMs`;
 * docs/ARCHITECTURE.md, "The promises"). A refusal forgets it.
 *
 * Token guessing is limited per connecting address: after `BAD_TOKENS_PER_MINUTE` refused tokens in a minute, an
 * address's tokens are refused with TooManyAttempts before any lookup — except a token the store accepted before,
 * so a working client behind the same address goes on. Counted in this process's memory, like the sign-in limits.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { DatabaseUnavailable, TooManyAttempts, Unauthorized } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { type BearerKind, Credentials, tokenKind } from "./Credentials.ts"
import { slidingWindow } from "./SignInLimiter.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

export const CACHE_TTL_MS = 2_000
const CACHE_MAX_ENTRIES = 10_000
export const BAD_TOKENS_PER_MINUTE = 30

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
  /**
   * Resolves a token that must be of `kind`; any other kind, unknown, revoked or expired token is Unauthorized. With
   * the caller's `address`, a refusal counts against it, and an address over its limit gets TooManyAttempts.
   */
  authenticate(
    token: string | undefined,
    kind: BearerKind,
    address?: string
  ): Effect.Effect<Principal, Unauthorized | TooManyAttempts | DatabaseUnavailable>
  /** Synchronous cache probe for the hot path: a cached verdict, or undefined when the store must be asked. */
  cached(token: string, kind: BearerKind, now: number): Principal | Unauthorized | undefined
  /**
   * The principal the store last accepted for the token, if it did so within the stale bound: what may be served
   * while the store is asked again (or does not answer). Undefined for tokens never accepted, or refused since.
   */
  lastAccepted(token: string, kind: BearerKind, now: number): Principal | undefined
  /** For the hot path: the seconds an address must wait before a token the store never accepted is looked up (0: none). */
  guessingWait(token: string, kind: BearerKind, address: string, now: number): number
  /** For the hot path: counts a refused token against its address. */
  refusedFrom(address: string, now: number): void
}>()("ledger/auth/Authenticator") {
  static readonly layer = Layer.effect(
    Authenticator,
    Effect.gen(function*() {
      const credentials = yield* Credentials
      // OAuth access tokens are bound to this server's MCP endpoint (RFC 8707 resource = audience)
      const config = yield* LedgerConfig
      const oauthAudience = `${config.publicUrl}/mcp`
      const cache = new BoundedMap<string, CacheEntry>(CACHE_MAX_ENTRIES)
      // the least recently confirmed token is forgotten first
      const accepted = new BoundedMap<string, { readonly principal: Principal; readonly at: number }>(CACHE_MAX_ENTRIES)
      const refusals = slidingWindow(60_000)

      const refusedFrom = (address: string, now: number) => refusals.add(address, now)
      const guessingWait = (token: string, kind: BearerKind, address: string, now: number) => {
        const recent = refusals.recent(address, now)
        if (recent.length < BAD_TOKENS_PER_MINUTE) return 0
        const known = accepted.get(token)
        return known !== undefined && known.principal.kind === kind ? 0 : refusals.waitFor(recent, now)
      }

      const remember = (token: string, verdict: Verdict, now: number) => {
        cache.set(token, { verdict, until: now + CACHE_TTL_MS })
        if (verdict instanceof Unauthorized) accepted.delete(token)
        else accepted.set(token, { principal: verdict, at: now })
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

      const verdictOf = Effect.fnUntraced(function*(token: string, kind: BearerKind, now: number) {
        const claimed = tokenKind(token)
        if (claimed === undefined) return new Unauthorized({ message: "unknown token" })
        if (claimed !== kind) return new Unauthorized({ message: `a ${KIND_NAME[kind]} is required on this surface` })
        return checkKind(cached(token, kind, now) ?? (yield* lookup(token, now)), kind)
      })

      const authenticate = Effect.fn("Authenticator.authenticate")(function*(token: string | undefined, kind: BearerKind, address?: string) {
        if (token === undefined || token.length === 0) {
          return yield* new Unauthorized({ message: `missing bearer token: send Authorization: Bearer <${KIND_NAME[kind]}>` })
        }
        const now = yield* Clock.currentTimeMillis
        const wait = address === undefined ? 0 : guessingWait(token, kind, address, now)
        if (wait > 0) {
          return yield* new TooManyAttempts({ message: `too many refused tokens from this address: retry in ${wait} s`, retryAfter: wait })
        }
        const verdict = yield* verdictOf(token, kind, now)
        if (verdict instanceof Unauthorized) {
          if (address !== undefined) refusedFrom(address, now)
          return yield* verdict
        }
        return verdict
      })

      return Authenticator.of({ authenticate, cached, lastAccepted, guessingWait, refusedFrom })
    })
  )
}
