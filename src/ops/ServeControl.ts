/**
 * `ledger admin …` beside a running embedded `ledger serve`. The embedded database is the serving process's alone
 * (store/DataDirLock.ts), so the command line sends the command's arguments to that process, which runs the same
 * command on its own services and answers with what it printed: a token it issues is in its authenticator's
 * database at once. serve listens on a loopback port and wants a secret; both are in the lock file (0600), and
 * whoever can read that can read the database files anyway.
 */
import { NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Option, Schedule, Stdio, Terminal } from "effect"
import { CliError, Command } from "effect/cli"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Util from "node:util"
import { AppSessions } from "../auth/AppSessions.ts"
import { Credentials } from "../auth/Credentials.ts"
import { ContentPolicies } from "../builder/ContentPolicies.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { advertiseControl, DataDirBusy, holder, type LockHolder } from "../store/DataDirLock.ts"
import { TenantSql } from "../store/TenantSql.ts"
import { adminCommand, LEDGER_VERSION } from "./adminCommand.ts"

/** What the command printed, line by line, and its exit code. */
interface Answer {
  readonly stdout: ReadonlyArray<string>
  readonly stderr: ReadonlyArray<string>
  readonly exit_code: number
}

const MAX_REQUEST_BYTES = 64 * 1024

/** A console that keeps what it is given. */
const capturing = (stdout: Array<string>, stderr: Array<string>): Console.Console => {
  const keep = (lines: Array<string>) => (...args: ReadonlyArray<unknown>) => void lines.push(Util.format(...args))
  return Object.assign(Object.create(globalThis.console), {
    log: keep(stdout),
    info: keep(stdout),
    error: keep(stderr),
    warn: keep(stderr)
  })
}

/** No prompts inside the server: the command line's terminal is not its own. */
const noPrompts = "ledger serve runs this command for the command line, without a terminal: give its flags"
const noTerminal = Terminal.make({
  columns: Effect.succeed(80),
  rows: Effect.succeed(24),
  size: Effect.die(noPrompts),
  readInput: Effect.die(noPrompts),
  readLine: Effect.fail(new Terminal.QuitError()),
  display: () => Effect.void
})

const runAdmin = Effect.gen(function*() {
  const services = yield* Effect.context<Credentials | AppSessions | LedgerConfig | ContentPolicies | TenantSql | NodeServices.NodeServices>()
  const own = Layer.succeedContext(services)
  const ledger = Command.make("ledger").pipe(Command.withSubcommands([adminCommand(own, own)]))
  const run = Command.runWith(ledger, { version: LEDGER_VERSION })
  return Effect.fn("ServeControl.runAdmin")(function*(args: ReadonlyArray<string>) {
    const stdout: Array<string> = []
    const stderr: Array<string> = []
    const exit = yield* run(args).pipe(
      Effect.provideService(Console.Console, capturing(stdout, stderr)),
      Effect.provideService(Terminal.Terminal, noTerminal),
      Effect.provide(Stdio.layerTest({})),
      Effect.provideContext(services),
      Effect.exit
    )
    if (Exit.isSuccess(exit)) return { stdout, stderr, exit_code: 0 } satisfies Answer
    const error = Cause.squash(exit.cause)
    // the command line's own errors (a missing flag) were presented with the help already
    if (!CliError.isCliError(error)) stderr.push(error instanceof Error ? error.message : String(error))
    return { stdout, stderr, exit_code: 1 } satisfies Answer
  })
})

const readBody = (request: Http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let body = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => {
      body += chunk
      if (body.length > MAX_REQUEST_BYTES) request.destroy(new Error("request too large"))
    })
    request.on("end", () => resolve(body))
    request.on("error", reject)
  })

const adminArgs = (body: string): ReadonlyArray<string> | undefined => {
  try {
    const args = (JSON.parse(body) as { args?: unknown }).args
    return Array.isArray(args) && args[0] === "admin" && args.every((arg) => typeof arg === "string") ? args : undefined
  } catch {
    return undefined
  }
}

