/**
 * The `ledger` command line: its commands, flags and output. What each command runs on is composed in layers/
 * (layers/Serve.ts for `serve`, layers/Cli.ts for the others); `watch` is in src/watcher/command.ts, `admin` in
 * src/ops/adminCommand.ts.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { AdminLive, ContentPolicyLive, DlqLive, IntegrityLive, MigrateLive, RebuildLive, StatusLive } from "../layers/Cli.ts"
import { ROLES, type Role, serveLayer } from "../layers/Serve.ts"
import { Rebuilder } from "./builder/Rebuild.ts"
import { progressBar } from "./supervision/progress.ts"
import { CaptureShards, listDeadLetters, replayDeadLetters } from "./capture/CaptureShards.ts"
import { deadLetterIdentity, PipelineStatus, renderDeadLetters, renderReport } from "./ops/Status.ts"
import { checkedGatewayWorkers, LedgerConfig } from "./config/LedgerConfig.ts"
import { checkpoint, verify } from "./integrity/command.ts"
import { erase } from "./integrity/eraseCommand.ts"
import { exportDecisions } from "./integrity/exportCommand.ts"
import { adminCommand, LEDGER_VERSION } from "./ops/adminCommand.ts"
import { forwardToServe } from "./ops/ServeControl.ts"
import { watch } from "./watcher/command.ts"
import { BadRequest } from "./domain/errors.ts"

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
      return yield* new BadRequest({ message: `--roles: unknown role(s) ${unknown.join(", ")}; expected ${ROLES.join(", ")}`, param: "--roles" })
    }
    // runs until interrupted (SIGINT/SIGTERM): servers stop accepting, in-flight requests finish, fibers stop
    const workers = yield* Option.match(gatewayWorkers, {
      onNone: () => Effect.succeed(undefined),
      onSome: (count) =>
        Effect.try({
          try: () => checkedGatewayWorkers(count, "--gateway-workers"),
          catch: (error) => new BadRequest({ message: (error as Error).message, param: "--gateway-workers" })
        })
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
    serve, migrate, adminCommand(AdminLive, ContentPolicyLive), status, dlq, rebuild, checkpoint.pipe(Command.provide(IntegrityLive)), verify.pipe(Command.provide(IntegrityLive)),
    exportDecisions.pipe(Command.provide(IntegrityLive)), erase.pipe(Command.provide(IntegrityLive)), watch
  ])
)

/** Beside a running embedded `ledger serve`, `admin` commands run in it (src/ops/ServeControl.ts). */
const forwarded = (args: ReadonlyArray<string>) =>
  args[0] !== "admin"
    ? Effect.succeed(false)
    // a configuration that does not load fails the command itself, as it would without a serve
    : LedgerConfig.layer.pipe(Layer.build, Effect.option, Effect.flatMap(Option.match({
      onNone: () => Effect.succeed(false),
      onSome: (context) => forwardToServe(args).pipe(Effect.provideContext(context))
    })), Effect.scoped)

Effect.gen(function*() {
  if (yield* forwarded(process.argv.slice(2))) return
  yield* Command.run(ledger, { version: LEDGER_VERSION })
}).pipe(
  // another process on the embedded database's directory: one line, no stack
  Effect.catchTag("DataDirBusy", (error) => Console.error(error.message).pipe(Effect.andThen(Effect.sync(() => (process.exitCode = 1))))),
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain
)
