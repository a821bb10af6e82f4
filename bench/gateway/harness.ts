/**
 * What the gateway benchmarks share: child processes (fake provider, bare proxy, gateways), autocannon runs with
 * per-request times, and CPU time read from Linux /proc.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Net from "node:net"
import * as Path from "node:path"

/** `--name value` from the command line, or the fallback. */
export const option = (name: string, fallback: string): string => {
  const args = process.argv.slice(2)
  const at = args.indexOf(`--${name}`)
  return at === -1 ? fallback : args[at + 1]!
}

/** The part of autocannon's API used here (it ships no types). */
interface AutocannonRun extends PromiseLike<{
  readonly requests: { readonly total: number }
  readonly errors: number
  readonly non2xx: number
  readonly timeouts: number
  readonly statusCodeStats: Record<string, { readonly count: number }>
}> {
  on(event: "response", listener: (client: unknown, status: number, bytes: number, responseTime: number) => void): void
}
const autocannon = createRequire(import.meta.url)("autocannon") as (options: {
  readonly url: string
  readonly method: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly connections: number
  readonly duration: number
  readonly pipelining: number
}) => AutocannonRun

export const ROOT = Path.resolve(import.meta.dirname, "../..")

export { mainThreadCpu, processCpu, redisCpuSeconds } from "../support/cpu.ts"

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const children: Array<ChildProcess> = []
const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null
// a benchmark that fails still stops what it started
process.on("exit", () => {
  for (const child of children) if (running(child)) child.kill("SIGTERM")
})

/**
 * Stops the children given (every child by default) and waits for them to exit: a gateway publishes the captures it
 * still holds as it stops.
 */
export const stopChildren = (which: ReadonlyArray<ChildProcess> = children) =>
  Promise.all(which.filter(running).map((child) =>
    new Promise<void>((resolve) => {
      child.once("exit", () => resolve())
      child.kill("SIGTERM")
    })
  ))

/**
 * Starts a child, resolves with the first line it prints on stdout (matching `readyLine` if given), or at once with
 * `readyLine` null.
 */
export const startChild = (command: Array<string>, env: NodeJS.ProcessEnv, readyLine?: RegExp | null, cwd = ROOT) =>
  new Promise<{ child: ChildProcess; line: string; stderr: () => string }>((resolve, reject) => {
    const child = spawn(process.execPath, command, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    children.push(child)
    if (readyLine === null) resolve({ child, line: "", stderr: () => err })
    let out = ""
    let err = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = out.split("\n").find((l) => readyLine === undefined || readyLine === null ? l.trim() !== "" : readyLine.test(l))
      if (line !== undefined) resolve({ child, line, stderr: () => err })
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      err += chunk.toString()
    })
    child.once("exit", (code) => reject(new Error(`${command.join(" ")} exited with ${code}\n${err.slice(-2000)}`)))
  })

export const waitFor = async (url: string) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(5_000) })).ok) return
    } catch {
      // not listening (or not answering) yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${url} did not come up`)
}

export interface Measured {
  readonly rps: number
  readonly requests: number
  readonly errors: number
  /** what the errors were: non-2xx statuses and socket errors/timeouts */
  readonly errorKinds: string
  readonly meanMs: number
  readonly p50Ms: number
  readonly p99Ms: number
}

/** One autocannon run: its calls, errors and the time of every answered request. */
export interface Sample {
  readonly seconds: number
  readonly requests: number
  readonly errors: number
  readonly errorKinds: ReadonlyArray<string>
  readonly times: ReadonlyArray<number>
}

export const sample = async (
  url: string,
  headers: Record<string, string>,
  body: string,
  connections: number,
  seconds: number
): Promise<Sample> => {
  const times: Array<number> = []
  const instance = autocannon({ url, method: "POST", headers, body, connections, duration: seconds, pipelining: 1 })
  instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    times.push(responseTime)
  })
  const result = await instance
  return {
    seconds,
    requests: result.requests.total,
    errors: result.errors + result.non2xx + result.timeouts,
    errorKinds: [
      ...Object.entries(result.statusCodeStats).filter(([status]) => !status.startsWith("2")).map(([status, { count }]) => `${count}x${status}`),
      ...(result.errors > 0 ? [`${result.errors} socket errors`] : []),
      ...(result.timeouts > 0 ? [`${result.timeouts} timeouts`] : [])
    ],
    times
  }
}

