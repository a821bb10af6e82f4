/**
 * The app's accounts (migration 0016_app): sign-up (a tenant, its first workspace and its admin, with a Gateway Key
 * and a PAT), password sign-in, invitations and the workspace's members. Everything runs as the control role.
 *
 * An email names one user per tenant; the same person may own several tenants. Sign-in tries every user with the
 * email that has a password and signs into the first workspace whose password matches (scrypt per candidate, so
 * the work is bounded by how many tenants share one email).
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as Crypto from "node:crypto"
import { BadRequest, type DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import { isUuid } from "../domain/identifiers.ts"
import type { MemberRole } from "../domain/principal.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { Credentials, hashToken, type MemberIds } from "./Credentials.ts"
import { hashPassword, passwordProblem, verifyPassword } from "./passwords.ts"

export const INVITATION_TTL_MS = 7 * 24 * 3_600_000
/** user ids tried per sign-in: one email in more tenants than this signs into the most recent ones */
const MAX_SIGNIN_CANDIDATES = 5
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/
const NAME = /^[\p{L}\p{N}][\p{L}\p{N} ._-]{0,62}$/u

/** A name, email or password the form must show again with a message next to the field. */
export class AccountProblem extends Schema.TaggedError<AccountProblem>()("AccountProblem", {
  field: Schema.String,
  message: Schema.String
}) {}

export interface SignUpInput {
  readonly organisation: string
  readonly workspace: string
  readonly email: string
  readonly password: string
}

export interface Provisioned extends MemberIds {
  readonly gateway_key: string
  readonly pat: string | null
}

export interface Member {
  readonly user_id: string
  readonly email: string
  readonly role: MemberRole
  readonly admin: boolean
  readonly joined_at: Date
}

export interface WorkspaceMembership {
  readonly workspace_id: string
  readonly name: string
  readonly role: MemberRole
  readonly admin: boolean
}

export interface Invitation {
  readonly invitation_id: string
  readonly email: string
  readonly role: MemberRole
  readonly created_at: Date
  readonly expires_at: Date
  readonly accepted_at: Date | null
}

export interface PendingInvitation {
  readonly email: string
  readonly role: MemberRole
  readonly tenant_name: string
  readonly workspace_name: string
}

type Workspace = { readonly tenant_id: string; readonly workspace_id: string }

const normaliseEmail = (email: string) => email.trim().toLowerCase()

const checkEmail = (email: string) =>
  EMAIL.test(email) ? Effect.void : Effect.fail(new AccountProblem({ field: "email", message: "Enter an email address." }))

const checkPassword = (password: string, email: string) => {
  const problem = passwordProblem(password, email)
  return problem === undefined ? Effect.void : Effect.fail(new AccountProblem({ field: "password", message: problem }))
}

const checkName = (field: string, value: string) =>
  NAME.test(value)
    ? Effect.void
    : Effect.fail(new AccountProblem({ field, message: "Use 1–63 letters, digits, spaces, dots, dashes or underscores, starting with a letter or digit." }))

