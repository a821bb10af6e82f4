/**
 * What the read benchmarks (./run.ts, ../app/pages.ts) share: `ledger serve --roles api` as a process of its own on
 * a free port (its log in a temporary data directory), autocannon, and percentiles.
 */
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { freePort } from "../../test/support/ports.ts"

// autocannon ships no type declarations
export const autocannon: (options: object, done: (error: unknown, result: any) => void) => any = createRequire(import.meta.url)("autocannon")

/** What `driveGets` saw: every response time (ms), the answers that were not 2xx, and autocannon's own result. */
export interface Driven {
  readonly latencies: ReadonlyArray<number>
  readonly non2xx: number
  readonly result: any
}

/** autocannon GETs for `seconds` on `connections`, each request the next of `paths` (round robin). */
export const driveGets = (
  baseUrl: string,
  options: { readonly paths: ReadonlyArray<string>; readonly headers: Record<string, string>; readonly connections: number; readonly seconds: number }
) =>
  Effect.callback<Driven>((resume) => {
    const latencies: Array<number> = []
    let next = 0
    let non2xx = 0
    const instance = autocannon({
      url: baseUrl,
      connections: options.connections,
      duration: options.seconds,
      headers: options.headers,
      requests: [{
        method: "GET",
        setupRequest: (request: any) => ({ ...request, path: options.paths[next++ % options.paths.length] })
      }]
    }, (error: unknown, result: any) => {
      if (error) return resume(Effect.die(error))
      resume(Effect.succeed({ latencies, non2xx, result }))
    })
    instance.on("response", (_client: unknown, status: number, _bytes: number, responseTime: number) => {
      latencies.push(responseTime)
      if (status < 200 || status >= 300) non2xx++
    })
    return Effect.sync(() => instance.stop())
  })

export const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN
export const round = (ms: number) => Math.round(ms * 100) / 100

/**
 * `ledger serve --roles api` over the database on a free port, until the scope closes (`BENCH_NODE_FLAGS` go to its
 * node, e.g. `--cpu-prof`); no rate limit; its log in `logPath`.
 */
export const apiProcess = (databaseUrl: string, options: { readonly name: string; readonly logLevel: string }) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const port = await freePort()
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), `ledger-bench-${options.name}-`))
      const logPath = Path.join(dataDir, "api.log")
      const log = Fs.openSync(logPath, "w")
      const child = ChildProcess.spawn(process.execPath, [...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean), "bin/ledger.js", "serve", "--roles", "api"], {
        env: {
          ...process.env,
          DATABASE_URL: databaseUrl,
          LEDGER_HOST: "127.0.0.1",
          LEDGER_API_PORT: String(port),
          LEDGER_DATA_DIR: dataDir,
          LEDGER_API_RATE_LIMIT: "0",
          LEDGER_LOG_LEVEL: options.logLevel
        },
        stdio: ["ignore", log, log]
      })
      const baseUrl = `http://127.0.0.1:${port}`
      for (let attempt = 0; attempt < 300; attempt++) {
        const ok = await fetch(`${baseUrl}/healthz`).then((r) => r.ok, () => false)
        if (ok) return { child, baseUrl, dataDir, logPath }
        if (child.exitCode !== null) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      child.kill("SIGKILL")
      throw new Error(`the API did not start: see ${logPath}`)
    }),
    ({ child, dataDir }) =>
      Effect.promise(async () => {
        if (child.exitCode === null) {
          child.kill("SIGTERM")
          await new Promise((resolve) => child.once("exit", resolve))
        }
        Fs.rmSync(dataDir, { recursive: true, force: true })
      })
  )
