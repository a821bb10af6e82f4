/**
 * Analytics benchmark over the 1,000,000-decision ledger of bench/reads/seed.ts:
 *
 * 1. materialises it (every decision through the materialiser, then the detectors) and reports decisions/s;
 * 2. calls each analytics MCP tool over HTTP (`POST /mcp`, JSON-RPC `tools/call`, a Personal Access Token) as the
 *    member of the largest workspace (~400,000 decisions), one call at a time, each call with different arguments
 *    (agents, sessions, decisions, subjects, features and dates sampled from the ledger), and reports p50/p95/p99
 *    against the target (p95 ≤ 100 ms per tool).
 *
 *   npx node bench/analytics/run.ts [--database ledger_bench_analytics] [--decisions 1000000] [--calls 300] [--only query_graph]
 *
 * Seeds the database first when it holds no decisions; materialising is incremental (a second run only times the
 * tools). The API runs in this process; results go to bench/analytics/results.json.
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { StoreLive } from "../../layers/Store.ts"
import { Detectors } from "../../src/analytics/Detectors.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ModelCalls } from "../../src/analytics/ModelCalls.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { Health } from "../../src/serving/Health.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { freePort } from "../../test/support/ports.ts"
import { testSettings } from "../../test/support/settings.ts"
import { analyseDatabase, BENCH_TENANTS, BENCH_WORKSPACES, benchDatabase, countDecisions, seedReadsLedger } from "../reads/seed.ts"

const { values } = parseArgs({
  options: {
    database: { type: "string", default: "ledger_bench_analytics" },
    decisions: { type: "string", default: "1000000" },
    calls: { type: "string", default: "300" },
    only: { type: "string", default: "" }
  }
})

const TARGET_P95_MS = 100
const DAY = 86_400_000

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN
const round = (ms: number) => Math.round(ms * 100) / 100

interface Scenario {
  readonly tool: string
  /** arguments, used round-robin */
  readonly args: ReadonlyArray<Record<string, unknown>>
  /** another workspace's member when the main workspace has nothing to sample for the tool */
  readonly pat?: string
}

/** Arguments spread over the ledger, read as the member. */
const sampleScenarios = (principal: Principal) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    return yield* tenantSql.read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const agents = (yield* sql<{ agent_id: string }>`SELECT agent_id FROM agents ORDER BY agent_id`).map((a) => a.agent_id)
      const sessions = (yield* sql<{ id: string }>`SELECT session_id::text AS id FROM sessions TABLESAMPLE SYSTEM (5) LIMIT 100`).map((s) => s.id)
      const decisions = (yield* sql<{ id: string }>`SELECT ledger_id::text AS id FROM decision_search TABLESAMPLE SYSTEM (0.5) LIMIT 100`).map((d) => d.id)
      const subjects = (yield* sql<{ id: string }>`SELECT subject_id AS id FROM subjects ORDER BY session_count DESC, subject_id LIMIT 50`).map((s) => s.id)
      const features = (yield* sql<{ id: string }>`SELECT feature_id::text AS id FROM features ORDER BY last_at DESC LIMIT 100`).map((f) => f.id)
      const titles = (yield* sql<{ title: string }>`SELECT DISTINCT title FROM decisions TABLESAMPLE SYSTEM (0.2) LIMIT 50`).map((t) => t.title)
      const [span] = yield* sql<{ first: Date; last: Date }>`SELECT min(created_at) AS first, max(created_at) AS last FROM decision_search`
      const days = Array.from({ length: 30 }, (_, i) => new Date(span!.first.getTime() + ((i * 3 + 1) % 90) * DAY).toISOString())
      return [
        {
          tool: "query_graph",
          args: [
            { mode: "agent_network" },
            ...agents.slice(0, 20).map((agent_id) => ({ agent_id, depth: 2, limit: 100 })),
            ...sessions.slice(0, 40).map((session_id) => ({ session_id, depth: 2, limit: 100 })),
            ...decisions.slice(0, 40).map((ledger_id) => ({ ledger_id, depth: 3, limit: 100 })),
            ...subjects.slice(0, 20).map((subject) => ({ subject, direction: "in", depth: 2, limit: 100 }))
          ]
        },
        {
          tool: "search_similar_decisions",
          args: [
            ...decisions.slice(0, 50).map((ledger_id) => ({ ledger_id })),
            ...titles.map((text) => ({ text })),
            ...agents.slice(0, 10).map((agent_id, i) => ({ text: titles[i % titles.length]!, agent_id }))
          ]
        },
        {
          tool: "list_features",
          args: [
            {},
            { order: "cost" },
            { status: "delivered" },
            { status: "in_progress" },
            { status: "stalled", limit: 50 },
            ...agents.slice(0, 10).map((agent_id) => ({ agent_id }))
          ]
        },
        { tool: "get_feature", args: features.map((feature_id) => ({ feature_id })) },
        { tool: "list_feature_merge_suggestions", args: [{}, { limit: 100 }, ...features.slice(0, 20).map((feature_id) => ({ feature_id }))] },
        {
          tool: "list_insights",
          args: [
            {},
            { types: ["cost_spike", "error_rate_spike"] },
            { severities: ["critical"] },
            ...agents.slice(0, 10).map((agent_id) => ({ agent_id })),
            ...days.slice(0, 10).map((since) => ({ since }))
          ]
        },
        {
          tool: "get_pulse_report",
          args: [...days.map((date) => ({ period: "day", date })), ...days.slice(0, 12).map((date) => ({ period: "week", date }))]
        }
      ] satisfies ReadonlyArray<Scenario>
    }))
  })

