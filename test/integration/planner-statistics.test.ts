/**
 * Planner statistics: a table that changed past autovacuum's threshold since its last ANALYZE is analysed by the
 * builders' refresh, once, and not again within ten seconds — checked by running the refresh on a clock 8 s and then
 * 12 s ahead, not by watching real time; on PostgreSQL (autovacuum is off on these machines) and on embedded PGlite
 * (which has none).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { PlannerStatistics } from "../../src/store/PlannerStatistics.ts"
import { type Backend, storeWithPoolLayer } from "../support/stack.ts"

/** The wall clock, `ms` ahead: what the service would see that much later. */
const wallClockAhead = (ms: number): Clock.Clock => {
  const millis = () => Date.now() + ms
  const nanos = () => BigInt(millis()) * 1_000_000n
  return {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: () => process.hrtime.bigint(),
    monotonicTimeNanos: Effect.sync(() => process.hrtime.bigint()),
    sleep: (duration) => Effect.callback<void>((resume) => {
      const timer = setTimeout(() => resume(Effect.void), Duration.toMillis(duration))
      return Effect.sync(() => clearTimeout(timer))
    })
  }
}

for (const backend of ["postgres", "pglite"] satisfies ReadonlyArray<Backend>) {
  describe(`planner statistics (${backend})`, () => {
    layer(storeWithPoolLayer(backend))((it) => {
      it.effect("analyses a table that grew past the threshold, and then not again until it changes", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const statistics = yield* PlannerStatistics
          const analysed = sql<{ analysed: boolean }>`
            SELECT last_analyze IS NOT NULL AS analysed FROM pg_stat_user_tables WHERE relname = 'tenants'`.pipe(
            Effect.map((rows) => rows[0]?.analysed === true)
          )
          yield* statistics.refresh
          assert.isFalse(yield* analysed, "an empty table needs no statistics")

          yield* sql`INSERT INTO tenants (tenant_id, name) SELECT gen_random_uuid(), 'tenant-' || n FROM generate_series(1, 200) AS n`
          // a backend reports what it changed to the statistics system after its transaction, within a second or so
          const tables = yield* TestClock.withLive(statistics.refresh.pipe(
            Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (tables) => tables.includes("tenants"), times: 75 })
          ))
          assert.include(tables, "tenants")
          assert.isTrue(yield* analysed)
          assert.notInclude(yield* statistics.refresh, "tenants", "nothing changed since")

          // changed past the threshold again: not analysed again within ten seconds of the last ANALYZE (a growing
          // table would be sampled every second otherwise), and analysed once they have passed
          yield* sql`INSERT INTO tenants (tenant_id, name) SELECT gen_random_uuid(), 'more-' || n FROM generate_series(1, 400) AS n`
          const changes = sql<{ changed: number }>`SELECT n_mod_since_analyze::int AS changed FROM pg_stat_user_tables WHERE relname = 'tenants'`
          yield* TestClock.withLive(changes.pipe(
            Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (rows) => (rows[0]?.changed ?? 0) >= 400, times: 150 })
          ))
          const refreshIn = (ms: number) => Effect.provideService(statistics.refresh, Clock.Clock, wallClockAhead(ms))
          assert.notInclude(yield* refreshIn(8_000), "tenants", "8 s after its last ANALYZE")
          assert.include(yield* refreshIn(12_000), "tenants", "12 s after")
        }), { timeout: 30_000 })
    })
  })
}
