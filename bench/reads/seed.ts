/**
 * A realistic ledger at scale, for the read (and analytics) benchmarks: `decisions` decisions across tenants,
 * workspaces, agents and sessions, written through the builder role in batched statements (test/support/seed.ts).
 *
 * Shape (deterministic for a given `seed`): 4 tenants with 2 workspaces each; the first workspace (`acme/ops`)
 * holds ~40% of the decisions, the others share the rest. Each workspace has 40 agents (Zipf-like activity), a
 * member and a restricted member (~10% of the workspace's calls). Sessions start anywhere in the last 90 days
 * and run 1–600 calls a few seconds to minutes apart (mean ~40); a third carry an execution id. Calls are real
 * captures (tool calls, code, refusals, truncations, provider errors, unpriced models) with varied asks, tickets,
 * files and token counts, derived by the real derivation (a pool of distinct variants, reused).
 *
 *   npx node bench/reads/seed.ts [--decisions 1000000] [--database ledger_bench_reads] [--reset]
 *
 * creates the database if it does not exist, migrates it, and seeds it unless it already holds the decisions.
 * Import `seedReadsLedger` to seed a store of your own (it needs TenantSql and Credentials).
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, Stream } from "effect"
import * as Crypto from "node:crypto"
import { parseArgs } from "node:util"
import { StoreLive } from "../../layers/Store.ts"
import { derive } from "../../src/derive/derive.ts"
import { extractSubjects } from "../../src/derive/subjects.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import type { Capture } from "../../src/domain/capture.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { testSettings } from "../../test/support/settings.ts"
import { insertDecisions, makeCapture, type SeedDecision, type SeedScope, TEMPLATES } from "../../test/support/seed.ts"

export interface ReadsLedgerOptions {
  /** total decisions (default 1,000,000) */
  readonly decisions?: number
  /** decisions per transaction (default 5,000) */
  readonly batchSize?: number
  /** transactions in flight (default 2) */
  readonly concurrency?: number
  /** the PRNG seed: the same seed gives the same ledger shape (default 42) */
  readonly seed?: number
  /** the newest decision's time, epoch ms (default now) */
  readonly now?: number
  readonly onProgress?: (inserted: number, total: number) => void
  /**
   * Runs `run` once the ledger holds at least `decisions` decisions, before seeding on (the API process of the grow
   * benchmark starts there): the seeded workspaces are ready, with their members' tokens.
   */
  readonly pauseAt?: { readonly decisions: number; readonly run: (workspaces: ReadonlyArray<SeededWorkspace>) => Effect.Effect<void> }
}

export interface SeededWorkspace {
  readonly tenant: string
  readonly workspace: string
  readonly tenant_id: string
  readonly workspace_id: string
  /** the member's email and Personal Access Token, and the restricted member's */
  readonly member: { readonly email: string; readonly pat: string; readonly user_id: string }
  readonly restricted: { readonly email: string; readonly pat: string; readonly user_id: string }
  readonly agents: ReadonlyArray<string>
}

export interface SeededLedger {
  readonly decisions: number
  readonly sessions: number
  /** the first is the largest (`acme/ops`) */
  readonly workspaces: ReadonlyArray<SeededWorkspace>
  readonly elapsedMs: number
}

export const BENCH_TENANTS = ["acme", "globex", "initech", "umbrella"] as const
export const BENCH_WORKSPACES = ["ops", "research"] as const
const AGENTS_PER_WORKSPACE = 40
const DAYS = 90
const VARIANTS = 4096
/** share of all decisions in the first workspace */
const MAIN_SHARE = 0.4
const RESTRICTED_SHARE = 0.1

