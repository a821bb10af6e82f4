/**
 * App pages benchmark: the web app's ledger pages (src/app/routes/ledger.ts) served by a real
 * `ledger serve --roles api` process over the 1,000,000-decision ledger of `bench/reads/seed.ts`, driven by
 * autocannon with a browser session cookie of the member of the largest workspace (`acme/ops`, ~400,000 decisions).
 *
 *   npx node bench/app/pages.ts [--decisions 1000000] [--database ledger_bench_reads] [--connections 4] [--seconds 10]
 *                               [--rounds 3] [--only session]
 *
 * Pages: `/` (home: the agents view), `/sessions/{id}` (many sessions: a sample, plus the workspace's largest),
 * and as extras `/agents/{id}` and `/decisions/{id}`. Every request of a page hits another id. The pages are
 * measured in rounds, one after the other within each round (2 s warm-up each first), so the machine's noise shows
 * between rounds. Latency is autocannon's response time on loopback: from writing the request to the last byte of
 * the response (the whole HTML page); the API's own access-log duration (handler start to response, before the
 * body is written) is reported next to it. Prints p50/p95/p99 per page (all rounds pooled, and per round) against
 * the target (p95 ≤ 200 ms) and writes them to bench/app/results.json. Seeds the database when it holds no
 * decisions (see ../reads/seed.ts).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { AppSessions } from "../../src/auth/AppSessions.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { apiProcess, driveGets, percentile, round } from "../reads/apiProcess.ts"
import {
  analyseDatabase,
  BENCH_DATABASE,
  BENCH_TENANTS,
  BENCH_WORKSPACES,
  benchDatabase,
  benchStore,
  countDecisions,
  seedReadsLedger
} from "../reads/seed.ts"

const { values } = parseArgs({
  options: {
    decisions: { type: "string", default: "1000000" },
    database: { type: "string", default: BENCH_DATABASE },
    connections: { type: "string", default: "4" },
    seconds: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    /** only the pages whose name contains this text */
    only: { type: "string", default: "" }
  }
})

const TARGET_P95_MS = 200

interface Scenario {
  readonly name: string
  /** the session cookie the requests carry */
  readonly cookie: string
  /** request paths, used round-robin */
  readonly paths: ReadonlyArray<string>
}

interface Run {
  readonly latencies: Array<number>
  /** the API's access-log durations of the same requests */
  readonly server: Array<number>
  readonly non2xx: number
  readonly bytes: number
  readonly rps: number
}

interface Figures {
  readonly requests: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly max: number
}

const figures = (values: ReadonlyArray<number>): Figures => {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    requests: sorted.length,
    p50: round(percentile(sorted, 0.5)),
    p95: round(percentile(sorted, 0.95)),
    p99: round(percentile(sorted, 0.99)),
    max: round(sorted.at(-1) ?? NaN)
  }
}


/** The access-log durations of page requests (GETs of a view path) written to the log after `offset`. */
const serverDurations = (logPath: string, offset: number): Array<number> => {
  const text = Fs.readFileSync(logPath, "utf8").slice(offset)
  const durations: Array<number> = []
  for (const line of text.split("\n")) {
    if (!line.includes("http request")) continue
    try {
      const entry = JSON.parse(line)
      const fields = entry.annotations ?? entry
      if (fields.method === "GET" && typeof fields.duration_ms === "number" && !String(fields.path).startsWith("/app/")) {
        durations.push(fields.duration_ms)
      }
    } catch {
      // a line that is not JSON (a stack trace) is not an access log line
    }
  }
  return durations
}

const measure = (baseUrl: string, logPath: string, scenario: Scenario, connections: number, seconds: number) =>
  Effect.gen(function*() {
    const offset = Fs.statSync(logPath).size
    const driven = yield* driveGets(baseUrl, {
      paths: scenario.paths,
      headers: { cookie: `ledger_session=${scenario.cookie}`, accept: "text/html" },
      connections,
      seconds
    })
    const run = {
      latencies: [...driven.latencies],
      non2xx: driven.non2xx,
      bytes: Math.round(driven.result.throughput.total / Math.max(1, driven.latencies.length)),
      rps: round(driven.result.requests.total / seconds)
    }
    // the access log is written in batches (25 ms windows)
    yield* Effect.sleep("200 millis")
    return { ...run, server: serverDurations(logPath, offset) } satisfies Run
  })

