/**
 * Control plane: tenants, workspaces, users, memberships and credentials (docs/ARCHITECTURE.md, "The parts").
 *
 * Tokens are `ldg_pat_<43 chars>` (Personal Access Token) or `ldg_gw_<43 chars>` (Gateway Key): 256 bits from the
 * OS CSPRNG, base64url. Only the sha256 of a token is stored, with a short visible prefix for listings.
 * OAuth access tokens (`ldg_oat_…`) are issued by the MCP authorization server into its own table (`oauth_tokens`,
 * migration 0004_oauth); `resolve` reads them too, so every surface authenticates through one path.
 * Everything here runs through `TenantSql.control` (the control role), never as the owner.
 */
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import type { MemberRole } from "../domain/principal.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"

/** Kinds stored in `credentials` (issued by `ledger admin`). */
export type TokenKind = "pat" | "gateway"
/** Every bearer kind: the stored credential kinds plus OAuth access tokens. */
export type BearerKind = TokenKind | "oauth"

export const TOKEN_PREFIX: Record<BearerKind, string> = { pat: "ldg_pat_", gateway: "ldg_gw_", oauth: "ldg_oat_" }

/** A new random token of the kind. */
export const generateToken = (kind: BearerKind): string =>
  TOKEN_PREFIX[kind] + Crypto.randomBytes(32).toString("base64url")

export const hashToken = (token: string): Buffer => Crypto.createHash("sha256").update(token).digest()

/** The kind a token claims by its prefix, if it looks like one of ours. */
export const tokenKind = (token: string): BearerKind | undefined =>
  token.startsWith(TOKEN_PREFIX.pat)
    ? "pat"
    : token.startsWith(TOKEN_PREFIX.gateway)
    ? "gateway"
    : token.startsWith(TOKEN_PREFIX.oauth)
    ? "oauth"
    : undefined

export interface BootstrapResult {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly pat: string
  readonly gateway_key: string
}

/** What a stored credential resolves to (before expiry/revocation checks). */
export interface CredentialRecord {
  readonly token_id: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly kind: BearerKind
  readonly role: MemberRole
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  /** OAuth access tokens: the resource they were issued for (`{publicUrl}/mcp`); null for the other kinds */
  readonly audience: string | null
}

/** A token for a member of a workspace (by name); `tenant` disambiguates a workspace name used twice. */
export interface CreateTokenInput {
  readonly email: string
  readonly workspace: string
  readonly tenant?: string | undefined
  readonly kind: TokenKind
  readonly expiresAt?: Date | undefined
  readonly name?: string | undefined
}

/** A credential as Admin → API Keys lists it (never the token). */
export interface KeyListing {
  readonly token_id: string
  readonly kind: TokenKind
  readonly display_prefix: string
  readonly name: string | null
  readonly user_id: string
  readonly owner_email: string
  readonly created_at: Date
  readonly last_used_at: Date | null
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
}

/** The member a key is issued to or listed for. */
export interface MemberIds {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
}

const MAX_KEYS_LISTED = 500

const one = <A>(rows: ReadonlyArray<A>): A => rows[0]!