/** Several samples of one target taken as one measurement: calls over their total time, latency over all calls. */
export const summarise = (samples: ReadonlyArray<Sample>): Measured => {
  const times = samples.flatMap((s) => s.times).sort((a, b) => a - b)
  const quantile = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0
  const requests = samples.reduce((sum, s) => sum + s.requests, 0)
  return {
    rps: requests / samples.reduce((sum, s) => sum + s.seconds, 0),
    requests,
    errors: samples.reduce((sum, s) => sum + s.errors, 0),
    errorKinds: samples.flatMap((s) => s.errorKinds).join(", "),
    meanMs: times.reduce((sum, t) => sum + t, 0) / Math.max(1, times.length),
    p50Ms: quantile(0.5),
    p99Ms: quantile(0.99)
  }
}

/** One autocannon run, summarised. */
export const measure = async (...run: Parameters<typeof sample>): Promise<Measured> => summarise([await sample(...run)])

export interface GatewayProcess {
  readonly child: ChildProcess
  /** origin, e.g. http://127.0.0.1:4000 */
  readonly url: string
  /** the Gateway Key the embedded database's first start wrote to credentials.json */
  readonly key: string
  readonly stderr: () => string
}

/**
 * Starts `ledger serve --roles gateway` from the checkout at `root` (the embedded database; `env` adds to the
 * environment, e.g. a stream key and REDIS_URL) with OpenAI pointed at `fakeUrl`, and waits until it is healthy.
 */
export const startGateway = async (options: {
  readonly root?: string
  readonly dataDir: string
  readonly fakeUrl: string
  readonly env: NodeJS.ProcessEnv
  /** gateway worker threads (`--gateway-workers`); more than 1 needs `databaseUrl` */
  readonly workers?: number
  /** an external database (bootstrapped here) instead of the embedded one */
  readonly databaseUrl?: string
}): Promise<GatewayProcess> => {
  const port = await freePort()
  // without a database URL: the embedded database, whose first start writes the gateway key to credentials.json
  const { DATABASE_URL: _external, ...inherited } = process.env
  const database = options.databaseUrl === undefined ? {} : { DATABASE_URL: options.databaseUrl }
  const bootstrapped = options.databaseUrl === undefined ? undefined : JSON.parse(
    execFileSync(process.execPath, ["bin/ledger.js", "admin", "bootstrap", "--tenant", "bench", "--workspace", "bench", "--email", "bench@bench.test", "--json"], {
      cwd: options.root ?? ROOT,
      env: { ...inherited, ...database, ...options.env, LEDGER_LOG_LEVEL: "warn" },
      encoding: "utf8"
    })
  ) as { gateway_key: string }
  const workers = (options.workers ?? 1) > 1 ? ["--gateway-workers", String(options.workers)] : []
  const gateway = await startChild(["bin/ledger.js", "serve", "--roles", "gateway", ...workers], {
    ...inherited,
    ...database,
    LEDGER_GATEWAY_PORT: String(port),
    LEDGER_API_PORT: String(await freePort()),
    LEDGER_DATA_DIR: options.dataDir,
    // every provider at the fake: nothing leaves the machine
    LEDGER_OPENAI_BASE_URL: `${options.fakeUrl}/v1`,
    LEDGER_ANTHROPIC_BASE_URL: options.fakeUrl,
    LEDGER_GEMINI_BASE_URL: options.fakeUrl,
    LEDGER_BEDROCK_BASE_URL: options.fakeUrl,
    LEDGER_LOG_LEVEL: "warn",
    ...options.env
  }, /ledger:/, options.root)
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/healthz`)
  const { gateway_key: key } = bootstrapped ?? JSON.parse(Fs.readFileSync(Path.join(options.dataDir, "credentials.json"), "utf8"))
  return { child: gateway.child, url, key, stderr: gateway.stderr }
}