/** mulberry32: small, fast, seeded. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const AGENT_ROLES = ["planner", "coder", "reviewer", "support", "billing", "researcher", "triage", "writer"] as const
const SERVICES = ["checkout-api", "payments", "orders-db", "search", "auth", "notifications", "billing", "inventory"]
const PROJECTS = ["BILL", "OPS", "WEB", "DATA", "SEC", "INFRA"]
const FILES = ["src/http/retry.ts", "src/orders/service.ts", "src/auth/session.ts", "src/search/index.ts", "lib/billing/invoice.py", "cmd/server/main.go"]

const asks: ReadonlyArray<(r: () => number) => string> = [
  (r) => `Fix the failing test in ${pick(r, FILES)} (ticket ${pick(r, PROJECTS)}-${1 + Math.floor(r() * 900)}).`,
  (r) => `Summarize yesterday's incident on ${pick(r, SERVICES)} in five bullet points.`,
  (r) => `Review the pull request #${1 + Math.floor(r() * 5000)} that changes ${pick(r, FILES)}.`,
  (r) => `Plan the migration of the ${pick(r, SERVICES)} database to Postgres with milestones.`,
  (r) => `Find the open invoices for customer ${1000 + Math.floor(r() * 9000)} and email the total to finance.`,
  (r) => `Classify support ticket ${pick(r, PROJECTS)}-${1 + Math.floor(r() * 900)}: billing, technical or account?`,
  (r) => `Why does ${pick(r, SERVICES)} return 502 under load? Debug the connection pool settings.`,
  (r) => `Translate the release notes of ${pick(r, SERVICES)} into German.`
]

const pick = <A>(r: () => number, items: ReadonlyArray<A>): A => items[Math.floor(r() * items.length)]!

/** A derived call of one template, with its own ask and token counts, reused by many rows. */
interface Variant {
  readonly capture: Capture
  readonly derivation: SeedDecision["derivation"]
  readonly subjects: SeedDecision["subjects"]
}

const makeVariants = (r: () => number): ReadonlyArray<Variant> => {
  const scope: SeedScope = { tenant_id: "", workspace_id: "", user_id: "", key_id: "" }
  return Array.from({ length: VARIANTS }, (_, index) => {
    const template = TEMPLATES[index % TEMPLATES.length]!
    const scale = 0.3 + r() * 2.7
    const usage = template.usage === null ? null : {
      ...template.usage,
      prompt_tokens: Math.round(template.usage.prompt_tokens * scale),
      completion_tokens: Math.round(template.usage.completion_tokens * scale),
      total_tokens: Math.round(template.usage.prompt_tokens * scale) + Math.round(template.usage.completion_tokens * scale)
    }
    const capture = makeCapture({ scope, agent_id: "", at: 0, template: { ...template, usage }, ask: pick(r, asks)(r) })
    const derivation = derive(capture)
    return { capture, derivation, subjects: extractSubjects(capture, derivation) }
  })
}

interface Member {
  readonly scope: SeedScope
  readonly email: string
  readonly pat: string
}