export class Credentials extends Context.Service<Credentials, {
  /** Creates (or reuses) tenant, workspace and user, sets the membership role, issues one PAT and one Gateway Key. */
  bootstrap(input: {
    readonly tenant: string
    readonly workspace: string
    readonly email: string
    readonly role: MemberRole
  }): Effect.Effect<BootstrapResult, DatabaseUnavailable>
  /** Issues a token for a member of the workspace (by name); `tenant` disambiguates a workspace name used twice. */
  createToken(input: CreateTokenInput): Effect.Effect<{ readonly token_id: string; readonly token: string }, NotFound | BadRequest | DatabaseUnavailable>
  /** The member of a workspace (by names), as `ledger admin` names them. */
  member(input: { readonly email: string; readonly workspace: string; readonly tenant?: string | undefined }): Effect.Effect<MemberIds, NotFound | BadRequest | DatabaseUnavailable>
  /** Revokes a credential by id; false when there is no such (unrevoked) credential. */
  revoke(tokenId: string): Effect.Effect<boolean, DatabaseUnavailable>
  /** Issues a token to a member of a workspace (the app's Admin → API Keys, sign-up, an accepted invitation). */
  issue(member: MemberIds, kind: TokenKind, expiresAt: Date | null, name: string | null): Effect.Effect<{ readonly token_id: string; readonly token: string }, DatabaseUnavailable>
  /** The workspace's keys, newest first; only `owner`'s when given. */
  list(workspace: { readonly tenant_id: string; readonly workspace_id: string }, owner?: string): Effect.Effect<ReadonlyArray<KeyListing>, DatabaseUnavailable>
  /** Revokes a key of the workspace (only `owner`'s when given); false when there is no such unrevoked key. */
  revokeIn(workspace: { readonly tenant_id: string; readonly workspace_id: string }, tokenId: string, owner?: string): Effect.Effect<boolean, DatabaseUnavailable>
  /** Looks a token (of any bearer kind) up by hash and records its use. */
  resolve(token: string): Effect.Effect<CredentialRecord | undefined, DatabaseUnavailable>
}>()("ledger/auth/Credentials") {
  static readonly layer = Layer.effect(
    Credentials,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql

      const issue = Effect.fnUntraced(function*(
        ids: { tenant_id: string; workspace_id: string; user_id: string },
        kind: TokenKind,
        expiresAt: Date | null,
        name: string | null
      ) {
        const sql = yield* ScopedSql
        const token = generateToken(kind)
        const token_id = Crypto.randomUUID()
        yield* sql`INSERT INTO credentials (token_id, tenant_id, workspace_id, user_id, kind, display_prefix, token_hash, name, expires_at)
          VALUES (${token_id}, ${ids.tenant_id}, ${ids.workspace_id}, ${ids.user_id}, ${kind},
                  ${token.slice(0, TOKEN_PREFIX[kind].length + 4)}, ${hashToken(token)}, ${name}, ${expiresAt})`
        return { token_id, token }
      })

      const bootstrap = Effect.fn("Credentials.bootstrap")(function*(input: {
        readonly tenant: string
        readonly workspace: string
        readonly email: string
        readonly role: MemberRole
      }) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          // upserts that return the existing row's id when it is already there
          const tenant = one(yield* sql<{ tenant_id: string }>`
            INSERT INTO tenants (tenant_id, name) VALUES (${Crypto.randomUUID()}, ${input.tenant})
            ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING tenant_id`)
          const workspace = one(yield* sql<{ workspace_id: string }>`
            INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${Crypto.randomUUID()}, ${tenant.tenant_id}, ${input.workspace})
            ON CONFLICT (tenant_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING workspace_id`)
          const user = one(yield* sql<{ user_id: string }>`
            INSERT INTO users (user_id, tenant_id, email) VALUES (${Crypto.randomUUID()}, ${tenant.tenant_id}, ${input.email})
            ON CONFLICT (tenant_id, email) DO UPDATE SET email = EXCLUDED.email RETURNING user_id`)
          // the workspace's first full member administers it in the app (keys, members)
          yield* sql`INSERT INTO memberships (tenant_id, workspace_id, user_id, role, admin)
            SELECT ${tenant.tenant_id}, ${workspace.workspace_id}, ${user.user_id}, ${input.role},
                   ${input.role} = 'member' AND NOT EXISTS (SELECT 1 FROM memberships WHERE workspace_id = ${workspace.workspace_id} AND admin)
            ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role`
          const ids = { tenant_id: tenant.tenant_id, workspace_id: workspace.workspace_id, user_id: user.user_id }
          const pat = yield* issue(ids, "pat", null, "bootstrap")
          const gateway = yield* issue(ids, "gateway", null, "bootstrap")
          return { ...ids, pat: pat.token, gateway_key: gateway.token }
        }))
      })

      const findMember = Effect.fnUntraced(function*(input: { readonly email: string; readonly workspace: string; readonly tenant?: string | undefined }) {
        const sql = yield* ScopedSql
        const members = yield* sql<MemberIds>`
          SELECT m.tenant_id, m.workspace_id, m.user_id
          FROM memberships m
          JOIN workspaces w ON w.workspace_id = m.workspace_id
          JOIN users u ON u.user_id = m.user_id
          JOIN tenants t ON t.tenant_id = m.tenant_id
          WHERE w.name = ${input.workspace} AND u.email = ${input.email}
            AND (${input.tenant ?? null}::text IS NULL OR t.name = ${input.tenant ?? null})`
        if (members.length === 0) {
          return yield* new NotFound({ message: `no member ${input.email} in workspace ${input.workspace}` })
        }
        if (members.length > 1) {
          return yield* new BadRequest({ message: `workspace ${input.workspace} exists in several tenants: pass --tenant`, param: "tenant" })
        }
        return one(members)
      })

      const member = Effect.fn("Credentials.member")(function*(input: { readonly email: string; readonly workspace: string; readonly tenant?: string | undefined }) {
        return yield* tenantSql.control(findMember(input))
      })

      const createToken = Effect.fn("Credentials.createToken")(function*(input: CreateTokenInput) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const found = yield* findMember(input)
          return yield* issue(found, input.kind, input.expiresAt ?? null, input.name ?? null)
        }))
      })

      const revoke = Effect.fn("Credentials.revoke")(function*(tokenId: string) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = yield* sql`UPDATE credentials SET revoked_at = now()
            WHERE token_id::text = ${tokenId} AND revoked_at IS NULL RETURNING token_id`
          return rows.length > 0
        }))
      })

      const resolve = Effect.fn("Credentials.resolve")(function*(token: string) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          // both joins go through memberships: a token stops working when its user leaves the workspace
          const rows = tokenKind(token) === "oauth"
            ? yield* sql<CredentialRecord>`
              UPDATE oauth_tokens t SET last_used_at = now()
              FROM memberships m
              WHERE t.token_hash = ${hashToken(token)} AND t.kind = 'access'
                AND m.workspace_id = t.workspace_id AND m.user_id = t.user_id
              RETURNING t.token_id, t.tenant_id, t.workspace_id, t.user_id, 'oauth' AS kind, m.role, t.expires_at, t.revoked_at, t.audience`
            : yield* sql<CredentialRecord>`
              UPDATE credentials c SET last_used_at = now()
              FROM memberships m
              WHERE c.token_hash = ${hashToken(token)} AND m.workspace_id = c.workspace_id AND m.user_id = c.user_id
              RETURNING c.token_id, c.tenant_id, c.workspace_id, c.user_id, c.kind, m.role, c.expires_at, c.revoked_at, NULL AS audience`
          return rows[0]
        }))
      })

      const issueTo = Effect.fn("Credentials.issue")(function*(member: MemberIds, kind: TokenKind, expiresAt: Date | null, name: string | null) {
        return yield* tenantSql.control(issue(member, kind, expiresAt, name))
      })

      const list = Effect.fn("Credentials.list")(function*(workspace: { readonly tenant_id: string; readonly workspace_id: string }, owner?: string) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          return yield* sql<KeyListing>`
            SELECT c.token_id::text, c.kind, c.display_prefix, c.name, c.user_id::text, u.email AS owner_email,
                   c.created_at, c.last_used_at, c.expires_at, c.revoked_at
            FROM credentials c JOIN users u ON u.user_id = c.user_id
            WHERE c.tenant_id = ${workspace.tenant_id} AND c.workspace_id = ${workspace.workspace_id}
              AND (${owner ?? null}::uuid IS NULL OR c.user_id = ${owner ?? null}::uuid)
            ORDER BY c.revoked_at IS NOT NULL, c.created_at DESC
            LIMIT ${MAX_KEYS_LISTED}`
        }))
      })

      const revokeIn = Effect.fn("Credentials.revokeIn")(function*(workspace: { readonly tenant_id: string; readonly workspace_id: string }, tokenId: string, owner?: string) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = yield* sql`UPDATE credentials SET revoked_at = now()
            WHERE token_id::text = ${tokenId} AND tenant_id = ${workspace.tenant_id} AND workspace_id = ${workspace.workspace_id}
              AND (${owner ?? null}::uuid IS NULL OR user_id = ${owner ?? null}::uuid) AND revoked_at IS NULL
            RETURNING token_id`
          return rows.length > 0
        }))
      })

      return Credentials.of({ bootstrap, createToken, member, revoke, resolve, issue: issueTo, list, revokeIn })
    })
  )
}
