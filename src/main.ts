/**
 * The `ledger` command line: its commands, flags and output. What each command runs on is composed in layers/
 * (layers/Serve.ts for `serve`, layers/Cli.ts for the others); `watch` is in src/watcher/command.ts.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Clock, Console, Effect, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { AdminLive, ContentPolicyLive, DlqLive, IntegrityLive, MigrateLive, RebuildLive, StatusLive } from "../layers/Cli.ts"
import { ROLES, type Role, serveLayer } from "../layers/Serve.ts"
import { Rebuilder } from "./builder/Rebuild.ts"
import { progressBar } from "./builder/RebuildProgress.ts"
import { CaptureShards, listDeadLetters, replayDeadLetters } from "./capture/CaptureShards.ts"
import { deadLetterIdentity, PipelineStatus, renderDeadLetters, renderReport } from "./ops/Status.ts"
import { AppSessions } from "./auth/AppSessions.ts"
import { Credentials } from "./auth/Credentials.ts"
import { checkedGatewayWorkers, LedgerConfig } from "./config/LedgerConfig.ts"
import { checkpoint, contentPolicy, verify } from "./integrity/command.ts"
import { erase } from "./integrity/eraseCommand.ts"
import { exportDecisions } from "./integrity/exportCommand.ts"
import { watch } from "./watcher/command.ts"

const json = Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))

const serve = Command.make(
  "serve",
  {
    roles: Flag.String("roles").pipe(
      Flag.withDescription(`comma-separated roles to run (${ROLES.join(", ")}); all by default`),
      Flag.withDefault(ROLES.join(","))
    ),
    gatewayWorkers: Flag.Int("gateway-workers").pipe(
      Flag.withDescription("gateway worker threads sharing the gateway port (LEDGER_GATEWAY_WORKERS; default 1: the main thread)"),
      Flag.optional
    )
  },
  Effect.fn(function*({ roles, gatewayWorkers }) {
    const picked = new Set(roles.split(",").map((role) => role.trim()).filter((role) => role.length > 0))
    const unknown = [...picked].filter((role) => !(ROLES as ReadonlyArray<string>).includes(role))
    if (unknown.length > 0 || picked.size === 0) {
      return yield* Effect.fail(new Error(`--roles: unknown role(s) ${unknown.join(", ")}; expected ${ROLES.join(", ")}`))
    }
    // runs until interrupted (SIGINT/SIGTERM): servers stop accepting, in-flight requests finish, fibers stop
    const workers = yield* Option.match(gatewayWorkers, {
      onNone: () => Effect.succeed(undefined),
      onSome: (count) => Effect.try({ try: () => checkedGatewayWorkers(count, "--gateway-workers"), catch: (error) => error as Error })
    })
    return yield* Layer.launch(serveLayer(picked as ReadonlySet<Role>, { gatewayWorkers: workers }))
  })
).pipe(Command.withDescription("run the service (gateway, builder and API; embedded database and stream by default)"))

const migrate = Command.make(
  "migrate",
  {},
  () =>
    Effect.gen(function*() {
      yield* Effect.scoped(Layer.build(MigrateLive))
      yield* Console.log("migrations applied")
    })
).pipe(Command.withDescription("apply database migrations (serve also does this at start)"))

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

const tokenCreate = Command.make(
  "create",
  {
    email: Flag.String("email").pipe(Flag.withDescription("the member's email")),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("workspace name")),
    tenant: Flag.String("tenant").pipe(Flag.withDescription("tenant name, when the workspace name is not unique"), Flag.optional),
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
    if (!revoked) return yield* Effect.fail(new Error(`no active token ${tokenId}`))
    yield* Console.log(`revoked ${tokenId} (refused everywhere within 5 seconds)`)
  })
).pipe(Command.withDescription("revoke a token"))

const signInLink = Command.make(
  "signin-link",
  {
    email: Flag.String("email").pipe(Flag.withDescription("the member's email")),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("workspace name")),
    tenant: Flag.String("tenant").pipe(Flag.withDescription("tenant name, when the workspace name is not unique"), Flag.optional),
    json
  },
  Effect.fn(function*({ email, workspace, tenant, json }) {
    const member = yield* Credentials.use((credentials) => credentials.member({ email, workspace, tenant: Option.getOrUndefined(tenant) }))
    const token = yield* AppSessions.use((sessions) => sessions.createSignInLink(member))
    const url = `${(yield* LedgerConfig).publicUrl}/signin/link?token=${token}`
    yield* Console.log(json ? JSON.stringify({ url }) : `${url}\n(one use, valid 24 hours; then choose a password at /account/password)`)
  })
).pipe(Command.withDescription("print a one-time link that signs the member in to the app (for users without a password)"))

const admin = Command.make("admin").pipe(
  Command.withDescription("administration: tenants, users and tokens"),
  Command.withSubcommands([
    bootstrap.pipe(Command.provide(AdminLive)),
    signInLink.pipe(Command.provide(AdminLive)),
    contentPolicy.pipe(Command.provide(ContentPolicyLive)),
    Command.make("token").pipe(
      Command.withDescription("issue and revoke tokens"),
      Command.withSubcommands([tokenCreate.pipe(Command.provide(AdminLive)), tokenRevoke.pipe(Command.provide(AdminLive))])
    )
  ])
)

const status = Command.make(
  "status",
  {
    json,
    watch: Flag.Boolean("watch").pipe(Flag.withDescription("refresh until interrupted"), Flag.withDefault(false)),
    interval: Flag.Int("interval").pipe(Flag.withDescription("seconds between refreshes with --watch"), Flag.withDefault(2))
  },
  Effect.fn(function*({ interval, json, watch }) {
    const status = yield* PipelineStatus
    // on a terminal, --watch redraws in place; with --json it prints one JSON document per line
    const clear = watch && !json && process.stdout.isTTY ? "\u001b[2J\u001b[H" : ""
    const show = Effect.flatMap(status.report, (report) => Console.log(json ? JSON.stringify(report) : clear + renderReport(report)))
    if (!watch) return yield* show
    return yield* show.pipe(Effect.andThen(Effect.sleep(`${Math.max(1, interval)} seconds`)), Effect.forever)
  })
).pipe(
  Command.withDescription("pipeline figures: stream length, group lag, pending, oldest pending age, dead letters, spool, decisions/s"),
  Command.provide(StatusLive)
)

const dlqList = Command.make(
  "list",
  { count: Flag.Int("count").pipe(Flag.withDescription("most dead letters to show"), Flag.withDefault(100)), json },
  Effect.fn(function*({ count, json }) {
    const letters = yield* listDeadLetters(yield* CaptureShards, count)
    if (!json) return yield* Console.log(renderDeadLetters(letters))
    yield* Console.log(JSON.stringify(letters.map((letter) => ({
      id: letter.id,
      shard: letter.shard,
      original_id: letter.original_id,
      failed_at: new Date(letter.failed_at).toISOString(),
      deliveries: letter.deliveries,
      reason: letter.reason,
      ...deadLetterIdentity(letter),
      payload: letter.payload
    }))))
  })
).pipe(Command.withDescription("list dead-lettered captures with the reason they failed"))

const dlqReplay = Command.make(
  "replay",
  {
    ids: Argument.String("ID").pipe(
      Argument.withDescription("dead-letter ids to replay (from `ledger dlq list`); all when none is given"),
      Argument.variadic()
    ),
    json
  },
  Effect.fn(function*({ ids, json }) {
    const replayed = yield* replayDeadLetters(yield* CaptureShards, ids.length === 0 ? undefined : ids)
    yield* Console.log(json ? JSON.stringify({ replayed }) : `replayed ${replayed} capture${replayed === 1 ? "" : "s"} into the capture stream`)
  })
).pipe(Command.withDescription("re-queue dead-lettered captures (all, or the given ids) for the builders"))

const dlq = Command.make("dlq").pipe(
  Command.withDescription("inspect or re-queue dead-lettered captures"),
  Command.withSubcommands([dlqList.pipe(Command.provide(DlqLive)), dlqReplay.pipe(Command.provide(DlqLive))])
)

const rebuild = Command.make(
  "rebuild",
  {
    batchSize: Flag.Int("batch-size").pipe(Flag.withDescription("decisions per transaction"), Flag.withDefault(500)),
    json
  },
  Effect.fn(function*({ batchSize, json }) {
    const rebuilder = yield* Rebuilder
    const bar = progressBar("rebuild")
    const result = yield* rebuilder.run({ batchSize: Math.max(1, batchSize), onProgress: bar.update }).pipe(Effect.ensuring(bar.finish))
    yield* Console.log(json ? JSON.stringify(result) : `rebuilt ${result.decisions} decisions in ${result.workspaces} workspaces: ${result.changed} changed, ${result.unreadable} unreadable`)
  })
).pipe(
  Command.withDescription("re-derive every decision from its stored raw call (progress on stderr); stop `serve` first in embedded mode"),
  Command.provide(RebuildLive)
)

export const ledger = Command.make("ledger").pipe(
  Command.withDescription("Agent Decision Ledger"),
  Command.withSubcommands([
    serve, migrate, admin, status, dlq, rebuild, checkpoint.pipe(Command.provide(IntegrityLive)), verify.pipe(Command.provide(IntegrityLive)),
    exportDecisions.pipe(Command.provide(IntegrityLive)), erase.pipe(Command.provide(IntegrityLive)), watch
  ])
)

ledger.pipe(
  Command.run({ version: "0.1.0" }),
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain
)
