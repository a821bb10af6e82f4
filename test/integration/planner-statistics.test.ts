/**
 * Planner statistics: a table that changed past autovacuum's threshold since its last ANALYZE is analysed by the
 * builders' refresh, once, and not again within ten seconds; on PostgreSQL (autovacuum is off on these machines) and on embedded PGlite (which has
 * none).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { PlannerStatistics } from "../../src/store/PlannerStatistics.ts"
import { type Backend, storeWithPoolLayer } from "../support/stack.ts"

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
          // table would be sampled every second otherwise)
          yield* sql`INSERT INTO tenants (tenant_id, name) SELECT gen_random_uuid(), 'more-' || n FROM generate_series(1, 400) AS n`
          const soon = yield* TestClock.withLive(statistics.refresh.pipe(
            Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (tables) => tables.includes("tenants"), times: 10 })
          ))
          assert.notInclude(soon, "tenants")
        }), { timeout: 30_000 })
    })
  })
}