/** Seeds the ledger; needs the store (TenantSql, Credentials). */
export const seedReadsLedger = (options: ReadsLedgerOptions = {}) =>
  Effect.gen(function*() {
    const total = options.decisions ?? 1_000_000
    const batchSize = options.batchSize ?? 5_000
    const now = options.now ?? Date.now()
    const r = prng(options.seed ?? 42)
    const credentials = yield* Credentials
    const started = performance.now()

    const workspaces: Array<SeededWorkspace & { readonly members: ReadonlyArray<Member>; readonly weight: number }> = []
    for (const tenant of BENCH_TENANTS) {
      for (const workspace of BENCH_WORKSPACES) {
        const join = (email: string, role: "member" | "restricted") =>
          Effect.map(credentials.bootstrap({ tenant, workspace, email, role }), (boot) => ({
            scope: { tenant_id: boot.tenant_id, workspace_id: boot.workspace_id, user_id: boot.user_id, key_id: Crypto.randomUUID() },
            email,
            pat: boot.pat
          }))
        const member = yield* join(`owner@${tenant}.bench`, "member")
        const restricted = yield* join(`auditor@${tenant}.bench`, "restricted")
        const first = workspaces.length === 0
        workspaces.push({
          tenant,
          workspace,
          tenant_id: member.scope.tenant_id,
          workspace_id: member.scope.workspace_id,
          member: { email: member.email, pat: member.pat, user_id: member.scope.user_id },
          restricted: { email: restricted.email, pat: restricted.pat, user_id: restricted.scope.user_id },
          agents: Array.from({ length: AGENTS_PER_WORKSPACE }, (_, i) => `${AGENT_ROLES[i % AGENT_ROLES.length]}-${i}`),
          members: [member, restricted],
          weight: first ? MAIN_SHARE : (1 - MAIN_SHARE) / (BENCH_TENANTS.length * BENCH_WORKSPACES.length - 1)
        })
      }
    }
    const seededWorkspaces = () => workspaces.map(({ members: _members, weight: _weight, ...rest }) => rest)
    const variants = makeVariants(r)
    const agentWeights = Array.from({ length: AGENTS_PER_WORKSPACE }, (_, i) => 1 / (i + 1))
    const agentTotal = agentWeights.reduce((a, b) => a + b, 0)
    const weighted = <A>(items: ReadonlyArray<A>, weights: ReadonlyArray<number>, sum: number): A => {
      let x = r() * sum
      for (let i = 0; i < items.length; i++) {
        x -= weights[i]!
        if (x <= 0) return items[i]!
      }
      return items.at(-1)!
    }
    const workspaceWeights = workspaces.map((w) => w.weight)
    const sessionLength = () => {
      const x = r()
      return x < 0.4 ? 1 + Math.floor(r() * 5) : x < 0.8 ? 6 + Math.floor(r() * 25) : x < 0.95 ? 31 + Math.floor(r() * 120) : 151 + Math.floor(r() * 450)
    }

    let sessions = 0
    /** batches of rows, generated as they are consumed */
    function* batches(): Generator<Array<SeedDecision>> {
      let batch: Array<SeedDecision> = []
      let produced = 0
      while (produced < total) {
        const space = weighted(workspaces, workspaceWeights, 1)
        const agent = weighted(space.agents, agentWeights, agentTotal)
        const session = Crypto.randomUUID()
        const execution = r() < 1 / 3 ? `run-${Crypto.randomUUID().slice(0, 8)}` : null
        const calls = Math.min(sessionLength(), total - produced)
        let at = now - Math.floor(r() * DAYS * 86_400_000)
        sessions++
        for (let i = 0; i < calls; i++) {
          const variant = variants[Math.floor(r() * variants.length)]!
          const who = r() < RESTRICTED_SHARE ? space.members[1]! : space.members[0]!
          const latency = Math.round(300 + r() * r() * 12_000)
          const capture = makeCapture({
            scope: who.scope,
            agent_id: agent,
            agent_name: agent.replace(/-\d+$/, " agent"),
            execution_id: execution,
            at: Math.min(at, now - latency),
            template: variant.capture,
            latency_ms: latency
          })
          batch.push({ capture, derivation: variant.derivation, subjects: variant.subjects, session_id: session })
          at += latency + 2_000 + Math.floor(r() * 90_000)
          produced++
          if (batch.length >= batchSize) {
            yield batch
            batch = []
          }
        }
      }
      if (batch.length > 0) yield batch
    }

    let inserted = 0
    // one batch per pull: the generator runs only as far ahead as the inserts in flight
    yield* Stream.fromIterable(batches(), { chunkSize: 1 }).pipe(
      Stream.mapEffect((batch) => insertDecisions(batch), { concurrency: options.concurrency ?? 2 }),
      Stream.runForEach((count) =>
        Effect.gen(function*() {
          const before = inserted
          inserted += count
          options.onProgress?.(inserted, total)
          const pause = options.pauseAt
          if (pause !== undefined && before < pause.decisions && inserted >= pause.decisions) yield* pause.run(seededWorkspaces())
        })
      )
    )
    return {
      decisions: inserted,
      sessions,
      workspaces: seededWorkspaces(),
      elapsedMs: Math.round(performance.now() - started)
    } satisfies SeededLedger
  })

