/**
 * The default `ledger serve` — every role in one process, as a user runs it with an external PostgreSQL and Redis
 * — as a child process of the test, pointed at the fake providers. It is bootstrapped with `ledger admin bootstrap`
 * (its Gateway Key and PAT), started on free ports, and stopped with the scope.
 *
 *   const serve = yield* serveProcess({ databaseUrl, redisUrl })
 *   await fetch(`${serve.gatewayUrl}/v1/chat/completions`, { headers: { authorization: `Bearer ${serve.gatewayKey}` }, ... })
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { startFakeProviders } from "./fake-providers.ts"
import { spawnOnFreePorts } from "./ports.ts"
import { testKeyPrefix } from "./redis.ts"

const ROOT = Path.resolve(import.meta.dirname, "../..")
const LEDGER = Path.join(ROOT, "bin/ledger.js")

export interface ServeProcess {
  readonly gatewayUrl: string
  readonly apiUrl: string
  readonly gatewayKey: string
  readonly pat: string
  readonly streamKey: string
  readonly dataDir: string
  /** what it wrote to stdout and stderr so far */
  readonly output: () => string
  /** the process's /metrics (API port) */
  readonly metrics: Effect.Effect<string>
  /** Runs `ledger ARGS` with the serving process's settings; its stdout. */
  readonly ledger: (args: ReadonlyArray<string>) => Effect.Effect<string>
  /** Sends the signal; resolves with the exit code once it has exited. */
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<number | null>
}

const run = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<string>((resolve, reject) => {
    ChildProcess.execFile(process.execPath, [LEDGER, ...args], { cwd: ROOT, env: { ...process.env, ...env }, maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`ledger ${args.join(" ")}: ${error.message}\n${stderr}`)))
  })

const answers = async (url: string) => {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).ok
  } catch {
    return false
  }
}

/** A data directory for `serveProcess`, removed with the scope (pass it to several processes to share one). */
export const serveDataDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-serve-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

export const serveProcess = (options: {
  /** unset: the embedded database in the data directory */
  readonly databaseUrl?: string
  /** unset: the in-process capture stream */
  readonly redisUrl?: string
  readonly env?: Record<string, string>
  /** more arguments of `ledger serve` */
  readonly args?: ReadonlyArray<string>
  /** the data directory (default: one of its own) */
  readonly dataDir?: string
  /** the stream key (default: one of its own) */
  readonly streamKey?: string
}) =>
  Effect.gen(function*() {
    const fake = yield* Effect.acquireRelease(Effect.promise(() => startFakeProviders({ record: false })), (fake) => Effect.promise(() => fake.close()))
    const streamKey = options.streamKey ?? `${yield* testKeyPrefix("serve")}captures`
    const dataDir = options.dataDir ?? (yield* serveDataDir)
    const env: Record<string, string> = {
      ...(options.databaseUrl === undefined ? {} : { DATABASE_URL: options.databaseUrl }),
      ...(options.redisUrl === undefined ? {} : { REDIS_URL: options.redisUrl }),
      LEDGER_STREAM_KEY: streamKey,
      LEDGER_DATA_DIR: dataDir,
      LEDGER_LOG_LEVEL: "info",
      LEDGER_OPENAI_BASE_URL: fake.baseUrls.openai,
      LEDGER_ANTHROPIC_BASE_URL: fake.baseUrls.anthropic,
      LEDGER_GEMINI_BASE_URL: fake.baseUrls.gemini,
      LEDGER_BEDROCK_BASE_URL: fake.baseUrls.bedrock,
      ...options.env
    }
    const boot = JSON.parse(yield* Effect.promise(() =>
      run(["admin", "bootstrap", "--tenant", "serve", "--workspace", "main", "--email", "ops@serve.test", "--json"], env)
    )) as { gateway_key: string; pat: string }

    return yield* Effect.acquireRelease(
      spawnOnFreePorts(2, async ([apiPort, gatewayPort]) => {
        const child = ChildProcess.spawn(process.execPath, [LEDGER, "serve", ...(options.args ?? [])], {
          cwd: ROOT,
          env: { ...process.env, ...env, LEDGER_API_PORT: String(apiPort), LEDGER_GATEWAY_PORT: String(gatewayPort) },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let output = ""
        const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-500_000))
        child.stdout!.on("data", keep)
        child.stderr!.on("data", keep)
        const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
        const apiUrl = `http://127.0.0.1:${apiPort}`
        const gatewayUrl = `http://127.0.0.1:${gatewayPort}`
        const started = Date.now()
        while (!(await answers(`${apiUrl}/readyz`) && await answers(`${gatewayUrl}/healthz`))) {
          if (child.exitCode !== null) throw new Error(`ledger serve exited:\n${output}`)
          if (Date.now() - started > 30_000) {
            child.kill("SIGKILL")
            throw new Error(`ledger serve not ready within 30 s:\n${output}`)
          }
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        const serve: ServeProcess = {
          gatewayUrl,
          apiUrl,
          gatewayKey: boot.gateway_key,
          pat: boot.pat,
          streamKey,
          dataDir,
          output: () => output,
          metrics: Effect.promise(async () => (await fetch(`${apiUrl}/metrics`)).text()),
          ledger: (args) => Effect.promise(() => run(args, env)),
          kill: (signal) =>
            Effect.promise(() => {
              if (child.exitCode === null && child.signalCode === null) child.kill(signal)
              return exit
            })
        }
        return serve
      }),
      (serve) => Effect.asVoid(serve.kill("SIGKILL"))
    )
  })

/** SIGTERM, and a clean stop: Effect's runtime exits 130 when the signal interrupts it (0 when it was done). */
export const terminate = (serve: ServeProcess) =>
  Effect.map(serve.kill("SIGTERM"), (code) => assert.include([0, 130], code, serve.output().slice(-3_000)))

/** A clean stop, with nothing logged at ERROR or FATAL while it ran. */
export const stopsCleanly = (serve: ServeProcess) =>
  Effect.map(terminate(serve), () => assert.notMatch(serve.output(), /"level":"(ERROR|FATAL)"/i))
