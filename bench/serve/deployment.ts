/**
 * A `ledger serve` deployment for the serve benchmarks: a database, a stream key and a data directory of its own,
 * every provider at the fake, a tenant bootstrapped; its processes started from a layout's commands and removed with
 * everything they made.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { RedisClientType } from "redis"
import { freePort, ROOT, startChild, stopChildren, waitFor } from "../gateway/harness.ts"

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** A process of a layout: its arguments, and whether it serves the API (a builder-only one gets a port of its own). */
export interface Command {
  readonly args: ReadonlyArray<string>
  readonly api: boolean
}

/** How the roles are spread, one layout at a time. */
export const LAYOUTS: Record<string, ReadonlyArray<Command>> = {
  /** `ledger serve` as shipped: builders and analytics in a worker thread of their own */
  thread: [{ args: ["bin/ledger.js", "serve"], api: true }],
  /** the same split across two processes */
  processes: [{ args: ["bin/ledger.js", "serve", "--roles", "gateway,api"], api: true }, { args: ["bin/ledger.js", "serve", "--roles", "builder"], api: false }],
  /** the gateway and the API with no builders at all (the captures wait in the stream): the floor of this machine */
  alone: [{ args: ["bin/ledger.js", "serve", "--roles", "gateway,api"], api: true }],
  /** every role on one event loop: the layout before builders had a thread of their own */
  shared: [{ args: ["bench/serve/shared-loop.ts"], api: true }]
}

/** Runs one SQL statement against a database. */
export const sql = <A extends object>(url: string, statement: string) =>
  Effect.runPromise(
    PgClient.PgClient.use((client) => client.unsafe<A>(statement)).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
    )
  )

/** A sample's value from a Prometheus exposition, e.g. `metricOf(text, 'nodejs_heap_size_used_bytes\\{thread="main"\\}')`. */
export const metricOf = (text: string, pattern: string) => Number(new RegExp(`^${pattern} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN)

/** A line on stderr with the time, so a long run shows where it is. */
export const progress = (message: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`)

export interface Deployment {
  readonly databaseUrl: string
  readonly streamKey: string
  readonly apiUrl: string
  /** origin of the gateway */
  readonly gatewayUrl: string
  readonly gatewayKey: string
  /** decision rows in its database */
  readonly decisions: () => Promise<number>
  /** its `/metrics` (every thread's) */
  readonly metrics: () => Promise<string>
  /** what its processes wrote on stderr, non-empty lines */
  readonly logged: () => ReadonlyArray<string>
  /** Stops its processes (they drain as they stop) and removes its database, stream keys and data directory. */
  readonly remove: () => Promise<void>
}

export const deploy = async (options: {
  readonly name: string
  readonly layout: ReadonlyArray<Command>
  readonly fakeUrl: string
  readonly redis: RedisClientType
  /** adds to (or overrides) the processes' environment */
  readonly env?: NodeJS.ProcessEnv
}): Promise<Deployment> => {
  const name = `ledger_bench_${options.name}_${process.pid}`
  const databaseUrl = new URL(ADMIN_URL)
  databaseUrl.pathname = `/${name}`
  const streamKey = `bench:${options.name}:${process.pid}:captures`
  const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-bench-serve-"))
  const [apiPort, gatewayPort] = [await freePort(), await freePort()]
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl.toString(),
    REDIS_URL,
    LEDGER_STREAM_KEY: streamKey,
    LEDGER_DATA_DIR: dataDir,
    LEDGER_API_PORT: String(apiPort),
    LEDGER_GATEWAY_PORT: String(gatewayPort),
    LEDGER_LOG_LEVEL: "warn",
    LEDGER_OPENAI_BASE_URL: `${options.fakeUrl}/v1`,
    LEDGER_ANTHROPIC_BASE_URL: options.fakeUrl,
    LEDGER_GEMINI_BASE_URL: options.fakeUrl,
    LEDGER_BEDROCK_BASE_URL: options.fakeUrl,
    ...options.env
  }
  const started: Array<Awaited<ReturnType<typeof startChild>>> = []
  const remove = async () => {
    await stopChildren(started.map((process) => process.child))
    await sql(ADMIN_URL, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
    for await (const keys of options.redis.scanIterator({ MATCH: `${streamKey}*`, COUNT: 100 })) {
      if (keys.length > 0) await options.redis.del(keys).catch(() => undefined)
    }
    Fs.rmSync(dataDir, { recursive: true, force: true })
  }
  await sql(ADMIN_URL, `CREATE DATABASE ${name}`)
  try {
    execFileSync(process.execPath, ["bin/ledger.js", "migrate"], { cwd: ROOT, env, stdio: "pipe" })
    const boot = JSON.parse(execFileSync(process.execPath, [
      "bin/ledger.js", "admin", "bootstrap", "--tenant", "bench", "--workspace", "main", "--email", "bench@bench.test", "--json"
    ], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] }).toString()) as { gateway_key: string }
    for (const command of options.layout) {
      // every process answers its ops routes on its API port: a builder-only one on a port of its own
      const port = command.api ? apiPort : await freePort()
      started.push(await startChild([...command.args], { ...env, LEDGER_API_PORT: String(port) }, null))
      await waitFor(`http://127.0.0.1:${port}/readyz`)
    }
    const apiUrl = `http://127.0.0.1:${apiPort}`
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`
    await waitFor(`${gatewayUrl}/healthz`)
    return {
      databaseUrl: databaseUrl.toString(),
      streamKey,
      apiUrl,
      gatewayUrl,
      gatewayKey: boot.gateway_key,
      decisions: async () => Number((await sql<{ n: string }>(databaseUrl.toString(), "SELECT count(*) AS n FROM decisions"))[0]!.n),
      metrics: async () => (await fetch(`${apiUrl}/metrics`, { signal: AbortSignal.timeout(10_000) })).text(),
      logged: () => started.flatMap((process) => process.stderr().split("\n").filter((line) => line.trim() !== "")),
      remove
    }
  } catch (error) {
    await remove()
    throw error
  }
}