// ---------------------------------------------------------------------------------------------------------
// CLI

export const BENCH_DATABASE = "ledger_bench_reads"

/** postgres://…/<database> on the server of TEST_DATABASE_URL (default local), created when missing. */
export const benchDatabase = (name: string, reset: boolean) =>
  Effect.gen(function*() {
    const admin = new URL(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres")
    yield* Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      if (reset) yield* sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      const exists = yield* sql`SELECT 1 FROM pg_database WHERE datname = ${name}`
      if (exists.length === 0) yield* sql.unsafe(`CREATE DATABASE ${name}`)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(admin.toString()), maxConnections: 1 })))
    const url = new URL(admin)
    url.pathname = `/${name}`
    return url.toString()
  })

/** The store on a database, for the bench tools (migrations applied). */
export const benchStore = (databaseUrl: string) =>
  StoreLive.pipe(Layer.provideMerge(LedgerConfig.layerFrom(testSettings({ databaseUrl: Option.some(Redacted.make(databaseUrl)) }))))

/**
 * VACUUM and ANALYZE as the database owner, after seeding, as autovacuum would in production: these machines run
 * PostgreSQL with autovacuum off. Without statistics `GET /v1/decisions` ran at p95 1.96 s instead of 20 ms; without
 * the visibility map no index-only scan is possible (a restricted member's agents: 200 instead of 22 ms).
 */
export const analyseDatabase = (databaseUrl: string) =>
  Effect.scoped(
    PgClient.PgClient.use((sql) => sql`VACUUM (ANALYZE)`).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))
  )

/** How many decisions the database holds (counted as the builder role would see them: all workspaces). */
export const countDecisions = Effect.gen(function*() {
  const tenantSql = yield* TenantSql
  const credentialsRows = yield* tenantSql.control(ScopedSql.use((sql) =>
    sql<{ tenant_id: string; workspace_id: string }>`SELECT tenant_id, workspace_id FROM workspaces`
  ))
  let count = 0
  for (const scope of credentialsRows) {
    const [row] = yield* tenantSql.write(scope, ScopedSql.use((sql) => sql<{ n: string }>`SELECT count(*) AS n FROM decisions`))
    count += Number(row!.n)
  }
  return count
})

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      decisions: { type: "string", default: "1000000" },
      database: { type: "string", default: BENCH_DATABASE },
      reset: { type: "boolean", default: false }
    }
  })
  const target = Number(values.decisions)
  const program = Effect.gen(function*() {
    const url = yield* benchDatabase(values.database!, values.reset!)
    yield* Effect.gen(function*() {
      const existing = yield* countDecisions
      if (existing >= target) {
        console.log(`${values.database} already holds ${existing} decisions; nothing to do (--reset to reseed)`)
        return
      }
      if (existing > 0) return yield* Effect.fail(new Error(`${values.database} holds ${existing} decisions, fewer than ${target}: run with --reset`))
      let last = 0
      const result = yield* seedReadsLedger({
        decisions: target,
        onProgress: (done, total) => {
          if (done - last >= 50_000 || done === total) {
            last = done
            process.stderr.write(`\rseeded ${done.toLocaleString()} / ${total.toLocaleString()}`)
          }
        }
      })
      process.stderr.write("\n")
      yield* analyseDatabase(url)
      console.log(JSON.stringify({ database: values.database, decisions: result.decisions, sessions: result.sessions, seconds: result.elapsedMs / 1000 }))
    }).pipe(Effect.provide(benchStore(url)))
  })
  NodeRuntime.runMain(program)
}
