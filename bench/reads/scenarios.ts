/**
 * What the read benchmarks drive (./run.ts, ./grow.ts): the endpoints with their targets, each with request paths
 * sampled from the ledger (ids, filters, cursors of real pages), and one autocannon measurement of an endpoint.
 */
import { Effect } from "effect"
import type { Principal } from "../../src/domain/principal.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { driveGets, percentile, round } from "./apiProcess.ts"
import { BENCH_TENANTS, BENCH_WORKSPACES } from "./seed.ts"

export interface Scenario {
  readonly name: string
  readonly target: number
  /** request paths, used round-robin */
  readonly paths: ReadonlyArray<string>
}

export interface Measured {
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


export const measure = (baseUrl: string, pat: string, scenario: Scenario, connections: number, seconds: number) =>
  Effect.map(driveGets(baseUrl, { paths: scenario.paths, headers: { authorization: `Bearer ${pat}` }, connections, seconds }), ({ latencies, non2xx, result }): Measured => {
    const sorted = [...latencies].sort((a, b) => a - b)
    const p95 = round(percentile(sorted, 0.95))
    return {
      endpoint: scenario.name,
      requests: sorted.length,
      rps: Math.round(result.requests.average),
      p50: round(percentile(sorted, 0.5)),
      p95,
      p99: round(percentile(sorted, 0.99)),
      target_p95: scenario.target,
      non2xx,
      pass: p95 <= scenario.target && non2xx === 0
    }
  })

/** Ids, filters and cursors to spread the requests over, read as the member. */
export const sampleScenarios = (principal: Principal, baseUrl: string, pat: string) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    const sample = yield* tenantSql.read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const agents = yield* sql<{ agent_id: string }>`SELECT agent_id FROM agents`
      // a sample of pages spreads the ids over a large ledger; a small one (bench/reads/grow.ts) may have too few pages
      const sampled = yield* sql<{ session_id: string }>`SELECT session_id FROM sessions TABLESAMPLE SYSTEM (5) LIMIT 500`
      const sessions = sampled.length >= 50 ? sampled : yield* sql<{ session_id: string }>`SELECT session_id FROM sessions LIMIT 500`
      const picked = yield* sql<{ session_id: string; ledger_id: string }>`
        SELECT session_id, ledger_id FROM decisions TABLESAMPLE SYSTEM (0.5) LIMIT 1000`
      const decisions = picked.length >= 100 ? picked : yield* sql<{ session_id: string; ledger_id: string }>`
        SELECT session_id, ledger_id FROM decisions LIMIT 1000`
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

/** A new PAT of the largest workspace's member (`acme/ops`), and who it authenticates as. */
export const memberToken = (name: string) =>
  Effect.gen(function*() {
    const [tenant, workspace] = [BENCH_TENANTS[0], BENCH_WORKSPACES[0]]
    const credentials = yield* Credentials
    const { token: pat } = yield* credentials.createToken({ email: `owner@${tenant}.bench`, workspace, tenant, kind: "pat", name })
    const principal = yield* Authenticator.use((auth) => auth.authenticate(pat, "pat"))
    return { pat, principal }
  })
