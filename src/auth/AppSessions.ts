/**
 * Signed-in browsers of the app (migration 0016_app). A session is a random cookie value; only its sha256 is
 * stored. Its CSRF token is derived from the cookie value (an HMAC keyed by it), so a page that cannot read the
 * HttpOnly cookie cannot forge a form, and nothing more needs storing. A session resolves through the user's
 * membership: removing a member signs their browsers out at once.
 *
 * One-time sign-in links (the first run prints one for the bootstrapped admin) are kept the same way, by hash. The
 * session a link starts may set a new password without the current one for PASSWORD_RESET_MS: a link is how
 * someone without a password, or who lost theirs, gets one. Its cookie value carries a prefix that says so; the
 * stored hash covers the whole value, so no other session can take the prefix on.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { MemberRole, Principal } from "../domain/principal.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { sweepEvery } from "../supervision/supervise.ts"
import { hashToken, type MemberIds } from "./Credentials.ts"

export const SESSION_TTL_MS = 7 * 24 * 3_600_000
export const SIGNIN_LINK_TTL_MS = 24 * 3_600_000
export const PASSWORD_RESET_MS = 15 * 60_000
const LINK_SESSION_PREFIX = "link."
/** a session's last_seen_at is written at most this often */
const TOUCH_EVERY_MS = 60_000

/** Who a browser session is: the principal reads run under, and what the app's pages show about them. */
export interface AppMember {
  readonly principal: Principal
  readonly email: string
  readonly admin: boolean
  /**
   * an admin of the installation's first tenant (the first run's, or the first one created): the one who operates
   * the service, and the only one shown the pipeline's figures, which span every tenant
   */
  readonly operator: boolean
  readonly tenant_name: string
  readonly workspace_name: string
  /** a session a sign-in link started, in its first PASSWORD_RESET_MS: it may set a password without the current one */
  readonly resetsPassword: boolean
}

/** The CSRF token of a session's forms. */
export const csrfTokenOf = (sessionToken: string): string =>
  Crypto.createHmac("sha256", sessionToken).update("ledger-csrf").digest("base64url")

/** Compares two tokens in constant time. */
export const sameToken = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && Crypto.timingSafeEqual(x, y)
}

const newSecret = () => Crypto.randomBytes(32).toString("base64url")

interface MemberRow {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly role: MemberRole
  readonly admin: boolean
  readonly operator: boolean
  readonly email: string
  readonly tenant_name: string
  readonly workspace_name: string
  readonly created_at: Date
  readonly last_seen_at: Date
}

