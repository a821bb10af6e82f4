/**
 * The authorization server's records (tables of migration 0004_oauth): clients (registered ones, and public clients
 * known by their metadata document, keyed by its URL and written when a user signs in for one), authorizations (a
 * sign-in ticket, then a one-time authorization code) and issued tokens. Secrets — client secrets, tickets, codes,
 * tokens — are stored only as sha256 hashes. Everything runs as the control role (`TenantSql.control`).
 *
 * A grant is one authorization: every token issued from its code and from the refresh tokens that follow shares
 * its `authorization_id`, so a replayed code or refresh token revokes the whole grant (OAuth 2.1 §4.3.1, §6.1).
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { MemberRole } from "../domain/principal.ts"
import { generateToken, hashToken, TOKEN_PREFIX } from "./Credentials.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { sweepEvery } from "../supervision/supervise.ts"

export const ACCESS_TOKEN_TTL_SECONDS = 3_600
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 86_400
/**
 * A grant ends this long after consent, however often it was refreshed: no token outlives it, and the user signs in
 * again (so an account disabled at an OpenID Connect provider, which the ledger cannot ask, loses access by then).
 */
export const GRANT_MAX_AGE_DAYS = 90
/** sign-in ticket and authorization code lifetime (RFC 6749 §4.1.2: at most 10 minutes) */
export const CODE_TTL_SECONDS = 600
/** how long after expiry tokens and authorizations are kept before the sweeper deletes them */
export const SWEEP_GRACE_SECONDS = 86_400
/** a client never used is forgotten this long after it registered (MCP clients register right before they authorize) */
export const OAUTH_CLIENT_UNUSED_SECONDS = 86_400
/** a client is forgotten this long after its last use once no grant of it is left; it registers again */
export const OAUTH_CLIENT_IDLE_DAYS = 90

const REFRESH_PREFIX = "ldg_ort_"
const CLIENT_SECRET_PREFIX = "ldg_ocs_"

const random = (prefix: string) => prefix + Crypto.randomBytes(32).toString("base64url")

export type ClientAuthMethod = "none" | "client_secret_post" | "client_secret_basic"

export interface OAuthClient {
  readonly client_id: string
  readonly client_secret_hash: Buffer | null
  readonly token_endpoint_auth_method: ClientAuthMethod
  readonly redirect_uris: ReadonlyArray<string>
  readonly metadata: Record<string, unknown>
}

export interface AuthorizationRequest {
  readonly client_id: string
  readonly redirect_uri: string
  readonly code_challenge: string
  readonly state: string | null
  readonly scope: string
  readonly resource: string
}

export interface Authorization extends AuthorizationRequest {
  readonly authorization_id: string
  readonly tenant_id: string
  readonly user_id: string
  readonly workspace_id: string | null
  readonly expires_at: Date
  readonly consented_at: Date | null
  readonly code_used_at: Date | null
}

export interface Membership {
  readonly workspace_id: string
  readonly name: string
  readonly role: MemberRole
}

export interface IssuedTokens {
  readonly access_token: string
  readonly refresh_token: string
  readonly expires_in: number
  readonly scope: string
}

/**
 * A sign-in to the app itself through the OpenID Connect provider (SSO), rather than for an MCP client: where the
 * browser goes once signed in. It shares the provider's one registered callback with the clients' logins.
 */
export interface AppOidcSignIn {
  readonly app: { readonly next: string }
}

export interface OidcLogin {
  readonly state: string
  /** the value of the cookie that ties the login to the browser that started it */
  readonly browser: string
  readonly nonce: string
  readonly codeVerifier: string
}

/** Why a code or refresh token was refused (the token endpoint answers `invalid_grant` with it). */
export type GrantRefusal = "unknown" | "expired" | "replayed" | "revoked"

interface TokenRow {
  readonly token_id: string
  readonly authorization_id: string
  readonly client_id: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly scope: string
  readonly audience: string
  readonly expires_at: Date
  readonly revoked_at: Date | null
  readonly rotated_at: Date | null
}

