/**
 * `ledger serve --gateway-workers N`: the gateway role in N worker threads sharing the gateway port. Calls spread over
 * the workers and every answered call becomes a decision once; a Responses chain the gateway keeps itself continues
 * on whichever worker the next turn reaches; each worker spools on its own while Redis is away, shutdown keeps the
 * spools, and a later start with fewer workers takes over the spool of a worker that no longer runs — nothing lost.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Agent } from "undici"
import { assertNothingLost, callLoad } from "../support/call-load.ts"
import { testDatabase } from "../support/db.ts"
import { gatewayClient } from "../support/openai-client.ts"
import { TEST_REDIS_URL, tcpProxy } from "../support/redis.ts"
import { serveDataDir, serveProcess, stopsCleanly, terminate } from "../support/serve-process.ts"

const LEDGER = Path.resolve(import.meta.dirname, "../../bin/ledger.js")

/** The sum of a family's samples whose labels include `labels` (e.g. `gateway_worker="1"`). */
const total = (metrics: string, name: string, ...labels: ReadonlyArray<string>) =>
  metrics.split("\n")
    .filter((line) => line.startsWith(`${name}{`) && labels.every((label) => line.includes(label)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)

const spooled = (dir: string) => {
  try {
    return Fs.readFileSync(Path.join(dir, "captures.ndjson"), "utf8").split("\n").filter((line) => line !== "").length
  } catch {
    return 0
  }
}

/** `ledger serve` with arguments and environment that must be refused: its exit code and output. */
const refused = (args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = ChildProcess.spawn(process.execPath, [LEDGER, "serve", ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
      child.once("exit", (code) => {
        clearTimeout(timer)
        resolve({ code, output })
      })
    })
  )

describe("ledger serve --gateway-workers", () => {
  it.live("two workers share the port: calls spread over both, each a decision once; chains continue across workers; a clean SIGTERM", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const serve = yield* serveProcess({ databaseUrl: database.url, redisUrl: TEST_REDIS_URL, args: ["--gateway-workers", "2"] })
      assert.include(serve.output(), "gateway runs in worker threads sharing its port")

      const load = yield* callLoad(serve.gatewayUrl, serve.gatewayKey, { concurrency: 8, connectionPerCall: true })
      while (load.answered.length < 400) yield* Effect.sleep(20)
      assert.isAtLeast(yield* assertNothingLost(load, database.url), 400)

      // a Responses chain on a translated provider, each turn on a connection of its own (the kernel picks the worker)
      let previous: string | undefined
      for (let turn = 0; turn < 16; turn++) {
        const dispatcher = new Agent()
        const client = gatewayClient(
          { baseURL: `${serve.gatewayUrl}/v1`, gatewayKey: serve.gatewayKey },
          { query: { agent_id: "chain-agent" }, providerKey: "sk-ant-test", dispatcher }
        )
        const response = yield* Effect.promise(() =>
          client.responses.create({ model: "anthropic/claude-sonnet-4-6", input: `turn ${turn}`, stream: false, previous_response_id: previous ?? null })
        )
        yield* Effect.promise(() => dispatcher.close())
        assert.strictEqual(response.status, "completed")
        previous = response.id
      }

      // the API port's /metrics and each worker's gateway port answer with every thread's series
      for (const metrics of [yield* serve.metrics, yield* Effect.promise(async () => (await fetch(`${serve.gatewayUrl}/metrics`)).text())]) {
        for (const worker of ["0", "1"]) {
          const label = `gateway_worker="${worker}"`
          assert.isAbove(total(metrics, "ledger_gateway_requests_total", label, 'route="POST /v1/chat/completions"'), 0, `worker ${worker} answered calls`)
          assert.isAbove(total(metrics, "ledger_gateway_requests_total", label, 'route="POST /v1/responses"', 'status="200"'), 0, `worker ${worker} continued the chain`)
          assert.isAbove(total(metrics, "ledger_capture_published_total", label), 0, `worker ${worker} published`)
          assert.include(metrics, `nodejs_heap_size_used_bytes{${label},thread="gateway-${worker}"}`)
        }
      }
      assert.strictEqual(total(yield* serve.metrics, "ledger_gateway_requests_total", 'route="POST /v1/responses"', 'status="400"'), 0, "no turn was refused")

      yield* stopsCleanly(serve)
    }), { timeout: 120_000 })

  it.live("Redis away: each worker spools on its own; SIGTERM keeps the spools; one worker later takes over both, nothing lost", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const redis = yield* tcpProxy
      const dataDir = yield* serveDataDir
      const first = yield* serveProcess({ databaseUrl: database.url, redisUrl: redis.url, dataDir, args: ["--gateway-workers", "2"] })
      const load = yield* callLoad(first.gatewayUrl, first.gatewayKey, { concurrency: 8, connectionPerCall: true })
      while (load.answered.length < 100) yield* Effect.sleep(20)
      yield* redis.stop
      const before = load.answered.length
      while (load.answered.length < before + 400) yield* Effect.sleep(20)
      yield* load.stop
      const workerDirs = [Path.join(dataDir, "spool"), Path.join(dataDir, "spool", "worker-1")]
      for (const dir of workerDirs) assert.isAbove(spooled(dir), 0, `${dir} holds captures`)

      // shutdown while Redis is away: the workers keep their spools for the next start
      yield* terminate(first)
      assert.isAtLeast(workerDirs.reduce((sum, dir) => sum + spooled(dir), 0), 400 - 8 * 2)

      yield* redis.start
      const second = yield* serveProcess({ databaseUrl: database.url, redisUrl: redis.url, dataDir, streamKey: first.streamKey })
      assert.include(second.output(), "took over a capture spool no longer published from")
      assert.isFalse(Fs.existsSync(workerDirs[1]!), "worker 1's spool was taken over")
      assert.isAtLeast(yield* assertNothingLost(load, database.url), 500)
    }), { timeout: 150_000 })

  it.live("refused: workers over the embedded database, and a count out of range", () =>
    Effect.gen(function*() {
      const embedded = yield* refused(["--gateway-workers", "2"], { DATABASE_URL: undefined, REDIS_URL: undefined, LEDGER_DATA_DIR: yield* serveDataDir })
      assert.notStrictEqual(embedded.code, 0)
      assert.include(embedded.output, "2 gateway workers need DATABASE_URL and REDIS_URL")
      const zero = yield* refused(["--gateway-workers", "0"], {})
      assert.notStrictEqual(zero.code, 0)
      assert.include(zero.output, "--gateway-workers must be a whole number from 1 to 64, not 0")
      const environment = yield* refused([], { LEDGER_GATEWAY_WORKERS: "65", DATABASE_URL: undefined, REDIS_URL: undefined })
      assert.notStrictEqual(environment.code, 0)
      assert.include(environment.output, "LEDGER_GATEWAY_WORKERS must be a whole number from 1 to 64, not 65")
    }), { timeout: 60_000 })
})
