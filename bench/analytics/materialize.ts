/**
 * The analytics materialiser's catch-up rate (issue 25: ≥ 5,000 decisions/s): how fast the real materialiser turns a
 * backlog of built decisions into analytics — what it does after an ingest burst, during which it yielded.
 *
 *   npx node bench/analytics/materialize.ts [--decisions 60000] [--rounds 3] [--database ledger_bench_materialize] [--reset]
 *
 * Seeds the database once with the reads benchmark's ledger (bench/reads/seed.ts: real captures through the real
 * derivation, 8 workspaces; kept between runs, `--reset` drops it), then `--rounds` times: clears every analytics
 * table, and times `Materializer.catchUp` over the whole ledger with the planner statistics kept fresh as the
 * builder processes keep them (once a second). Reports decisions/s and the CPU per decision of this process and of
 * PostgreSQL's backends (from /proc).
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Fiber, Layer, Redacted, Schedule } from "effect"
import * as Os from "node:os"
import { parseArgs } from "node:util"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ModelCalls } from "../../src/analytics/ModelCalls.ts"
import { PlannerStatistics } from "../../src/store/PlannerStatistics.ts"
import { processesCpu } from "../support/cpu.ts"
import { benchDatabase, benchStore, countDecisions, seedReadsLedger } from "../reads/seed.ts"

const { values } = parseArgs({
  options: {
    decisions: { type: "string", default: "60000" },
    rounds: { type: "string", default: "3" },
    database: { type: "string", default: "ledger_bench_materialize" },
    reset: { type: "boolean", default: false }
  }
})

/** What the materialiser and the detectors write (migration 0005), but the workspaces' ROI settings. */
const DERIVED_TABLES = [
  "analytics_progress", "analytics_sessions", "decision_search", "decision_prints", "search_posting_blocks", "search_terms",
  "subjects", "sources", "session_subjects", "agent_subjects", "graph_edges", "handoffs", "hourly_rollups", "features",
  "feature_sessions", "feature_merge_suggestions", "insights"
]

const program = Effect.gen(function*() {
  const databaseUrl = yield* benchDatabase(values.database!, values.reset!)
  const owner = PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })
  const asOwner = <A, E>(f: (sql: PgClient.PgClient) => Effect.Effect<A, E>) =>
    Effect.scoped(PgClient.PgClient.use(f).pipe(Effect.provide(owner)))

  yield* Effect.gen(function*() {
    if ((yield* countDecisions) === 0) {
      console.error(`seeding ${values.decisions} decisions into ${values.database} ...`)
      yield* seedReadsLedger({ decisions: Number(values.decisions) })
    }
    const decisions = yield* countDecisions
    const rounds: Array<Record<string, number>> = []
    for (let round = 1; round <= Number(values.rounds); round++) {
      yield* asOwner((sql) => sql.unsafe(`TRUNCATE ${DERIVED_TABLES.join(", ")}`))
      yield* asOwner((sql) => sql`VACUUM (ANALYZE)`)
      const backends = asOwner((sql) => sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = ${values.database!} AND pid <> pg_backend_pid()`)
      const before = processesCpu([process.pid, ...(yield* backends).map((b) => b.pid)])
      const statistics = yield* Effect.forkChild(
        PlannerStatistics.use((p) => p.refresh).pipe(Effect.repeat(Schedule.spaced("1 second")), Effect.orDie)
      )
      const started = performance.now()
      const materialized = yield* Materializer.use((m) => m.catchUp)
      const seconds = (performance.now() - started) / 1000
      yield* Fiber.interrupt(statistics)
      // a backend opened during the round counts from its start
      const after = processesCpu([process.pid, ...(yield* backends).map((b) => b.pid)])
      const used = (pid: number) => (after.get(pid) ?? 0) - (before.get(pid) ?? 0)
      const self = used(process.pid)
      const postgres = [...after.keys()].filter((pid) => pid !== process.pid).reduce((sum, pid) => sum + used(pid), 0)
      const result = {
        round,
        materialized,
        seconds: Number(seconds.toFixed(1)),
        rate: Math.round(materialized / seconds),
        cpu_ms_per_decision_materializer: Number(((self * 1000) / materialized).toFixed(3)),
        cpu_ms_per_decision_postgres: Number(((postgres * 1000) / materialized).toFixed(3))
      }
      console.error(JSON.stringify(result))
      rounds.push(result)
    }
    const rates = rounds.map((r) => r.rate!).sort((a, b) => a - b)
    console.log(JSON.stringify({
      decisions,
      rounds,
      median_rate: rates[Math.floor(rates.length / 2)],
      machine: { cores: Os.cpus().length, load_after: Os.loadavg().map((l) => Number(l.toFixed(2))) }
    }, null, 2))
  }).pipe(
    Effect.provide(Materializer.layer.pipe(Layer.provide(ModelCalls.layer), Layer.provideMerge(benchStore(databaseUrl)))),
    Effect.scoped
  )
})

NodeRuntime.runMain(program)
