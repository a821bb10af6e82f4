/**
 * `ledger status` as operators run it: figures from Redis and the database (table, --json, --watch), the spool
 * read from the data directory, and — without REDIS_URL and DATABASE_URL — from the serving process's /metrics.
 * Also the pipeline gauges and counters on /metrics.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { DecisionBuilder } from "../../src/builder/DecisionBuilder.ts"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { PipelineMetrics } from "../../src/ops/PipelineMetrics.ts"
import { parseMetrics, type PipelineReport } from "../../src/ops/Status.ts"
import { TEST_REDIS_URL, testKeyPrefix } from "../support/redis.ts"
import { storeWithPoolLayer, tempDir } from "../support/stack.ts"
import { captureJson, ledgerEnv, MINUTE, newWorkspace, runLedger, spawnBuilder, publish, T0 } from "./builder-harness.ts"

const stack = Layer.unwrap(Effect.map(testKeyPrefix("status"), (prefix) =>
  Layer.mergeAll(DecisionBuilder.layer, PipelineMetrics.layer).pipe(
    Layer.provideMerge(CaptureShards.redis),
    Layer.provideMerge(storeWithPoolLayer("postgres", { redisUrl: Option.some(Redacted.make(TEST_REDIS_URL)), streamKey: `${prefix}captures` }))
  )
))

/** Runs `ledger status --watch --json` until it printed `count` reports. */
const watch = (env: Record<string, string>, count: number) =>
  Effect.promise(() =>
    new Promise<Array<PipelineReport>>((resolve, reject) => {
      const root = Path.resolve(import.meta.dirname, "../..")
      const child = ChildProcess.spawn(process.execPath, [Path.join(root, "bin/ledger.js"), "status", "--watch", "--json", "--interval", "1"], {
        cwd: root,
        env: { ...process.env, ...env }
      })
      const reports: Array<PipelineReport> = []
      let buffer = ""
      child.stdout.on("data", (chunk: Buffer) => {
        buffer += chunk.toString()
        const lines = buffer.split("\n")
        buffer = lines.pop()!
        for (const line of lines) if (line.trim() !== "") reports.push(JSON.parse(line))
        if (reports.length >= count) child.kill("SIGINT")
      })
      child.once("exit", () => (reports.length >= count ? resolve(reports) : reject(new Error(`only ${reports.length} reports`))))
    })
  )

