/**
 * Verification speed (docs/integrity.md): `ledger verify` over the 1,000,000-decision ledger of bench/reads
 * (realistic captures, ~1.6 KB of raw exchange each, 8 workspaces), against the cost of merely reading what it reads.
 *
 *   npx node bench/reads/seed.ts                 # once: seeds ledger_bench_reads (unchained rows, as an upgrade finds them)
 *   npx node bench/integrity/verify.ts [--database ledger_bench_reads] [--rounds 3]
 *
 * First the builder role's start-up backfill chains whatever is not chained yet (timed: the upgrade's cost), then
 * each round runs, interleaved:
 * - `read`: the verifier's own keyset pages (10,000 rows, by seq, each workspace in its tenant scope) with the same
 *   columns, the raw hash left out — the floor of reading the chain at all;
 * - `read + raw hash`: the same pages with Postgres recomputing each raw exchange's sha256 (what verify reads);
 * - `verify`: `Verifier.run()` — those pages, the next fetched while this one's HMACs are checked in Node.
 * The rate is decisions ÷ wall time of the round; medians over the rounds. Postgres runs on the same 2 cores. Each
 * phase also reports CPU time per decision: this process's (its threads included) and the rest of the machine's
 * (Postgres, mostly).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import { parseArgs } from "node:util"
import { ChainBackfill } from "../../src/integrity/ChainBackfill.ts"
import { ROW_COLUMNS } from "../../src/integrity/rows.ts"
import { Verifier } from "../../src/integrity/Verifier.ts"
import { listWorkspaces } from "../../src/integrity/workspaces.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { analyseDatabase, BENCH_DATABASE, benchDatabase, benchStore, countDecisions } from "../reads/seed.ts"

const { values: args } = parseArgs({
  options: {
    database: { type: "string", default: BENCH_DATABASE },
    rounds: { type: "string", default: "3" }
  }
})
const ROUNDS = Number(args.rounds)
const PAGE = 10_000

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** Reads every chain page by page as the verifier does; `columns` picks what is read. */
const readChains = (columns: string) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    let rows = 0
    for (const scope of yield* listWorkspaces()) {
      let after = 0
      while (true) {
        const page = yield* tenantSql.read({ ...scope, user_id: "", role: "member" }, ScopedSql.use((sql) =>
          sql<{ seq: number }>`SELECT ${sql.literal(columns)} FROM decisions d
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND d.seq > ${after}::bigint
            ORDER BY d.seq LIMIT ${PAGE}`
        ))
        rows += page.length
        if (page.length < PAGE) break
        after = page.at(-1)!.seq
      }
    }
    return rows
  })

/** CPU time of the whole machine so far, in seconds (Linux /proc/stat: user, nice, system, irq, softirq). */
const machineCpu = () => {
  const fields = Fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  return (fields[0]! + fields[1]! + fields[2]! + fields[5]! + fields[6]!) / 100
}

/** Wall time, and CPU time of this process (threads included) and of everything else on the machine (Postgres). */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const cpu = process.cpuUsage()
    const machine = machineCpu()
    const value = yield* effect
    const used = process.cpuUsage(cpu)
    const node = (used.user + used.system) / 1e6
    return { value, seconds: (performance.now() - started) / 1000, node, other: machineCpu() - machine - node }
  })

const program = Effect.gen(function*() {
  const url = yield* benchDatabase(args.database!, false)
  yield* Effect.gen(function*() {
    const decisions = yield* countDecisions
    if (decisions === 0) return yield* Effect.fail(new Error(`${args.database} is empty: run npx node bench/reads/seed.ts first`))
    const backfill = yield* timed((yield* ChainBackfill).run)
    if (backfill.value > 0) {
      console.log(JSON.stringify({ backfill: { decisions: backfill.value, seconds: backfill.seconds, per_second: Math.round(backfill.value / backfill.seconds) } }))
      yield* analyseDatabase(url)
    }
    const verifier = yield* Verifier
    const withoutRawHash = ROW_COLUMNS.replace(/,\s*coalesce\(sha256[\s\S]*AS raw_intact/, "")
    const phases = {
      read: readChains(withoutRawHash),
      "read + raw hash": readChains(ROW_COLUMNS),
      verify: verifier.run().pipe(Effect.map((result) => {
        if (!result.ok) throw new Error("the chains do not verify")
        return result.decisions
      }))
    }
    // a warm-up pass, so every round reads from a warm cache
    yield* phases.read
    const rates: Record<string, Array<number>> = {}
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, phase] of Object.entries(phases)) {
        const { value, seconds, node, other } = yield* timed(phase)
        ;(rates[name] ??= []).push(value / seconds)
        console.log(JSON.stringify({
          round,
          phase: name,
          decisions: value,
          seconds: Number(seconds.toFixed(2)),
          per_second: Math.round(value / seconds),
          cpu_us_per_decision: { node: Number((node * 1e6 / value).toFixed(1)), rest: Number((other * 1e6 / value).toFixed(1)) }
        }))
      }
    }
    console.log(JSON.stringify({
      decisions,
      median_per_second: Object.fromEntries(Object.entries(rates).map(([name, values]) => [name, Math.round(median(values))]))
    }))
  }).pipe(Effect.provide(Layer.mergeAll(Verifier.layer, ChainBackfill.layer).pipe(Layer.provideMerge(benchStore(url)))))
})

NodeRuntime.runMain(program)