export class OAuthStore extends Context.Service<OAuthStore, {
  registerClient(input: {
    readonly token_endpoint_auth_method: ClientAuthMethod
    readonly redirect_uris: ReadonlyArray<string>
    readonly metadata: Record<string, unknown>
  }): Effect.Effect<{ readonly client_id: string; readonly client_secret: string | null; readonly issued_at: number }, DatabaseUnavailable>
  client(clientId: string): Effect.Effect<OAuthClient | undefined, DatabaseUnavailable>
  /** The workspaces the user is a member of, with the user's email. */
  memberships(tenantId: string, userId: string): Effect.Effect<{ readonly email: string; readonly workspaces: ReadonlyArray<Membership> }, DatabaseUnavailable>
  /**
   * Records a signed-in user's authorization request; returns the ticket that carries it to the consent step, or
   * undefined when the client is gone (the sweeper deleted it since it was looked up). `documentClient`, a public
   * client known by its metadata document (its client_id is the document's URL): its row is written first, or
   * refreshed with what the document says now, in the same transaction.
   */
  startAuthorization(
    request: AuthorizationRequest,
    user: { readonly tenant_id: string; readonly user_id: string },
    documentClient?: Pick<OAuthClient, "client_id" | "redirect_uris" | "metadata">
  ): Effect.Effect<string | undefined, DatabaseUnavailable>
  /** The pending authorization of a ticket (unexpired, not yet answered). */
  pendingAuthorization(ticket: string): Effect.Effect<Authorization | undefined, DatabaseUnavailable>
  /** Consent for a workspace: closes the ticket and returns the one-time authorization code. */
  approve(ticket: string, workspaceId: string): Effect.Effect<{ readonly code: string; readonly authorization: Authorization } | undefined, DatabaseUnavailable>
  /**
   * Starts a sign-in at the OpenID Connect provider for a checked authorization request: the state, nonce and PKCE
   * verifier to send the user there with (CODE_TTL_SECONDS to come back).
   */
  startOidcLogin(request: AuthorizationRequest | AppOidcSignIn): Effect.Effect<OidcLogin, DatabaseUnavailable>
  /**
   * The login a provider's callback carries the state of, once (used up whatever the outcome): "unknown" when
   * unknown, expired or used, "elsewhere" when `browser` is not the cookie of the browser that started it.
   */
  finishOidcLogin(
    state: string,
    browser: string | undefined
  ): Effect.Effect<(OidcLogin & { readonly request: AuthorizationRequest | AppOidcSignIn }) | "unknown" | "elsewhere", DatabaseUnavailable>
  /**
   * The ledger user of an account at a provider: the one it is linked to, else the one user with `email` (only when
   * given: a verified address) in any tenant, which the account is then linked to — unless that user is linked to
   * another account of the provider already.
   */
  oidcUser(
    issuer: string,
    subject: string,
    email: string | undefined
  ): Effect.Effect<{ readonly tenant_id: string; readonly user_id: string } | "none" | "several" | "linked-elsewhere", DatabaseUnavailable>
  /** Closes the ticket without a code (the user denied). */
  deny(ticket: string): Effect.Effect<Authorization | undefined, DatabaseUnavailable>
  /**
   * Redeems a code once: `check` runs on the authorization (client, redirect URI, PKCE) before the code is spent,
   * so a failed check leaves it usable. A code presented again revokes every token issued from it.
   */
  redeemCode<E>(
    code: string,
    check: (authorization: Authorization) => Effect.Effect<void, E>
  ): Effect.Effect<IssuedTokens | GrantRefusal, E | DatabaseUnavailable>
  /** Rotates a refresh token of the client: a new pair, the old token spent; a spent token revokes the grant. */
  refresh(refreshToken: string, clientId: string): Effect.Effect<IssuedTokens | GrantRefusal, DatabaseUnavailable>
  /** RFC 7009: revokes an access token, or a refresh token with its whole grant; tokens of other clients are ignored. */
  revoke(token: string, clientId: string): Effect.Effect<void, DatabaseUnavailable>
  /**
   * Deletes what can no longer be used, SWEEP_GRACE_SECONDS after it expired: tokens (a spent refresh token
   * presented again within its lifetime still revokes its grant), and authorizations — unanswered sign-ins,
   * unredeemed codes, grants — once no token descends from them (a code presented again while its tokens live
   * still revokes them). Then clients with no authorization or token left: never used, OAUTH_CLIENT_UNUSED_SECONDS
   * after they registered; used, OAUTH_CLIENT_IDLE_DAYS after their last use. OpenID Connect logins not finished
   * in time go at once.
   */
  readonly sweep: Effect.Effect<{ readonly tokens: number; readonly authorizations: number; readonly clients: number }, DatabaseUnavailable>
}>()("ledger/auth/OAuthStore") {
  static readonly layer = Layer.effect(
    OAuthStore,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const control = tenantSql.control

      const registerClient = Effect.fn("OAuthStore.registerClient")(function*(input: {
        readonly token_endpoint_auth_method: ClientAuthMethod
        readonly redirect_uris: ReadonlyArray<string>
        readonly metadata: Record<string, unknown>
      }) {
        const client_id = `ldg_client_${Crypto.randomBytes(16).toString("base64url")}`
        const client_secret = input.token_endpoint_auth_method === "none" ? null : random(CLIENT_SECRET_PREFIX)
        yield* control(ScopedSql.use((sql) =>
          sql`INSERT INTO oauth_clients (client_id, client_secret_hash, token_endpoint_auth_method, redirect_uris, metadata)
            VALUES (${client_id}, ${client_secret === null ? null : hashToken(client_secret)}, ${input.token_endpoint_auth_method},
                    ${input.redirect_uris}::text[], ${JSON.stringify(input.metadata)}::jsonb)`
        ))
        return { client_id, client_secret, issued_at: Math.floor((yield* Clock.currentTimeMillis) / 1000) }
      })

      const client = Effect.fn("OAuthStore.client")(function*(clientId: string) {
        const rows = yield* control(ScopedSql.use((sql) =>
          sql<OAuthClient>`SELECT client_id, client_secret_hash, token_endpoint_auth_method, redirect_uris, metadata
            FROM oauth_clients WHERE client_id = ${clientId}`
        ))
        return rows[0]
      })

      const memberships = Effect.fn("OAuthStore.memberships")(function*(tenantId: string, userId: string) {
        return yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [user] = yield* sql<{ email: string }>`SELECT email FROM users WHERE tenant_id = ${tenantId} AND user_id = ${userId}`
          const workspaces = yield* sql<Membership>`
            SELECT m.workspace_id, w.name, m.role FROM memberships m JOIN workspaces w ON w.workspace_id = m.workspace_id
            WHERE m.tenant_id = ${tenantId} AND m.user_id = ${userId} ORDER BY w.name`
          return { email: user?.email ?? "", workspaces }
        }))
      })

      /** Records that a client was used (at most one write an hour per client: refreshes come hourly). */
      const clientUsed = (clientId: string) =>
        ScopedSql.use((sql) =>
          sql`UPDATE oauth_clients SET last_used_at = now()
            WHERE client_id = ${clientId} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 hour')`
        )

      const AUTHORIZATION_COLUMNS = `authorization_id, client_id, redirect_uri, code_challenge, state, scope, resource,
        tenant_id, user_id, workspace_id, expires_at, consented_at, code_used_at`

      const startAuthorization = Effect.fn("OAuthStore.startAuthorization")(function*(
        request: AuthorizationRequest,
        user: { readonly tenant_id: string; readonly user_id: string },
        documentClient?: Pick<OAuthClient, "client_id" | "redirect_uris" | "metadata">
      ) {
        const ticket = random("")
        return yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          if (documentClient !== undefined && documentClient.client_id === request.client_id) {
            // never over a client with a secret (a registered client's id is never a URL; this keeps it so)
            yield* sql`INSERT INTO oauth_clients (client_id, client_secret_hash, token_endpoint_auth_method, redirect_uris, metadata)
              VALUES (${documentClient.client_id}, NULL, 'none', ${documentClient.redirect_uris}::text[], ${JSON.stringify(documentClient.metadata)}::jsonb)
              ON CONFLICT (client_id) DO UPDATE SET redirect_uris = EXCLUDED.redirect_uris, metadata = EXCLUDED.metadata
                WHERE oauth_clients.client_secret_hash IS NULL`
          }
          // from the client's row, locked: a sweep deleting it meanwhile leaves nothing to insert (rather than a
          // foreign-key error)
          const inserted = yield* sql`INSERT INTO oauth_authorizations (authorization_id, client_id, redirect_uri, code_challenge,
                state, scope, resource, tenant_id, user_id, ticket_hash, expires_at)
            SELECT ${Crypto.randomUUID()}, c.client_id, ${request.redirect_uri}, ${request.code_challenge}, ${request.state},
                   ${request.scope}, ${request.resource}, ${user.tenant_id}, ${user.user_id}, ${hashToken(ticket)},
                   now() + make_interval(secs => ${CODE_TTL_SECONDS})
            FROM oauth_clients c WHERE c.client_id = ${request.client_id} FOR KEY SHARE
            RETURNING 1`
          if (inserted.length === 0) return undefined
          yield* clientUsed(request.client_id)
          return ticket
        }))
      })

      const pendingAuthorization = Effect.fn("OAuthStore.pendingAuthorization")(function*(ticket: string) {
        const rows = yield* control(ScopedSql.use((sql) =>
          sql<Authorization>`SELECT ${sql.literal(AUTHORIZATION_COLUMNS)} FROM oauth_authorizations
            WHERE ticket_hash = ${hashToken(ticket)} AND consented_at IS NULL AND expires_at > now()`
        ))
        return rows[0]
      })

      const approve = Effect.fn("OAuthStore.approve")(function*(ticket: string, workspaceId: string) {
        const code = random("")
        const rows = yield* control(ScopedSql.use((sql) =>
          sql<Authorization>`UPDATE oauth_authorizations a SET workspace_id = m.workspace_id, code_hash = ${hashToken(code)},
              consented_at = now(), expires_at = now() + make_interval(secs => ${CODE_TTL_SECONDS})
            FROM memberships m
            WHERE a.ticket_hash = ${hashToken(ticket)} AND a.consented_at IS NULL AND a.expires_at > now()
              AND m.tenant_id = a.tenant_id AND m.user_id = a.user_id AND m.workspace_id::text = ${workspaceId}
            RETURNING ${sql.literal(AUTHORIZATION_COLUMNS.split(",").map((c) => `a.${c.trim()}`).join(", "))}`
        ))
        return rows[0] === undefined ? undefined : { code, authorization: rows[0] }
      })

      const deny = Effect.fn("OAuthStore.deny")(function*(ticket: string) {
        const rows = yield* control(ScopedSql.use((sql) =>
          sql<Authorization>`UPDATE oauth_authorizations SET consented_at = now(), expires_at = now()
            WHERE ticket_hash = ${hashToken(ticket)} AND consented_at IS NULL AND expires_at > now()
            RETURNING ${sql.literal(AUTHORIZATION_COLUMNS)}`
        ))
        return rows[0]
      })

      /** Issues an access + refresh token pair in a grant (inside a control transaction). */
      const issue = Effect.fnUntraced(function*(grant: Pick<TokenRow, "authorization_id" | "client_id" | "tenant_id" | "workspace_id" | "user_id" | "scope" | "audience">) {
        const sql = yield* ScopedSql
        const access = generateToken("oauth")
        const refresh = random(REFRESH_PREFIX)
        for (const [kind, token, ttl, prefix] of [
          ["access", access, ACCESS_TOKEN_TTL_SECONDS, TOKEN_PREFIX.oauth],
          ["refresh", refresh, REFRESH_TOKEN_TTL_SECONDS, REFRESH_PREFIX]
        ] as const) {
          yield* sql`INSERT INTO oauth_tokens (token_id, token_hash, kind, authorization_id, client_id, tenant_id, workspace_id,
              user_id, scope, audience, display_prefix, expires_at)
            VALUES (${Crypto.randomUUID()}, ${hashToken(token)}, ${kind}, ${grant.authorization_id}, ${grant.client_id},
              ${grant.tenant_id}, ${grant.workspace_id}, ${grant.user_id}, ${grant.scope}, ${grant.audience},
              ${token.slice(0, prefix.length + 4)},
              LEAST(now() + make_interval(secs => ${ttl}), (SELECT a.consented_at + make_interval(days => ${GRANT_MAX_AGE_DAYS})
                FROM oauth_authorizations a WHERE a.authorization_id = ${grant.authorization_id})))`
        }
        yield* clientUsed(grant.client_id)
        return { access_token: access, refresh_token: refresh, expires_in: ACCESS_TOKEN_TTL_SECONDS, scope: grant.scope }
      })

      const revokeGrant = (authorizationId: string) =>
        ScopedSql.use((sql) =>
          sql`UPDATE oauth_tokens SET revoked_at = now() WHERE authorization_id = ${authorizationId} AND revoked_at IS NULL`
        )

      const redeemCode = <E>(code: string, check: (authorization: Authorization) => Effect.Effect<void, E>) =>
        control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [row] = yield* sql<Authorization & { expired: boolean }>`
            SELECT ${sql.literal(AUTHORIZATION_COLUMNS)}, expires_at <= now() AS expired FROM oauth_authorizations
            WHERE code_hash = ${hashToken(code)} FOR UPDATE`
          if (row === undefined || row.workspace_id === null) return "unknown" as const
          if (row.code_used_at !== null) {
            yield* revokeGrant(row.authorization_id)
            return "replayed" as const
          }
          if (row.expired) return "expired" as const
          yield* check(row)
          yield* sql`UPDATE oauth_authorizations SET code_used_at = now() WHERE authorization_id = ${row.authorization_id}`
          return yield* issue({ ...row, workspace_id: row.workspace_id, audience: row.resource })
        })).pipe(Effect.withSpan("OAuthStore.redeemCode"))

      const TOKEN_COLUMNS = `token_id, authorization_id, client_id, tenant_id, workspace_id, user_id, scope, audience,
        expires_at, revoked_at, rotated_at`

      const refresh = Effect.fn("OAuthStore.refresh")(function*(refreshToken: string, clientId: string) {
        return yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          // the grant's end counts too: refresh tokens issued before grants had one outlive it
          const [row] = yield* sql<TokenRow & { expired: boolean }>`
            SELECT ${sql.literal(TOKEN_COLUMNS)}, expires_at <= now() OR EXISTS (SELECT 1 FROM oauth_authorizations a
                WHERE a.authorization_id = oauth_tokens.authorization_id
                  AND a.consented_at + make_interval(days => ${GRANT_MAX_AGE_DAYS}) <= now()) AS expired
            FROM oauth_tokens WHERE token_hash = ${hashToken(refreshToken)} AND kind = 'refresh' FOR UPDATE`
          if (row === undefined || row.client_id !== clientId) return "unknown" as const
          if (row.revoked_at !== null) return "revoked" as const
          if (row.rotated_at !== null) {
            yield* revokeGrant(row.authorization_id)
            return "replayed" as const
          }
          if (row.expired) return "expired" as const
          yield* sql`UPDATE oauth_tokens SET rotated_at = now() WHERE token_id = ${row.token_id}`
          return yield* issue(row)
        }))
      })

      const revoke = Effect.fn("OAuthStore.revoke")(function*(token: string, clientId: string) {
        yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [row] = yield* sql<{ token_id: string; kind: "access" | "refresh"; authorization_id: string }>`
            SELECT token_id, kind, authorization_id FROM oauth_tokens
            WHERE token_hash = ${hashToken(token)} AND client_id = ${clientId}`
          if (row === undefined) return
          if (row.kind === "refresh") yield* revokeGrant(row.authorization_id)
          else yield* sql`UPDATE oauth_tokens SET revoked_at = now() WHERE token_id = ${row.token_id} AND revoked_at IS NULL`
        }))
      })

      const sweep = control(Effect.gen(function*() {
        const sql = yield* ScopedSql
        const grace = SWEEP_GRACE_SECONDS
        const [tokens] = yield* sql<{ n: number }>`
          WITH gone AS (DELETE FROM oauth_tokens WHERE expires_at < now() - make_interval(secs => ${grace}) RETURNING 1)
          SELECT count(*)::int AS n FROM gone`
        const [authorizations] = yield* sql<{ n: number }>`
          WITH gone AS (
            DELETE FROM oauth_authorizations a WHERE a.expires_at < now() - make_interval(secs => ${grace})
              AND NOT EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.authorization_id = a.authorization_id)
            RETURNING 1)
          SELECT count(*)::int AS n FROM gone`
        // a login not finished in time is of no use to anyone: no grace
        yield* sql`DELETE FROM oauth_oidc_logins WHERE expires_at < now()`
        const [clients] = yield* sql<{ n: number }>`
          WITH gone AS (
            DELETE FROM oauth_clients c
            WHERE CASE WHEN c.last_used_at IS NULL THEN c.created_at < now() - make_interval(secs => ${OAUTH_CLIENT_UNUSED_SECONDS})
                ELSE c.last_used_at < now() - make_interval(days => ${OAUTH_CLIENT_IDLE_DAYS}) END
              AND NOT EXISTS (SELECT 1 FROM oauth_authorizations a WHERE a.client_id = c.client_id)
              AND NOT EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.client_id = c.client_id)
            RETURNING 1)
          SELECT count(*)::int AS n FROM gone`
        return { tokens: tokens?.n ?? 0, authorizations: authorizations?.n ?? 0, clients: clients?.n ?? 0 }
      })).pipe(Effect.withSpan("OAuthStore.sweep"))

      const startOidcLogin = Effect.fn("OAuthStore.startOidcLogin")(function*(request: AuthorizationRequest | AppOidcSignIn) {
        const login: OidcLogin = { state: random(""), browser: random(""), nonce: random(""), codeVerifier: random("") }
        yield* control(ScopedSql.use((sql) =>
          sql`INSERT INTO oauth_oidc_logins (state_hash, browser_hash, nonce, code_verifier, request, expires_at)
            VALUES (${hashToken(login.state)}, ${hashToken(login.browser)}, ${login.nonce}, ${login.codeVerifier},
                    ${JSON.stringify(request)}::jsonb, now() + make_interval(secs => ${CODE_TTL_SECONDS}))`
        ))
        return login
      })

      const finishOidcLogin = Effect.fn("OAuthStore.finishOidcLogin")(function*(state: string, browser: string | undefined) {
        const rows = yield* control(ScopedSql.use((sql) =>
          sql<{ browser_hash: Buffer; nonce: string; code_verifier: string; request: AuthorizationRequest | AppOidcSignIn; live: boolean }>`
            DELETE FROM oauth_oidc_logins WHERE state_hash = ${hashToken(state)}
            RETURNING browser_hash, nonce, code_verifier, request, expires_at > now() AS live`
        ))
        const row = rows[0]
        if (row === undefined || !row.live) return "unknown" as const
        if (browser === undefined || !Crypto.timingSafeEqual(hashToken(browser), row.browser_hash)) return "elsewhere" as const
        return { state, browser, nonce: row.nonce, codeVerifier: row.code_verifier, request: row.request }
      })

      const oidcUser = Effect.fn("OAuthStore.oidcUser")(function*(issuer: string, subject: string, email: string | undefined) {
        return yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [linked] = yield* sql<{ tenant_id: string; user_id: string }>`
            SELECT tenant_id::text AS tenant_id, user_id::text AS user_id FROM oidc_identities WHERE issuer = ${issuer} AND subject = ${subject}`
          if (linked !== undefined) return linked
          if (email === undefined) return "none" as const
          const users = yield* sql<{ tenant_id: string; user_id: string; linked: boolean }>`
            SELECT u.tenant_id::text AS tenant_id, u.user_id::text AS user_id,
              EXISTS (SELECT 1 FROM oidc_identities i WHERE i.user_id = u.user_id AND i.issuer = ${issuer}) AS linked
            FROM users u WHERE lower(u.email) = lower(${email})`
          if (users.length === 0) return "none" as const
          if (users.length > 1) return "several" as const
          const user = users[0]!
          if (user.linked) return "linked-elsewhere" as const
          // two first sign-ins at once: the second finds the link made by the first (or its own account refused)
          const [made] = yield* sql<{ subject: string }>`
            INSERT INTO oidc_identities (issuer, subject, tenant_id, user_id) VALUES (${issuer}, ${subject}, ${user.tenant_id}, ${user.user_id})
            ON CONFLICT DO NOTHING RETURNING subject`
          if (made === undefined) return "linked-elsewhere" as const
          return { tenant_id: user.tenant_id, user_id: user.user_id }
        }))
      })

      return OAuthStore.of({
        registerClient,
        client,
        memberships,
        startAuthorization,
        pendingAuthorization,
        approve,
        startOidcLogin,
        finishOidcLogin,
        oidcUser,
        deny,
        redeemCode,
        refresh,
        revoke,
        sweep
      })
    })
  )
}

/** How often each API process sweeps (deletes are idempotent, so replicas may overlap). */
const SWEEP_INTERVAL = Duration.hours(1)

/** Runs `OAuthStore.sweep` every SWEEP_INTERVAL, supervised; a failed round is retried next time. */
export const OAuthSweeper = Layer.effectDiscard(Effect.gen(function*() {
  const store = yield* OAuthStore
  yield* sweepEvery("OAuth sweep", store.sweep, SWEEP_INTERVAL)
}))