describe("ledger status", () => {
  layer(stack, { timeout: 120_000, excludeTestServices: true })("with Redis and PostgreSQL", (it) => {
    it.effect("reports stream, dead letters, spool and decisions per second as a table, JSON and a watch", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const stream = yield* CaptureStream
        const builder = yield* DecisionBuilder
        const identity = yield* newWorkspace()
        yield* publish([...Array.from({ length: 12 }, (_, i) => captureJson(identity, { agent_id: "agent-s", started_at: T0 + i * MINUTE, variant: i })), "not a capture"])
        // two consumer loops of one builder process, each under a throughput record of its own: one builder
        const delivered = yield* stream.read("status-test", { count: 20, blockMs: 0 })
        yield* builder.process("status-test/0.0", delivered.slice(0, 7))
        yield* builder.process("status-test/1.0", delivered.slice(7))
        yield* publish([captureJson(identity, { agent_id: "agent-s", started_at: T0 })])
        // a spool left by a gateway: three captures waiting
        const dataDir = yield* tempDir
        Fs.mkdirSync(Path.join(dataDir, "spool"))
        Fs.writeFileSync(Path.join(dataDir, "spool", "captures.ndjson"), "{}\n{}\n{}\n")
        const env = ledgerEnv(settings, { LEDGER_DATA_DIR: dataDir })
        // decisions per second count whole seconds: let the one the decisions were built in end
        yield* Effect.sleep(1_050 - (Date.now() % 1_000))

        const json = yield* runLedger(["status", "--json"], env)
        assert.strictEqual(json.code, 0, json.stderr)
        const report = JSON.parse(json.stdout) as PipelineReport
        assert.deepStrictEqual(report.problems, [])
        assert.deepStrictEqual(
          { ...report.stream!, length: undefined, persistence: undefined, oldest_waiting_ms: undefined },
          { source: "redis", length: undefined, lag: 1, pending: 0, oldest_pending_ms: null, dead_letters: 1, consumers: 1, persistence: undefined, oldest_waiting_ms: undefined }
        )
        // the capture no builder has read came in before the second that was waited out above
        assert.isAtLeast(report.stream!.oldest_waiting_ms!, 50)
        // what the machine's Redis is set to: said either way
        assert.match(report.stream!.persistence!.detail, /^appendonly=(yes|no) save=/)
        assert.deepStrictEqual(report.spool, { entries: 3, bytes: 9 })
        assert.deepStrictEqual(report.builders, { source: "database", decisions_per_second: 0.2, decisions_last_minute: 12, active_builders: 1 })

        const table = yield* runLedger(["status"], env)
        assert.strictEqual(table.code, 0, table.stderr)
        for (const row of [/^persistence\s+(yes|NONE|unknown)\s+appendonly=/m, /^stream length\s+\d+\s+\(Redis\)$/m, /^group lag\s+1 /m, /^behind\s+\d+(\.\d)? m?s\s+since the oldest capture not yet committed arrived$/m, /^dead letters\s+1\s+ledger dlq list$/m, /^spool\s+3 captures\s+9 B$/m, /^decisions\/s\s+0\.2\s+last minute: 12 by 1 builder$/m]) {
          assert.match(table.stdout, row)
        }

        const watched = yield* watch(env, 2)
        assert.strictEqual(watched.length, 2)
        assert.isAbove(Date.parse(watched[1]!.at) - Date.parse(watched[0]!.at), 900)

        // the same figures as gauges on /metrics
        yield* (yield* PipelineMetrics).refresh
        const metrics = parseMetrics(yield* PrometheusMetrics.format())
        assert.strictEqual(metrics.get("ledger_dead_letters"), 1)
        assert.strictEqual(metrics.get("ledger_stream_group_lag"), 1)
        assert.strictEqual(metrics.get("ledger_stream_pending"), 0)
        assert.isAtLeast(metrics.get("ledger_decisions_built_total") ?? 0, 12)
        assert.isAtLeast(metrics.get("ledger_captures_dead_lettered_total") ?? 0, 1)
      }), 90_000)
  })

  layer(Layer.empty, { timeout: 120_000, excludeTestServices: true })("embedded (no REDIS_URL, no DATABASE_URL)", (it) => {
    it.effect("reads the serving process's /metrics; dlq explains why it cannot run", () =>
      Effect.gen(function*() {
        const dataDir = yield* tempDir
        const env = { LEDGER_LOG_LEVEL: "warn", LEDGER_DATA_DIR: dataDir }
        const server = yield* spawnBuilder(env)
        const report = yield* runLedger(["status", "--json"], { ...env, LEDGER_API_PORT: String(server.port) })
        assert.strictEqual(report.code, 0, report.stderr)
        const parsed = JSON.parse(report.stdout) as PipelineReport
        assert.deepStrictEqual(parsed.problems, [])
        assert.deepStrictEqual(parsed.stream, {
          source: "metrics",
          length: 0,
          lag: 0,
          pending: 0,
          oldest_pending_ms: null,
          oldest_waiting_ms: null,
          dead_letters: 0,
          consumers: null,
          persistence: null
        })
        assert.deepStrictEqual(parsed.builders, { source: "metrics", decisions_per_second: 0, decisions_last_minute: null, active_builders: null })

        // nothing listening: the report says where it looked
        const unreachable = yield* runLedger(["status", "--json"], { ...env, LEDGER_API_PORT: "1" })
        assert.match((JSON.parse(unreachable.stdout) as PipelineReport).problems[0]!, /^stream \(in-process, no REDIS_URL\): .*127\.0\.0\.1:1\/metrics/)

        const dlq = yield* runLedger(["dlq", "list"], env)
        assert.notStrictEqual(dlq.code, 0)
        assert.match(dlq.stdout + dlq.stderr, /dlq needs REDIS_URL/)
      }), 90_000)
  })
})