export class Accounts extends Context.Service<Accounts, {
  signUp(input: SignUpInput): Effect.Effect<Provisioned, AccountProblem | DatabaseUnavailable>
  /** The member the email and password sign in, or undefined (wrong password, unknown email: the same answer). */
  signIn(email: string, password: string): Effect.Effect<MemberIds | undefined, DatabaseUnavailable>
  invite(workspace: Workspace, by: string, email: string, role: MemberRole): Effect.Effect<{ readonly invitation_id: string; readonly token: string }, AccountProblem | DatabaseUnavailable>
  invitations(workspace: Workspace): Effect.Effect<ReadonlyArray<Invitation>, DatabaseUnavailable>
  /** What an invitation link is for, when it is still open. */
  pendingInvitation(token: string): Effect.Effect<PendingInvitation | undefined, DatabaseUnavailable>
  /** Joins the invited workspace (setting the password of a new user) and provisions a Gateway Key. */
  acceptInvitation(token: string, password: string): Effect.Effect<Provisioned, AccountProblem | NotFound | DatabaseUnavailable>
  /** Whether the user has a password (the first run's admin, and one who signs in by SSO, may have none). */
  hasPassword(userId: string): Effect.Effect<boolean, DatabaseUnavailable>
  /** Whether `password` is the user's password (false when they have none). */
  passwordMatches(userId: string, password: string): Effect.Effect<boolean, DatabaseUnavailable>
  /** Sets a signed-in user's password; the app confirms it is theirs to change first. */
  setPassword(userId: string, email: string, password: string): Effect.Effect<void, AccountProblem | DatabaseUnavailable>
  /** The workspaces of the tenant the user is a member of. */
  workspaces(member: { readonly tenant_id: string; readonly user_id: string }): Effect.Effect<ReadonlyArray<WorkspaceMembership>, DatabaseUnavailable>
  /** A new workspace of the tenant, administered by its creator. */
  createWorkspace(member: { readonly tenant_id: string; readonly user_id: string }, name: string): Effect.Effect<string, AccountProblem | DatabaseUnavailable>
  members(workspace: Workspace): Effect.Effect<ReadonlyArray<Member>, DatabaseUnavailable>
  setRole(workspace: Workspace, userId: string, role: MemberRole): Effect.Effect<void, NotFound | BadRequest | DatabaseUnavailable>
  /** Removes a member (never the last admin); their keys and sessions stop working with the membership. */
  removeMember(workspace: Workspace, userId: string): Effect.Effect<void, NotFound | BadRequest | DatabaseUnavailable>
}>()("ledger/auth/Accounts") {
  static readonly layer = Layer.effect(
    Accounts,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const credentials = yield* Credentials

      const signUp = Effect.fn("Accounts.signUp")(function*(input: SignUpInput) {
        const email = normaliseEmail(input.email)
        const organisation = input.organisation.trim()
        const workspace = input.workspace.trim()
        yield* checkName("organisation", organisation)
        yield* checkName("workspace", workspace)
        yield* checkEmail(email)
        yield* checkPassword(input.password, email)
        const passwordHash = yield* hashPassword(input.password)
        const ids = yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const tenant = yield* sql<{ tenant_id: string }>`
            INSERT INTO tenants (tenant_id, name) VALUES (${Crypto.randomUUID()}, ${organisation})
            ON CONFLICT (name) DO NOTHING RETURNING tenant_id::text`
          if (tenant.length === 0) {
            return yield* new AccountProblem({ field: "organisation", message: "That organisation name is taken; choose another." })
          }
          const tenant_id = tenant[0]!.tenant_id
          const workspace_id = Crypto.randomUUID()
          const user_id = Crypto.randomUUID()
          yield* sql`INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${workspace_id}, ${tenant_id}, ${workspace})`
          yield* sql`INSERT INTO users (user_id, tenant_id, email, password_hash) VALUES (${user_id}, ${tenant_id}, ${email}, ${passwordHash})`
          yield* sql`INSERT INTO memberships (tenant_id, workspace_id, user_id, role, admin) VALUES (${tenant_id}, ${workspace_id}, ${user_id}, 'member', true)`
          return { tenant_id, workspace_id, user_id }
        }))
        const gateway = yield* credentials.issue(ids, "gateway", null, "signup")
        const pat = yield* credentials.issue(ids, "pat", null, "signup")
        yield* Effect.logInfo("app sign-up").pipe(Effect.annotateLogs({ tenant_id: ids.tenant_id, user_id: ids.user_id }))
        return { ...ids, gateway_key: gateway.token, pat: pat.token }
      })

      const signIn = Effect.fn("Accounts.signIn")(function*(email: string, password: string) {
        const candidates = yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          return yield* sql<MemberIds & { password_hash: string }>`
            SELECT DISTINCT ON (u.user_id) u.tenant_id::text, m.workspace_id::text, u.user_id::text, u.password_hash, u.created_at
            FROM users u JOIN memberships m ON m.user_id = u.user_id
            WHERE lower(u.email) = ${normaliseEmail(email)} AND u.password_hash IS NOT NULL
            ORDER BY u.user_id, m.admin DESC, m.created_at
            LIMIT ${MAX_SIGNIN_CANDIDATES}`
        }))
        if (candidates.length === 0) {
          // the same work as a real check, so timing does not tell which emails have accounts
          yield* verifyPassword(password, null)
          return undefined
        }
        for (const candidate of candidates) {
          if (yield* verifyPassword(password, candidate.password_hash)) {
            return { tenant_id: candidate.tenant_id, workspace_id: candidate.workspace_id, user_id: candidate.user_id }
          }
        }
        return undefined
      })

      const invite = Effect.fn("Accounts.invite")(function*(workspace: Workspace, by: string, rawEmail: string, role: MemberRole) {
        const email = normaliseEmail(rawEmail)
        yield* checkEmail(email)
        const token = Crypto.randomBytes(32).toString("base64url")
        const invitation_id = Crypto.randomUUID()
        const now = yield* Clock.currentTimeMillis
        yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const already = yield* sql`SELECT 1 FROM memberships m JOIN users u ON u.user_id = m.user_id
            WHERE m.workspace_id = ${workspace.workspace_id} AND lower(u.email) = ${email}`
          if (already.length > 0) return yield* new AccountProblem({ field: "email", message: `${email} is already a member.` })
          yield* sql`INSERT INTO app_invitations (invitation_id, tenant_id, workspace_id, email, role, token_hash, invited_by, expires_at)
            VALUES (${invitation_id}, ${workspace.tenant_id}, ${workspace.workspace_id}, ${email}, ${role}, ${hashToken(token)}, ${by},
                    ${new Date(now + INVITATION_TTL_MS)})`
        }))
        return { invitation_id, token }
      })

      const invitations = Effect.fn("Accounts.invitations")(function*(workspace: Workspace) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          return yield* sql<Invitation>`SELECT invitation_id::text, email, role, created_at, expires_at, accepted_at
            FROM app_invitations WHERE workspace_id = ${workspace.workspace_id} AND tenant_id = ${workspace.tenant_id}
            ORDER BY created_at DESC LIMIT 100`
        }))
      })

      const openInvitation = Effect.fnUntraced(function*(token: string) {
        const sql = yield* ScopedSql
        const rows = yield* sql<PendingInvitation & Workspace & { invitation_id: string }>`
          SELECT i.invitation_id::text, i.tenant_id::text, i.workspace_id::text, i.email, i.role, t.name AS tenant_name, w.name AS workspace_name
          FROM app_invitations i JOIN tenants t ON t.tenant_id = i.tenant_id JOIN workspaces w ON w.workspace_id = i.workspace_id
          WHERE i.token_hash = ${hashToken(token)} AND i.accepted_at IS NULL AND i.expires_at > now()
          FOR UPDATE OF i`
        return rows[0]
      })

      const pendingInvitation = Effect.fn("Accounts.pendingInvitation")(function*(token: string) {
        const open = yield* tenantSql.control(openInvitation(token))
        return open === undefined
          ? undefined
          : { email: open.email, role: open.role, tenant_name: open.tenant_name, workspace_name: open.workspace_name }
      })

      const acceptInvitation = Effect.fn("Accounts.acceptInvitation")(function*(token: string, password: string) {
        const peek = yield* pendingInvitation(token)
        if (peek === undefined) return yield* new NotFound({ message: "This invitation has expired or was already used." })
        yield* checkPassword(password, peek.email)
        const passwordHash = yield* hashPassword(password)
        const ids = yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const open = yield* openInvitation(token)
          if (open === undefined) return yield* new NotFound({ message: "This invitation has expired or was already used." })
          // an existing user of the tenant keeps their password; a new one gets the one chosen now
          const user = (yield* sql<{ user_id: string }>`
            INSERT INTO users (user_id, tenant_id, email, password_hash) VALUES (${Crypto.randomUUID()}, ${open.tenant_id}, ${open.email}, ${passwordHash})
            ON CONFLICT (tenant_id, email) DO UPDATE SET password_hash = coalesce(users.password_hash, EXCLUDED.password_hash)
            RETURNING user_id::text`)[0]!
          yield* sql`INSERT INTO memberships (tenant_id, workspace_id, user_id, role) VALUES (${open.tenant_id}, ${open.workspace_id}, ${user.user_id}, ${open.role})
            ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role`
          yield* sql`UPDATE app_invitations SET accepted_at = now() WHERE invitation_id = ${open.invitation_id}`
          return { tenant_id: open.tenant_id, workspace_id: open.workspace_id, user_id: user.user_id }
        }))
        const gateway = yield* credentials.issue(ids, "gateway", null, "invitation")
        yield* Effect.logInfo("app invitation accepted").pipe(Effect.annotateLogs({ tenant_id: ids.tenant_id, user_id: ids.user_id }))
        return { ...ids, gateway_key: gateway.token, pat: null }
      })

      const storedPassword = (userId: string) =>
        tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = yield* sql<{ password_hash: string | null }>`SELECT password_hash FROM users WHERE user_id = ${userId}`
          return rows[0]?.password_hash ?? null
        }))

      const hasPassword = Effect.fn("Accounts.hasPassword")(function*(userId: string) {
        return (yield* storedPassword(userId)) !== null
      })

      const passwordMatches = Effect.fn("Accounts.passwordMatches")(function*(userId: string, password: string) {
        return yield* verifyPassword(password, yield* storedPassword(userId))
      })

      const setPassword = Effect.fn("Accounts.setPassword")(function*(userId: string, email: string, password: string) {
        yield* checkPassword(password, email)
        const passwordHash = yield* hashPassword(password)
        yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`UPDATE users SET password_hash = ${passwordHash} WHERE user_id = ${userId}`
        }))
      })

      const workspaces = Effect.fn("Accounts.workspaces")(function*(member: { readonly tenant_id: string; readonly user_id: string }) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          return yield* sql<WorkspaceMembership>`
            SELECT m.workspace_id::text, w.name, m.role, m.admin FROM memberships m JOIN workspaces w ON w.workspace_id = m.workspace_id
            WHERE m.tenant_id = ${member.tenant_id} AND m.user_id = ${member.user_id} ORDER BY w.name`
        }))
      })

      const createWorkspace = Effect.fn("Accounts.createWorkspace")(function*(member: { readonly tenant_id: string; readonly user_id: string }, rawName: string) {
        const name = rawName.trim()
        yield* checkName("workspace", name)
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const created = yield* sql<{ workspace_id: string }>`
            INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${Crypto.randomUUID()}, ${member.tenant_id}, ${name})
            ON CONFLICT (tenant_id, name) DO NOTHING RETURNING workspace_id::text`
          if (created.length === 0) return yield* new AccountProblem({ field: "workspace", message: "Your organisation already has a workspace of that name." })
          const workspace_id = created[0]!.workspace_id
          yield* sql`INSERT INTO memberships (tenant_id, workspace_id, user_id, role, admin) VALUES (${member.tenant_id}, ${workspace_id}, ${member.user_id}, 'member', true)`
          return workspace_id
        }))
      })

      const members = Effect.fn("Accounts.members")(function*(workspace: Workspace) {
        return yield* tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          return yield* sql<Member>`SELECT m.user_id::text, u.email, m.role, m.admin, m.created_at AS joined_at
            FROM memberships m JOIN users u ON u.user_id = m.user_id
            WHERE m.workspace_id = ${workspace.workspace_id} AND m.tenant_id = ${workspace.tenant_id}
            ORDER BY m.admin DESC, u.email LIMIT 1000`
        }))
      })

      /** A change to a member that must leave the workspace with an admin who is a full member. */
      const changeMember = (workspace: Workspace, userId: string, change: (sql: ScopedSql["Service"]) => Effect.Effect<unknown, unknown>) =>
        // a user id is a uuid: other text names no member (and text with NUL could not even be sent to Postgres)
        !isUuid(userId) ? Effect.fail(new NotFound({ message: "no such member" })) : tenantSql.control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const target = yield* sql<{ admin: boolean }>`SELECT admin FROM memberships
            WHERE workspace_id = ${workspace.workspace_id} AND tenant_id = ${workspace.tenant_id} AND user_id::text = ${userId} FOR UPDATE`
          if (target.length === 0) return yield* new NotFound({ message: "no such member" })
          yield* (change(sql) as Effect.Effect<unknown>)
          const admins = yield* sql`SELECT 1 FROM memberships WHERE workspace_id = ${workspace.workspace_id} AND admin AND role = 'member'`
          if (admins.length === 0) {
            return yield* new BadRequest({ message: "the workspace must keep an administrator with full access", param: "user_id" })
          }
        }))

      const setRole = Effect.fn("Accounts.setRole")(function*(workspace: Workspace, userId: string, role: MemberRole) {
        yield* changeMember(workspace, userId, (sql) =>
          sql`UPDATE memberships SET role = ${role} WHERE workspace_id = ${workspace.workspace_id} AND user_id::text = ${userId}`)
      })

      const removeMember = Effect.fn("Accounts.removeMember")(function*(workspace: Workspace, userId: string) {
        yield* changeMember(workspace, userId, (sql) =>
          sql`DELETE FROM memberships WHERE workspace_id = ${workspace.workspace_id} AND user_id::text = ${userId}`)
      })

      return Accounts.of({
        signUp,
        signIn,
        invite,
        invitations,
        pendingInvitation,
        acceptInvitation,
        hasPassword,
        passwordMatches,
        setPassword,
        workspaces,
        createWorkspace,
        members,
        setRole,
        removeMember
      })
    })
  )
}
