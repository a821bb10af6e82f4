/**
 * Planner statistics that keep up with a ledger that grows from nothing.
 *
 * The ledger's tables start empty and grow by thousands of rows a minute. Until a table has statistics, PostgreSQL
 * guesses, and for the builder's statements it guesses badly: with the tenant policy's conditions in every query,
 * a primary-key probe of `decisions` was planned as a walk of a whole workspace's secondary index (0.2 ms a probe
 * instead of 2 µs; a third of the database's CPU at 500 decisions/s). Autovacuum would fix that within a minute —
 * where it runs: it is off on some servers, and embedded PGlite has no autovacuum at all.
 *
 * So the writers apply autovacuum's own analyze rule themselves: a table whose rows changed since its last ANALYZE
 * by more than `ANALYZE_THRESHOLD + ANALYZE_SCALE × its rows` (PostgreSQL's defaults) is analysed. Where autovacuum
 * runs, whichever comes first resets the count and the other has nothing to do. A table that has no statistics from
 * rows yet gets them within a second; one that has them is analysed again at most every ten seconds (a month's new
 * partition fills from nothing, and each ANALYZE of it costs more than the last). Several builder processes share
 * the work through a transaction-scoped advisory lock. ANALYZE reads a sample (30,000 rows at the default target),
 * so a large table costs the same as a middling one.
 */
import { Clock, Context, Duration, Effect, Layer, Metric } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { every } from "../supervision/supervise.ts"

/** autovacuum_analyze_threshold and autovacuum_analyze_scale_factor, PostgreSQL's defaults */
const ANALYZE_THRESHOLD = 50
const ANALYZE_SCALE = 0.1
/**
 * How often the counts are read: a new install, and each month's new decisions partition, has statistics within
 * this of its first rows. Every second, because a plan made without statistics costs more the longer it lasts:
 * before a partition's first ANALYZE the builder's stored-id probe walked a workspace's seq index, 100 ms a batch
 * seven seconds into a new ledger at 2,500 decisions/s. The check is one catalog query (under a millisecond).
 */
const CHECK_EVERY = Duration.seconds(1)
/**
 * How long a table that has statistics waits before it is analysed again: ANALYZE samples up to 30,000 rows, a
 * second or more on a growing decisions partition under ingest, so a table growing 10 % a second is not analysed
 * every second.
 */
const REANALYZE_AFTER = Duration.seconds(10)
/** Key of the advisory lock that lets one process at a time analyse (an arbitrary constant of this project). */
const ANALYZE_LOCK = 7_316_401

const analyzed = Metric.counter("ledger_store_tables_analyzed_total", {
  description: "ANALYZE runs the builders made because a table changed past autovacuum's threshold since its last one",
  incremental: true
})

export class PlannerStatistics extends Context.Service<PlannerStatistics, {
  /** Analyses the tables that changed past the threshold since their last ANALYZE; returns their names. */
  readonly refresh: Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
}>()("ledger/store/PlannerStatistics") {
  static readonly layer = Layer.effect(
    PlannerStatistics,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const refresh = sql.withTransaction(Effect.gen(function*() {
        const [lock] = yield* sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${ANALYZE_LOCK}) AS locked`
        if (lock?.locked !== true) return []
        // a table without statistics from rows (never analysed, or analysed empty) gets them at once; one that has
        // them, once it changed past the threshold and REANALYZE_AFTER passed since its last ANALYZE (by the
        // service's clock, so a test can move it)
        const analysedBefore = new Date((yield* Clock.currentTimeMillis) - Duration.toMillis(REANALYZE_AFTER))
        const stale = yield* sql<{ table_name: string }>`
          SELECT s.relname AS table_name
          FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
          WHERE s.schemaname = current_schema()
            AND s.n_mod_since_analyze > ${ANALYZE_THRESHOLD} + ${ANALYZE_SCALE} * greatest(c.reltuples, 0)
            AND (c.reltuples <= 0 OR greatest(s.last_analyze, s.last_autoanalyze) IS NULL
              OR greatest(s.last_analyze, s.last_autoanalyze) <= ${analysedBefore})
          ORDER BY s.relname`
        for (const { table_name } of stale) yield* sql`ANALYZE ${sql(table_name)}`
        return stale.map((row) => row.table_name)
      }))
      return PlannerStatistics.of({
        refresh: refresh.pipe(
          Effect.tap((tables) => tables.length === 0 ? Effect.void : Effect.all([
            Metric.update(analyzed, tables.length),
            Effect.logDebug("planner statistics refreshed", { tables })
          ])),
          Effect.withSpan("PlannerStatistics.refresh")
        )
      })
    })
  )

  /** Keeps the statistics fresh for as long as the layer lives (the builder role). */
  static readonly maintained = Layer.effectDiscard(Effect.gen(function*() {
    const { refresh } = yield* PlannerStatistics
    yield* every("planner statistics", refresh, CHECK_EVERY)
  }))
}