const authorized = (header: string | undefined, secret: string) => {
  const given = Buffer.from(header ?? "")
  const expected = Buffer.from(`Bearer ${secret}`)
  return given.length === expected.length && Crypto.timingSafeEqual(given, expected)
}

/** In embedded mode: the endpoint `ledger admin …` reaches this process on, advertised in the data directory's lock. */
export const ServeControlLive = Layer.unwrap(LedgerConfig.useSync((config) =>
  Option.isSome(config.databaseUrl) ? Layer.empty : Layer.effectDiscard(Effect.gen(function*() {
    const admin = yield* runAdmin
    const context = yield* Effect.context<never>()
    const runPromise = Effect.runPromiseWith(context)
    const secret = Crypto.randomBytes(32).toString("base64url")
    const server = Http.createServer((request, response) => {
      const reply = (status: number, answer?: Answer) => {
        response.writeHead(status, { "content-type": "application/json" }).end(answer === undefined ? "{}" : JSON.stringify(answer))
      }
      if (request.method !== "POST" || request.url !== "/admin") return reply(404)
      if (!authorized(request.headers.authorization, secret)) return reply(401)
      readBody(request).then((body) => {
        const args = adminArgs(body)
        if (args === undefined) return reply(400)
        return runPromise(admin(args)).then((answer) => reply(200, answer))
      }).catch(() => reply(500))
    })
    const port = yield* Effect.acquireRelease(
      Effect.callback<number, Error>((resume) => {
        server.once("error", (error) => resume(Effect.fail(error)))
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () => Effect.callback<void>((resume) => {
        server.closeIdleConnections()
        server.close(() => resume(Effect.void))
      })
    )
    yield* advertiseControl(config.dataDir, { port, secret })
  })).pipe(Layer.provide(Layer.mergeAll(ContentPolicies.layer, NodeServices.layer)))
))

/** The serving process's endpoint, waiting while it starts; none when no `ledger serve` holds the directory. */
const endpointOf = (dataDir: string) =>
  Effect.gen(function*() {
    const current = yield* holder(dataDir)
    if (Option.isNone(current) || current.value.control !== undefined || current.value.command !== "ledger serve") return current
    return yield* Effect.fail(current.value)
  }).pipe(
    Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))),
    Effect.catch((starting: LockHolder) =>
      Effect.fail(
        new DataDirBusy({
          dataDir,
          message: `ledger serve (pid ${starting.pid}) holds the data directory ${dataDir} and has not started taking commands; try again, or stop it first`
        })
      )
    )
  )

/**
 * Runs `ledger admin ARGS` in the embedded `ledger serve` holding the data directory and prints its answer; false when
 * no serve holds it (the command then runs here). Another command holding it is left to refuse on its own.
 */
export const forwardToServe = Effect.fn("ServeControl.forward")(function*(args: ReadonlyArray<string>) {
  const config = yield* LedgerConfig
  if (Option.isSome(config.databaseUrl)) return false
  const current = yield* endpointOf(config.dataDir)
  if (Option.isNone(current) || current.value.control === undefined) return false
  const { control, pid } = current.value
  const answer = yield* Effect.tryPromise({
    try: async () => {
      const response = await fetch(`http://127.0.0.1:${control.port}/admin`, {
        method: "POST",
        headers: { authorization: `Bearer ${control.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ args }),
        // a serve that stopped answering (suspended, stuck) is reported instead of waited for
        signal: AbortSignal.timeout(60_000)
      })
      if (!response.ok) throw new Error(`status ${response.status}`)
      return await response.json() as Answer
    },
    catch: (error) => {
      // fetch's own message is "fetch failed"; the reason (ECONNREFUSED, ...) is its cause's
      const reason = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message
      return new DataDirBusy({
        dataDir: config.dataDir,
        message: `ledger serve (pid ${pid}) holds the data directory ${config.dataDir} and did not answer (${reason}); try again, or stop it first`
      })
    }
  })
  if (answer.stdout.length > 0) yield* Console.log(answer.stdout.join("\n"))
  if (answer.stderr.length > 0) yield* Console.error(answer.stderr.join("\n"))
  yield* Effect.sync(() => (process.exitCode = answer.exit_code))
  return true
})
