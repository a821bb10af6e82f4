/**
 * Read benchmark: the REST API served by a real `ledger serve --roles api` process over the 1,000,000-decision
 * ledger of `bench/reads/seed.ts`, driven by autocannon with a Personal Access Token, one endpoint at a time.
 * Each request hits a different id, filter or page (ids sampled from the ledger, cursors from real pages), as
 * the member of the largest workspace (~400,000 decisions).
 *
 *   npx node bench/reads/run.ts [--decisions 1000000] [--database ledger_bench_reads] [--connections 8] [--seconds 10]
 *                               [--only "GET /v1/agents"]
 *
 * Seeds the database first when it holds no decisions (see seed.ts). Prints p50/p95/p99 latency and throughput
 * per endpoint against the targets (one decision ≤ 10 ms p95, lists and the session view ≤ 20 ms p95), and
 * writes them to bench/reads/results.json. `LEDGER_LOG_LEVEL=warn` runs the API without its access log;
 * `BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR"` profiles the API process.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { apiProcess } from "./apiProcess.ts"
import { measure, type Measured, memberToken, sampleScenarios } from "./scenarios.ts"
import { analyseDatabase, BENCH_DATABASE, benchDatabase, benchStore, countDecisions, seedReadsLedger } from "./seed.ts"

const { values } = parseArgs({
  options: {
    decisions: { type: "string", default: "1000000" },
    database: { type: "string", default: BENCH_DATABASE },
    connections: { type: "string", default: "8" },
    seconds: { type: "string", default: "10" },
    /** only the endpoints whose name contains this text */
    only: { type: "string", default: "" }
  }
})

const program = Effect.gen(function*() {
  const target = Number(values.decisions)
  const databaseUrl = yield* benchDatabase(values.database!, false)
  const connections = Number(values.connections)
  const seconds = Number(values.seconds)
  const results = yield* Effect.gen(function*() {
    const existing = yield* countDecisions
    if (existing === 0) {
      console.log(`seeding ${target} decisions into ${values.database} ...`)
      yield* seedReadsLedger({ decisions: target })
      yield* analyseDatabase(databaseUrl)
    } else {
      console.log(`${values.database}: ${existing} decisions`)
    }
    const { pat, principal } = yield* memberToken("bench/reads")
    const api = yield* apiProcess(databaseUrl, { name: "reads", logLevel: process.env.LEDGER_LOG_LEVEL ?? "info" })
    const scenarios = yield* sampleScenarios(principal, api.baseUrl, pat)
    const measured: Array<Measured> = []
    for (const scenario of scenarios.filter((s) => s.name.includes(values.only!))) {
      // a short warm-up (plans, connections, caches), then the measured run
      yield* measure(api.baseUrl, pat, scenario, connections, 2)
      const result = yield* measure(api.baseUrl, pat, scenario, connections, seconds)
      console.log(JSON.stringify(result))
      measured.push(result)
    }
    return measured
  }).pipe(Effect.scoped, Effect.provide(benchStore(databaseUrl)))

  const table = [
    `| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | target p95 | non-2xx | |`,
    `|---|---|---|---|---|---|---|---|---|`,
    ...results.map((r) => `| ${r.endpoint} | ${r.requests} | ${r.rps} | ${r.p50} | ${r.p95} | ${r.p99} | ≤ ${r.target_p95} | ${r.non2xx} | ${r.pass ? "✓" : "✗"} |`)
  ].join("\n")
  console.log(`\n${connections} connections, ${seconds} s per endpoint, ${Os.cpus().length} CPUs, load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}\n${table}`)
  Fs.writeFileSync(
    Path.join(import.meta.dirname, "results.json"),
    JSON.stringify({ at: new Date().toISOString(), connections, seconds, loadavg: Os.loadavg(), results }, null, 2) + "\n"
  )
})

NodeRuntime.runMain(program)