interface Signed {
  readonly cookie: string
  readonly principal: Principal
}

/**
 * Which pages to request, as the member: sampled ids, the workspace's largest sessions; and as extras, the restricted
 * member's home and session pages (their agents and sessions are aggregated from their own decisions per request).
 */
const sampleScenarios = (member: Signed, restricted: Signed) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    const principal = member.principal
    const sample = yield* tenantSql.read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const agents = yield* sql<{ agent_id: string }>`SELECT agent_id FROM agents`
      const largest = yield* sql<{ session_id: string; decision_count: string }>`
        SELECT session_id, decision_count FROM sessions ORDER BY decision_count DESC LIMIT 25`
      const sessions = yield* sql<{ session_id: string; decision_count: string }>`
        SELECT session_id, decision_count FROM sessions TABLESAMPLE SYSTEM (5) LIMIT 500`
      const decisions = yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions TABLESAMPLE SYSTEM (0.5) LIMIT 1000`
      return { agents: agents.map((a) => a.agent_id), largest, sessions, decisions: decisions.map((d) => d.ledger_id) }
    }))
    const restrictedSessions = yield* tenantSql.read(restricted.principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const rows = yield* sql<{ session_id: string }>`SELECT session_id FROM decisions TABLESAMPLE SYSTEM (1) LIMIT 500`
      return [...new Set(rows.map((row) => row.session_id))]
    }))
    // the largest sessions every tenth request, the sample in between
    const sessionPaths: Array<string> = []
    sample.sessions.forEach((session, i) => {
      sessionPaths.push(`/sessions/${session.session_id}`)
      if (i % 9 === 8) sessionPaths.push(`/sessions/${sample.largest[(i / 9 | 0) % sample.largest.length]!.session_id}`)
    })
    const { cookie } = member
    const scenarios: ReadonlyArray<Scenario> = [
      { name: "home /", cookie, paths: ["/"] },
      { name: "session /sessions/{id}", cookie, paths: sessionPaths },
      { name: "largest sessions /sessions/{id}", cookie, paths: sample.largest.map((s) => `/sessions/${s.session_id}`) },
      { name: "agent /agents/{id} (extra)", cookie, paths: sample.agents.map((id) => `/agents/${encodeURIComponent(id)}`) },
      { name: "decision /decisions/{id} (extra)", cookie, paths: sample.decisions.map((id) => `/decisions/${id}`) },
      { name: "restricted home / (extra)", cookie: restricted.cookie, paths: ["/"] },
      { name: "restricted session /sessions/{id} (extra)", cookie: restricted.cookie, paths: restrictedSessions.map((id) => `/sessions/${id}`) }
    ]
    const sizes = sample.sessions.map((s) => Number(s.decision_count)).sort((a, b) => a - b)
    return {
      scenarios,
      shape: {
        agents: sample.agents.length,
        sampled_sessions: sample.sessions.length,
        sampled_session_decisions_p50: percentile(sizes, 0.5),
        sampled_session_decisions_max: sizes.at(-1) ?? 0,
        largest_sessions_decisions: sample.largest.map((s) => Number(s.decision_count))
      }
    }
  })

/** Each page once: a 200 with the view's payload (not the sign-in redirect). */
const checkPages = (baseUrl: string, scenarios: ReadonlyArray<Scenario>) =>
  Effect.promise(async () => {
    for (const scenario of scenarios) {
      const response = await fetch(`${baseUrl}${scenario.paths[0]}`, { headers: { cookie: `ledger_session=${scenario.cookie}` }, redirect: "manual" })
      const body = await response.text()
      if (response.status !== 200 || !body.includes(`id="ledger-data"`)) {
        throw new Error(`${scenario.paths[0]} answered ${response.status}: ${body.slice(0, 300)}`)
      }
    }
  })

const program = Effect.gen(function*() {
  const target = Number(values.decisions)
  const databaseUrl = yield* benchDatabase(values.database!, false)
  const connections = Number(values.connections)
  const seconds = Number(values.seconds)
  const rounds = Number(values.rounds)
  const { results, shape } = yield* Effect.gen(function*() {
    const existing = yield* countDecisions
    if (existing === 0) {
      console.log(`seeding ${target} decisions into ${values.database} ...`)
      yield* seedReadsLedger({ decisions: target })
    } else {
      console.log(`${values.database}: ${existing} decisions`)
    }
    // every run: what autovacuum keeps up in production (statistics, the visibility map index-only scans need)
    yield* analyseDatabase(databaseUrl)
    const [tenant, workspace] = [BENCH_TENANTS[0], BENCH_WORKSPACES[0]]
    const sessions = yield* AppSessions
    /** an app session (browser cookie) of a member of the workspace, ended when the benchmark ends */
    const signIn = (email: string) =>
      Effect.gen(function*() {
        const member = yield* Credentials.use((credentials) => credentials.member({ email, workspace, tenant }))
        const cookie = yield* sessions.start(member)
        yield* Effect.addFinalizer(() => Effect.ignore(sessions.end(cookie)))
        const signed = yield* sessions.resolve(cookie)
        if (signed === undefined) return yield* Effect.die(new Error("the new app session does not resolve"))
        return { cookie, principal: signed.principal } satisfies Signed
      })
    const member = yield* signIn(`owner@${tenant}.bench`)
    const restricted = yield* signIn(`auditor@${tenant}.bench`)

    const api = yield* apiProcess(databaseUrl, { name: "app", logLevel: "info" })
    const { scenarios: all, shape } = yield* sampleScenarios(member, restricted)
    const scenarios = all.filter((s) => s.name.includes(values.only!))
    yield* checkPages(api.baseUrl, scenarios)
    console.log(JSON.stringify(shape))

    for (const scenario of scenarios) yield* measure(api.baseUrl, api.logPath, scenario, connections, 2)
    const runs = new Map<string, Array<Run>>(scenarios.map((s) => [s.name, []]))
    for (let r = 1; r <= rounds; r++) {
      for (const scenario of scenarios) {
        const run = yield* measure(api.baseUrl, api.logPath, scenario, connections, seconds)
        runs.get(scenario.name)!.push(run)
        const f = figures(run.latencies)
        console.log(
          `round ${r} ${scenario.name}: ${f.requests} requests, ${run.rps} req/s, p50/p95/p99 ${f.p50} / ${f.p95} / ${f.p99} ms ` +
            `(server p95 ${figures(run.server).p95} ms), ${run.bytes} B/page, non-2xx ${run.non2xx}, load ${Os.loadavg()[0]!.toFixed(2)}`
        )
      }
    }
    const results = scenarios.map((scenario) => {
      const list = runs.get(scenario.name)!
      const client = figures(list.flatMap((run) => run.latencies))
      const non2xx = list.reduce((n, run) => n + run.non2xx, 0)
      return {
        page: scenario.name,
        distinct_paths: new Set(scenario.paths).size,
        ...client,
        rps: round(list.reduce((n, run) => n + run.rps, 0) / list.length),
        bytes_per_page: Math.round(list.reduce((n, run) => n + run.bytes, 0) / list.length),
        server: figures(list.flatMap((run) => run.server)),
        per_round_p95: list.map((run) => figures(run.latencies).p95),
        target_p95: TARGET_P95_MS,
        non2xx,
        pass: client.p95 <= TARGET_P95_MS && non2xx === 0
      }
    })
    return { results, shape }
  }).pipe(Effect.scoped, Effect.provide(benchStore(databaseUrl)))

  const table = [
    `| page | requests | req/s | p50 ms | p95 ms | p99 ms | p95 per round | server p50 / p95 / p99 ms | KB/page | target p95 | non-2xx | |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|`,
    ...results.map((r) =>
      `| ${r.page} | ${r.requests} | ${r.rps} | ${r.p50} | ${r.p95} | ${r.p99} | ${r.per_round_p95.join(", ")} | ` +
      `${r.server.p50} / ${r.server.p95} / ${r.server.p99} | ${(r.bytes_per_page / 1024).toFixed(1)} | ≤ ${r.target_p95} | ${r.non2xx} | ${r.pass ? "✓" : "✗"} |`
    )
  ].join("\n")
  console.log(
    `\n${connections} connections, ${rounds} rounds of ${seconds} s per page, ${Os.cpus().length} CPUs, ` +
      `load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}\n${table}`
  )
  Fs.writeFileSync(
    Path.join(import.meta.dirname, "results.json"),
    JSON.stringify({ at: new Date().toISOString(), connections, seconds, rounds, cpus: Os.cpus().length, loadavg: Os.loadavg(), shape, results }, null, 2) + "\n"
  )
})

NodeRuntime.runMain(program)
