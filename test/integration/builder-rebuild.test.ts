/**
 * `ledger rebuild` against real PostgreSQL: re-derives decisions from their stored raw calls, repairs rollups,
 * agrees with what the builder stored, and a second run changes nothing.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Rebuilder } from "../../src/builder/Rebuild.ts"
import type { Progress } from "../../src/supervision/progress.ts"
import { progressBar } from "../../src/supervision/progress.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { TEMPLATE_COUNT } from "../../bench/ingest/captures.ts"
import { builderStack, captureJson, ledgerEnv, MINUTE, newWorkspace, publishAndBuild, recount, runLedger, T0 } from "./builder-harness.ts"

const decisions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql`SELECT ledger_id, session_id, title, intent, outcome, cost_usd, quality, confidence, derivation, subjects, built_at
    FROM decisions ORDER BY ledger_id`
})

/** Rollups with money rounded: the builder adds costs one batch at a time, the rebuild sums them in SQL. */
const rollups = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sessions = yield* sql`SELECT session_id, agent_id, execution_id, started_at, ended_at, decision_count::int, error_count::int,
    round(total_cost_usd::numeric, 9)::float8 AS cost, total_tokens::float8, summary FROM sessions ORDER BY session_id`
  const agents = yield* sql`SELECT agent_id, agent_name, decision_count::int, session_count::int, error_count::int,
    round(total_cost_usd::numeric, 9)::float8 AS cost, total_tokens::float8, round(confidence_sum::numeric, 9)::float8 AS confidence,
    first_seen_at, last_seen_at FROM agents ORDER BY tenant_id, agent_id`
  return { sessions, agents }
})

describe("ledger rebuild", () => {
  layer(Rebuilder.layer.pipe(Layer.provideMerge(builderStack("postgres"))), { timeout: 120_000, excludeTestServices: true })("rebuild", (it) => {
    it.effect("re-derives changed decisions, repairs rollups, agrees with the builder, and is idempotent", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rebuilder = yield* Rebuilder
        // two workspaces, several agents and sessions, every call shape
        for (const label of ["acme", "globex"]) {
          const identity = yield* newWorkspace(label)
          yield* publishAndBuild(Array.from({ length: 3 * TEMPLATE_COUNT }, (_, i) =>
            captureJson(identity, {
              agent_id: `agent-${i % 3}`,
              agent_name: `Agent ${i % 3}`,
              execution_id: i % 5 === 0 ? `run-${i % 2}` : null,
              started_at: T0 + i * 7 * MINUTE,
              variant: i
            })))
        }
        const built = yield* decisions
        const builtRollups = yield* rollups

        // a rebuild of what the builder just stored changes nothing, and computes the same rollups
        const fresh = yield* rebuilder.run({ batchSize: 10 })
        assert.deepStrictEqual(fresh, { workspaces: 2, decisions: built.length, changed: 0, unreadable: 0 })
        assert.deepStrictEqual(yield* decisions, built)
        assert.deepStrictEqual(yield* rollups, builtRollups)

        // an older derivation and drifted rollups, as after a derivation change or a bug
        yield* sql`UPDATE decisions SET title = 'old title', derivation = '{}'::jsonb, subjects = '[]'::jsonb, cost_usd = 99, quality = 0
          WHERE ledger_id IN (SELECT ledger_id FROM decisions ORDER BY ledger_id LIMIT 11)`
        yield* sql`UPDATE agents SET decision_count = 0, total_cost_usd = -1, confidence_sum = 0`
        yield* sql`UPDATE sessions SET total_cost_usd = 123, summary = 'stale'`
        assert.isAbove((yield* recount).length, 0)

        const progress: Array<Progress> = []
        const result = yield* rebuilder.run({ batchSize: 10, onProgress: (p) => Effect.sync(() => progress.push(p)) })
        assert.deepStrictEqual(result, { workspaces: 2, decisions: built.length, changed: 11, unreadable: 0 })
        assert.deepStrictEqual(progress[0], { done: 0, total: built.length })
        assert.deepStrictEqual(progress.at(-1), { done: built.length, total: built.length })
        for (let i = 1; i < progress.length; i++) assert.isAbove(progress[i]!.done, progress[i - 1]!.done)

        const rebuilt = yield* decisions
        const withoutBuiltAt = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map(({ built_at: _, ...row }) => row)
        assert.deepStrictEqual(withoutBuiltAt(rebuilt), withoutBuiltAt(built))
        // only the re-derived decisions were touched
        assert.strictEqual(rebuilt.filter((row, i) => (row.built_at as Date).getTime() !== (built[i]!.built_at as Date).getTime()).length, 11)
        assert.deepStrictEqual(yield* recount, [])
        assert.deepStrictEqual(yield* rollups, builtRollups)

        // and again: nothing to do
        const again = yield* rebuilder.run({ batchSize: 10 })
        assert.strictEqual(again.changed, 0)
        assert.deepStrictEqual(yield* decisions, rebuilt)
      }))

    it.effect("`ledger rebuild` reports progress on stderr and the result on stdout", () =>
      Effect.gen(function*() {
        const settings = yield* LedgerConfig
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE decisions SET title = 'old title' WHERE ledger_id IN (SELECT ledger_id FROM decisions ORDER BY ledger_id LIMIT 3)`
        const [{ n }] = (yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions`) as [{ n: number }]
        const run = yield* runLedger(["rebuild", "--json", "--batch-size", "7"], ledgerEnv(settings))
        assert.strictEqual(run.code, 0, run.stdout + run.stderr)
        assert.deepStrictEqual(JSON.parse(run.stdout), { workspaces: 2, decisions: n, changed: 3, unreadable: 0 })
        // not a terminal: a plain line per tenth of the way, ending at 100%
        const lines = run.stderr.split("\n").filter((line) => line.startsWith("rebuild "))
        assert.match(lines[0]!, /^rebuild 0% 0\/\d+ decisions/)
        assert.match(lines.at(-1)!, new RegExp(`^rebuild 100% ${n}/${n} decisions`))
        assert.notInclude(run.stderr, "\r")
      }))
  })
})

describe("rebuild progress bar", () => {
  it.effect("redraws in place on a terminal and ends the line", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      const bar = progressBar("rebuild", { isTTY: true, write: (text) => written.push(text) })
      yield* bar.update({ done: 0, total: 200 })
      yield* bar.update({ done: 200, total: 200 })
      yield* bar.finish
      assert.match(written[0]!, /^\rrebuild \[░{30}\] 0% 0\/200 decisions/)
      assert.match(written.at(-1)!, /^\rrebuild \[█{30}\] 100% 200\/200 decisions .*\n$/)
    }))
})