/** A statement as the database owner (the bench created the database). */
const owner = <A>(databaseUrl: string, statement: (sql: PgClient.PgClient) => Effect.Effect<A, unknown>) =>
  Effect.scoped(PgClient.PgClient.use(statement).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))))

/** `tools/call` over streamable HTTP, as an MCP client sends it; fails on a protocol or tool error. */
const callTool = async (baseUrl: string, pat: string, name: string, args: Record<string, unknown>, id: number) => {
  const response = await fetch(`${baseUrl}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${pat}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25"
    },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } })
  })
  const text = await response.text()
  if (!response.ok || text.includes("\"isError\":true") || text.includes("\"error\":{")) {
    throw new Error(`${name} ${JSON.stringify(args)}: ${response.status} ${text.slice(0, 300)}`)
  }
}

const program = Effect.gen(function*() {
  const databaseUrl = yield* benchDatabase(values.database!, false)
  const calls = Number(values.calls)
  const port = yield* Effect.promise(freePort)
  const baseUrl = `http://127.0.0.1:${port}`
  // the bench store's settings, with the API on a free port
  const store = StoreLive.pipe(Layer.provideMerge(LedgerConfig.layerFrom(testSettings({
    databaseUrl: Option.some(Redacted.make(databaseUrl)),
    apiPort: port,
    publicUrl: baseUrl
  }))))

  const output = yield* Effect.gen(function*() {
    const existing = yield* countDecisions
    if (existing === 0) {
      console.log(`seeding ${values.decisions} decisions into ${values.database} ...`)
      yield* seedReadsLedger({ decisions: Number(values.decisions) })
    }
    const decisions = yield* countDecisions

    // 1. materialise (incremental: only what is new), refreshing planner statistics as the tables grow — the test
    // server runs without autovacuum, and plans made on empty-table estimates scan whole workspaces
    const started = performance.now()
    let materialized = 0
    for (let round = 1; ; round++) {
      const { materialized: done } = yield* Materializer.use((m) => m.round())
      materialized += done
      if (round % 5 === 1) yield* analyseDatabase(databaseUrl)
      console.log(`materialised ${materialized} (${Math.round(materialized / ((performance.now() - started) / 1000))}/s)`)
      if (done === 0) break
    }
    materialized += yield* Materializer.use((m) => m.catchUp)
    yield* analyseDatabase(databaseUrl)
    const materializeSeconds = (performance.now() - started) / 1000
    const detectStarted = performance.now()
    yield* Detectors.use((d) => d.catchUp)
    const detectSeconds = (performance.now() - detectStarted) / 1000
    console.log(JSON.stringify({ decisions, materialized, materialize_seconds: round(materializeSeconds), detect_seconds: round(detectSeconds) }))

    // 2. the tools over MCP
    const [tenant, workspace] = [BENCH_TENANTS[0], BENCH_WORKSPACES[0]]
    const { token: pat } = yield* Credentials.use((c) => c.createToken({ email: `owner@${tenant}.bench`, workspace, tenant, kind: "pat", name: "bench/analytics" }))
    const principal = yield* Authenticator.use((auth) => auth.authenticate(pat, "pat"))
    const scenarios: Array<Scenario> = [...yield* sampleScenarios(principal)]
    // the seed's random tickets may link no sessions of the main workspace into features: sample feature tools in
    // the workspace with the most features
    if (scenarios.find((s) => s.tool === "get_feature")!.args.length === 0) {
      const [busiest] = yield* owner(databaseUrl, (sql) =>
        sql<{ tenant: string; workspace: string }>`SELECT t.name AS tenant, w.name AS workspace FROM features f
          JOIN workspaces w ON w.workspace_id = f.workspace_id JOIN tenants t ON t.tenant_id = w.tenant_id
          GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT 1`)
      if (busiest !== undefined) {
        const { token } = yield* Credentials.use((c) =>
          c.createToken({ email: `owner@${busiest.tenant}.bench`, workspace: busiest.workspace, tenant: busiest.tenant, kind: "pat", name: "bench/analytics" })
        )
        const other = yield* sampleScenarios(yield* Authenticator.use((auth) => auth.authenticate(token, "pat")))
        for (const tool of ["get_feature", "list_feature_merge_suggestions"]) {
          scenarios.splice(scenarios.findIndex((s) => s.tool === tool), 1, { ...other.find((s) => s.tool === tool)!, pat: token })
        }
        console.log(`feature tools sampled in ${busiest.tenant}/${busiest.workspace}`)
      }
    }
    const results: Array<Record<string, unknown>> = []
    for (const scenario of scenarios.filter((s) => s.tool.includes(values.only!))) {
      if (scenario.args.length === 0) {
        console.log(`${scenario.tool}: nothing to sample`)
        continue
      }
      const latencies = yield* Effect.promise(async () => {
        // warm-up: plans, connections, caches
        const token = scenario.pat ?? pat
        for (let i = 0; i < Math.min(20, scenario.args.length); i++) await callTool(baseUrl, token, scenario.tool, scenario.args[i]!, i)
        const measured: Array<number> = []
        for (let i = 0; i < calls; i++) {
          const start = performance.now()
          await callTool(baseUrl, token, scenario.tool, scenario.args[i % scenario.args.length]!, i)
          measured.push(performance.now() - start)
        }
        return measured.sort((a, b) => a - b)
      })
      const p95 = round(percentile(latencies, 0.95))
      const result = {
        tool: scenario.tool,
        calls: latencies.length,
        distinct_args: scenario.args.length,
        p50: round(percentile(latencies, 0.5)),
        p95,
        p99: round(percentile(latencies, 0.99)),
        max: round(latencies.at(-1)!),
        target_p95: TARGET_P95_MS,
        pass: p95 <= TARGET_P95_MS
      }
      console.log(JSON.stringify(result))
      results.push(result)
    }
    return { decisions, materialized, materializeSeconds, detectSeconds, results }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(Materializer.layer, Detectors.layer).pipe(
        Layer.provide(ModelCalls.layer),
        Layer.provideMerge(serveApi(ApiRoutesLive)),
        Layer.provideMerge(Health.layer),
        Layer.provideMerge(CaptureShards.single),
        Layer.provideMerge(MemoryCaptureStream.layer),
        Layer.provideMerge(store)
      )
    ),
    Effect.scoped
  )

  const table = [
    `| tool | calls | distinct arguments | p50 ms | p95 ms | p99 ms | target p95 | |`,
    `|---|---|---|---|---|---|---|---|`,
    ...output.results.map((r: any) => `| ${r.tool} | ${r.calls} | ${r.distinct_args} | ${r.p50} | ${r.p95} | ${r.p99} | ≤ ${r.target_p95} | ${r.pass ? "✓" : "✗"} |`)
  ].join("\n")
  const machine = `${Os.cpus().length} CPUs, load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`
  console.log(`\n${output.decisions} decisions; materialised ${output.materialized} in ${round(output.materializeSeconds)} s, detectors ${round(output.detectSeconds)} s; ${machine}\n${table}`)
  Fs.writeFileSync(
    Path.join(import.meta.dirname, "results.json"),
    JSON.stringify({ at: new Date().toISOString(), loadavg: Os.loadavg(), ...output }, null, 2) + "\n"
  )
})

NodeRuntime.runMain(program)
