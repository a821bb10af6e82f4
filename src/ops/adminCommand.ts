/**
 * `ledger admin …`: tenants, users and tokens. The command line runs it on layers of its own (layers/Cli.ts), and an
 * embedded `ledger serve` runs it on its own services for the command line (ServeControl.ts), so both print the same.
 */
import { Clock, Console, Effect, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { AppSessions } from "../auth/AppSessions.ts"
import { Credentials } from "../auth/Credentials.ts"
import { ContentPolicies } from "../builder/ContentPolicies.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { CONTENT_POLICIES } from "../domain/contentPolicy.ts"
import { listWorkspaces } from "../integrity/workspaces.ts"
import type { TenantSql } from "../store/TenantSql.ts"
import { NotFound } from "../domain/errors.ts"

export const LEDGER_VERSION = "0.1.0"

const json = Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))

const bootstrap = Command.make(
  "bootstrap",
  {
    tenant: Flag.String("tenant").pipe(Flag.withDescription("tenant name (created or reused)")),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("workspace name (created or reused)")),
    email: Flag.String("email").pipe(Flag.withDescription("user email (created or reused)")),
    role: Flag.Literals("role", ["member", "restricted"]).pipe(
      Flag.withDescription("membership role; restricted members see only decisions made with their own keys"),
      Flag.withDefault("member")
    ),
    json
  },
  Effect.fn(function*({ tenant, workspace, email, role, json }) {
    const credentials = yield* Credentials
    const result = yield* credentials.bootstrap({ tenant, workspace, email, role })
    if (json) {
      yield* Console.log(JSON.stringify({
        tenant_id: result.tenant_id,
        workspace_id: result.workspace_id,
        user_id: result.user_id,
        pat: result.pat,
        gateway_key: result.gateway_key
      }))
    } else {
      yield* Console.log(
        `tenant ${result.tenant_id}\nworkspace ${result.workspace_id}\nuser ${result.user_id}\n` +
          `personal access token ${result.pat}\ngateway key ${result.gateway_key}`
      )
    }
  })
).pipe(Command.withDescription("create (or reuse) tenant, workspace and user; issue a PAT and a Gateway Key"))

const contentPolicy = Command.make(
  "content-policy",
  {
    workspace: Flag.String("workspace").pipe(Flag.withDescription("the workspace (NAME, TENANT/NAME or id)")),
    set: Flag.Literals("set", CONTENT_POLICIES).pipe(
      Flag.withDescription("keep the full exchange, a redacted one, or metadata only (applies to calls built from now on)"),
      Flag.optional
    ),
    json
  },
  Effect.fn(function*({ workspace, set, json }) {
    const policies = yield* ContentPolicies
    const results = []
    for (const scope of yield* listWorkspaces(workspace)) {
      if (Option.isSome(set)) yield* policies.set(scope, set.value)
      results.push({ tenant: scope.tenant, workspace: scope.workspace, workspace_id: scope.workspace_id, content_policy: yield* policies.get(scope) })
    }
    yield* Console.log(json ? JSON.stringify(results) : results.map((r) => `${r.tenant}/${r.workspace}  ${r.content_policy}`).join("\n"))
  })
).pipe(Command.withDescription("show or set what a workspace keeps of each call: full, redacted or metadata"))

/** the flags that name a member */
const memberFlags = {
    email: Flag.String("email").pipe(Flag.withDescription("the member's email")),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("workspace name")),
    tenant: Flag.String("tenant").pipe(Flag.withDescription("tenant name, when the workspace name is not unique"), Flag.optional),
}

const tokenCreate = Command.make(
  "create",
  {
    ...memberFlags,
    kind: Flag.Literals("kind", ["pat", "gateway"]).pipe(
      Flag.withDescription("pat (read API and MCP) or gateway (gateway key)")
    ),
    expiresInDays: Flag.Int("expires-in-days").pipe(Flag.withDescription("expire after this many days"), Flag.optional),
    json
  },
  Effect.fn(function*({ email, workspace, tenant, kind, expiresInDays, json }) {
    const credentials = yield* Credentials
    const now = yield* Clock.currentTimeMillis
    const created = yield* credentials.createToken({
      email,
      workspace,
      tenant: Option.getOrUndefined(tenant),
      kind,
      expiresAt: Option.getOrUndefined(Option.map(expiresInDays, (days) => new Date(now + days * 86_400_000)))
    })
    yield* Console.log(json ? JSON.stringify({ token_id: created.token_id, token: created.token }) : `${created.token_id} ${created.token}`)
  })
).pipe(Command.withDescription("issue a Personal Access Token or a Gateway Key"))

const tokenRevoke = Command.make(
  "revoke",
  { tokenId: Argument.String("TOKEN_ID").pipe(Argument.withDescription("the token_id printed when it was created")) },
  Effect.fn(function*({ tokenId }) {
    const credentials = yield* Credentials
    const revoked = yield* credentials.revoke(tokenId)
    if (!revoked) return yield* new NotFound({ message: `no active token ${tokenId}` })
    yield* Console.log(`revoked ${tokenId} (refused everywhere within 5 seconds)`)
  })
).pipe(Command.withDescription("revoke a token"))

const signInLink = Command.make(
  "signin-link",
  {
    ...memberFlags,
    json
  },
  Effect.fn(function*({ email, workspace, tenant, json }) {
    const member = yield* Credentials.use((credentials) => credentials.member({ email, workspace, tenant: Option.getOrUndefined(tenant) }))
    const token = yield* AppSessions.use((sessions) => sessions.createSignInLink(member))
    const url = `${(yield* LedgerConfig).publicUrl}/signin/link?token=${token}`
    yield* Console.log(json ? JSON.stringify({ url }) : `${url}\n(one use, valid 24 hours; then choose a password at /account/password)`)
  })
).pipe(Command.withDescription("print a one-time link that signs the member in to the app (for users without a password)"))

/** The `admin` command, its handlers on `store` (and `content-policy`'s on `policies`), each built when it runs. */
export const adminCommand = <E1, R1, E2, R2>(
  store: Layer.Layer<Credentials | AppSessions | LedgerConfig, E1, R1>,
  policies: Layer.Layer<ContentPolicies | TenantSql, E2, R2>
) =>
  Command.make("admin").pipe(
    Command.withDescription("administration: tenants, users and tokens"),
    Command.withSubcommands([
      bootstrap.pipe(Command.provide(store)),
      signInLink.pipe(Command.provide(store)),
      contentPolicy.pipe(Command.provide(policies)),
      Command.make("token").pipe(
        Command.withDescription("issue and revoke tokens"),
        Command.withSubcommands([tokenCreate.pipe(Command.provide(store)), tokenRevoke.pipe(Command.provide(store))])
      )
    ])
  )
