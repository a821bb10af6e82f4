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
import type { Principal } from "../../src/domain/principal.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { apiProcess, autocannon, percentile, round } from "./apiProcess.ts"
import {
  analyseDatabase,
  BENCH_DATABASE,
  BENCH_TENANTS,
  BENCH_WORKSPACES,
  benchDatabase,
  benchStore,
  countDecisions,
  seedReadsLedger
} from "./seed.ts"

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

interface Scenario {
  readonly name: string
  readonly target: number
  /** request paths, used round-robin */
  readonly paths: ReadonlyArray<string>
}

interface Measured {
  readonly endpoint: string
  readonly requests: number
  readonly rps: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly target_p95: number
  readonly non2xx: number
  readonly pass: boolean
}


const measure = (baseUrl: string, pat: string, scenario: Scenario, connections: number, seconds: number) =>
  Effect.callback<Measured>((resume) => {
    const latencies: Array<number> = []
    let next = 0
    let non2xx = 0
    const instance = autocannon({
      url: baseUrl,
      connections,
      duration: seconds,
      headers: { authorization: `Bearer ${pat}` },
      requests: [{
        method: "GET",
        setupRequest: (request: any) => ({ ...request, path: scenario.paths[next++ % scenario.paths.length] })
      }]
    }, (error: unknown, result: any) => {
      if (error) return resume(Effect.die(error))
      const sorted = latencies.sort((a, b) => a - b)
      const p95 = round(percentile(sorted, 0.95))
      resume(Effect.succeed({
        endpoint: scenario.name,
        requests: sorted.length,
        rps: Math.round(result.requests.average),
        p50: round(percentile(sorted, 0.5)),
        p95,
        p99: round(percentile(sorted, 0.99)),
        target_p95: scenario.target,
        non2xx,
        pass: p95 <= scenario.target && non2xx === 0
      }))
    })
    instance.on("response", (_client: unknown, status: number, _bytes: number, responseTime: number) => {
      latencies.push(responseTime)
      if (status < 200 || status >= 300) non2xx++
    })
    return Effect.sync(() => instance.stop())
  })


/** Ids, filters and cursors to spread the requests over, read as the member. */
const sampleScenarios = (principal: Principal, baseUrl: string, pat: string) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    const sample = yield* tenantSql.read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const agents = yield* sql<{ agent_id: string }>`SELECT agent_id FROM agents`
      const sessions = yield* sql<{ session_id: string }>`SELECT session_id FROM sessions TABLESAMPLE SYSTEM (5) LIMIT 500`
      const decisions = yield* sql<{ session_id: string; ledger_id: string }>`
        SELECT session_id, ledger_id FROM decisions TABLESAMPLE SYSTEM (0.5) LIMIT 1000`
      return { agents: agents.map((a) => a.agent_id), sessions: sessions.map((s) => s.session_id), decisions }
    }))
    /** the next_cursor of a list page, to measure pages further down the list too */
    const cursorOf = (path: string) =>
      Effect.promise(async () => {
        const body: any = await (await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${pat}` } })).json()
        return body.next_cursor as string | null
      })
    const withCursor = (path: string) =>
      Effect.map(cursorOf(path), (cursor) => cursor === null ? path : `${path}${path.includes("?") ? "&" : "?"}cursor=${encodeURIComponent(cursor)}`)

    const decisionLists = [
      "/v1/decisions",
      "/v1/decisions?order=oldest",
      "/v1/decisions?order=cost",
      "/v1/decisions?order=quality",
      "/v1/decisions?outcomes=error",
      "/v1/decisions?outcomes=tool_call&outcomes=refusal&limit=50",
      "/v1/decisions?intents=debugging&order=cost",
      "/v1/decisions?min_cost_usd=0.01&order=cost",
      `/v1/decisions?since=${encodeURIComponent(new Date(Date.now() - 7 * 86_400_000).toISOString())}`,
      ...sample.agents.slice(0, 10).map((agent) => `/v1/decisions?agent_id=${encodeURIComponent(agent)}`)
    ]
    const sessionLists = sample.agents.flatMap((agent) => [
      `/v1/agents/${encodeURIComponent(agent)}/sessions`,
      `/v1/agents/${encodeURIComponent(agent)}/sessions?order=cost`
    ])
    return [
      {
        name: "GET /v1/sessions/{id}/decisions/{ledger_id}",
        target: 10,
        paths: sample.decisions.map((d) => `/v1/sessions/${d.session_id}/decisions/${d.ledger_id}`)
      },
      { name: "GET /v1/sessions/{id}", target: 20, paths: sample.sessions.map((id) => `/v1/sessions/${id}`) },
      {
        name: "GET /v1/agents",
        target: 20,
        paths: ["/v1/agents", "/v1/agents?order=cost", "/v1/agents?order=decisions", "/v1/agents?limit=100", yield* withCursor("/v1/agents?limit=10")]
      },
      { name: "GET /v1/agents/{id}/sessions", target: 20, paths: [...sessionLists, ...yield* Effect.forEach(sessionLists.slice(0, 20), withCursor)] },
      {
        name: "GET /v1/sessions/{id}/decisions",
        target: 20,
        paths: sample.sessions.flatMap((id) => [`/v1/sessions/${id}/decisions`, `/v1/sessions/${id}/decisions?order=cost&limit=50`])
      },
      { name: "GET /v1/decisions", target: 20, paths: [...decisionLists, ...yield* Effect.forEach(decisionLists, withCursor)] }
    ] satisfies ReadonlyArray<Scenario>
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
    const [tenant, workspace] = [BENCH_TENANTS[0], BENCH_WORKSPACES[0]]
    const credentials = yield* Credentials
    const { token: pat } = yield* credentials.createToken({ email: `owner@${tenant}.bench`, workspace, tenant, kind: "pat", name: "bench/reads" })
    const principal = yield* Authenticator.use((auth) => auth.authenticate(pat, "pat"))
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