export class AppSessions extends Context.Service<AppSessions, {
  /** A new session for the member; returns the cookie value (a fresh one every time: no fixation). */
  start(member: MemberIds): Effect.Effect<string, DatabaseUnavailable>
  /** The member a cookie value is a live session of. */
  resolve(token: string): Effect.Effect<AppMember | undefined, DatabaseUnavailable>
  end(token: string): Effect.Effect<void, DatabaseUnavailable>
  /** Ends every session of the user, in every workspace, but `keep` (the MCP authorization server signs in by these too). */
  endOthers(userId: string, keep: string): Effect.Effect<void, DatabaseUnavailable>
  /** A one-time sign-in link's secret for the member. */
  createSignInLink(member: MemberIds): Effect.Effect<string, DatabaseUnavailable>
  /** Uses a sign-in link (once, before it expires): the member it signs in, and the cookie value of their new session. */
  useSignInLink(token: string): Effect.Effect<{ readonly member: MemberIds; readonly session: string } | undefined, DatabaseUnavailable>
  /**
   * Deletes what can no longer be used: expired sessions, sign-in links a day after they expired or were used,
   * invitations 30 days after they expired unaccepted (until then the admin sees them as expired).
   */
  readonly sweep: Effect.Effect<{ readonly sessions: number; readonly links: number; readonly invitations: number }, DatabaseUnavailable>
}>()("ledger/auth/AppSessions") {
  static readonly layer = Layer.effect(
    AppSessions,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql

      const insert = (sql: ScopedSql["Service"], member: MemberIds, token: string, now: number) =>
        sql`INSERT INTO app_sessions (session_hash, tenant_id, workspace_id, user_id, expires_at)
          VALUES (${hashToken(token)}, ${member.tenant_id}, ${member.workspace_id}, ${member.user_id}, ${new Date(now + SESSION_TTL_MS)})`

      const start = Effect.fn("AppSessions.start")(function*(member: MemberIds) {
        const token = newSecret()
        const now = yield* Clock.currentTimeMillis
        yield* tenantSql.control(Effect.gen(function*() {
          yield* insert(yield* ScopedSql, member, token, now)
        }))
        return token
      })

      const resolve = Effect.fn("AppSessions.resolve")(function*(token: string) {
        const now = yield* Clock.currentTimeMillis
        const row = yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = yield* sql<MemberRow>`
            SELECT s.tenant_id::text, s.workspace_id::text, s.user_id::text, m.role, m.admin, u.email,
                   m.admin AND s.tenant_id = (SELECT tenant_id FROM tenants ORDER BY created_at, tenant_id LIMIT 1) AS operator,
                   t.name AS tenant_name, w.name AS workspace_name, s.created_at, s.last_seen_at
            FROM app_sessions s
            JOIN memberships m ON m.workspace_id = s.workspace_id AND m.user_id = s.user_id
            JOIN users u ON u.user_id = s.user_id
            JOIN tenants t ON t.tenant_id = s.tenant_id
            JOIN workspaces w ON w.workspace_id = s.workspace_id
            WHERE s.session_hash = ${hashToken(token)} AND s.expires_at > now()`
          const found = rows[0]
          if (found !== undefined && now - found.last_seen_at.getTime() > TOUCH_EVERY_MS) {
            yield* sql`UPDATE app_sessions SET last_seen_at = now() WHERE session_hash = ${hashToken(token)}`
          }
          return found
        }))
        if (row === undefined) return undefined
        return {
          principal: {
            tenant_id: row.tenant_id,
            workspace_id: row.workspace_id,
            user_id: row.user_id,
            role: row.role,
            kind: "session",
            // the session's id is its hash's prefix: never the cookie itself
            token_id: hashToken(token).subarray(0, 8).toString("hex")
          },
          email: row.email,
          admin: row.admin,
          operator: row.operator,
          tenant_name: row.tenant_name,
          workspace_name: row.workspace_name,
          resetsPassword: token.startsWith(LINK_SESSION_PREFIX) && now - row.created_at.getTime() < PASSWORD_RESET_MS
        } satisfies AppMember
      })

      const end = Effect.fn("AppSessions.end")(function*(token: string) {
        yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`DELETE FROM app_sessions WHERE session_hash = ${hashToken(token)}`
        }))
      })

      const endOthers = Effect.fn("AppSessions.endOthers")(function*(userId: string, keep: string) {
        yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`DELETE FROM app_sessions WHERE user_id = ${userId} AND session_hash <> ${hashToken(keep)}`
        }))
      })

      const createSignInLink = Effect.fn("AppSessions.createSignInLink")(function*(member: MemberIds) {
        const token = newSecret()
        const now = yield* Clock.currentTimeMillis
        yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`INSERT INTO app_signin_links (token_hash, tenant_id, workspace_id, user_id, expires_at)
            VALUES (${hashToken(token)}, ${member.tenant_id}, ${member.workspace_id}, ${member.user_id}, ${new Date(now + SIGNIN_LINK_TTL_MS)})`
        }))
        return token
      })

      const useSignInLink = Effect.fn("AppSessions.useSignInLink")(function*(token: string) {
        const session = LINK_SESSION_PREFIX + newSecret()
        const now = yield* Clock.currentTimeMillis
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [member] = yield* sql<MemberIds>`UPDATE app_signin_links SET used_at = now()
            WHERE token_hash = ${hashToken(token)} AND used_at IS NULL AND expires_at > now()
            RETURNING tenant_id::text, workspace_id::text, user_id::text`
          if (member === undefined) return undefined
          yield* insert(sql, member, session, now)
          return { member, session }
        }))
      })

      const sweep = tenantSql.control(Effect.gen(function*() {
        const sql = yield* ScopedSql
        const count = (rows: ReadonlyArray<unknown>) => rows.length
        const sessions = count(yield* sql`DELETE FROM app_sessions WHERE expires_at <= now() RETURNING 1`)
        const links = count(yield* sql`DELETE FROM app_signin_links
          WHERE coalesce(used_at, expires_at) <= now() - interval '1 day' RETURNING 1`)
        const invitations = count(yield* sql`DELETE FROM app_invitations
          WHERE accepted_at IS NULL AND expires_at <= now() - interval '30 days' RETURNING 1`)
        return { sessions, links, invitations }
      })).pipe(Effect.withSpan("AppSessions.sweep"))

      return AppSessions.of({ start, resolve, end, endOthers, createSignInLink, useSignInLink, sweep })
    })
  )
}

/** How often each API process sweeps (deletes are idempotent, so replicas may overlap). */
const SWEEP_INTERVAL = Duration.hours(1)

/** Runs `AppSessions.sweep` every SWEEP_INTERVAL, supervised; a failed round is retried next time. */
export const AppSweeper = Layer.effectDiscard(Effect.gen(function*() {
  const sessions = yield* AppSessions
  yield* sweepEvery("app sweep", sessions.sweep, SWEEP_INTERVAL)
}))
