/** Migrating a test database part of the way, to write data as an older ledger held it before upgrading it. */
import { PgMigrator } from "@effect/sql-pg"
import { NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { migrations } from "../../src/store/migrations/index.ts"

/** Runs the migrations whose ids sort before `upTo` ("9999": all of them). */
export const migrateBefore = (upTo: string) =>
  PgMigrator.run({
    loader: PgMigrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([id]) => id < upTo))),
    table: "ledger_migrations"
  }).pipe(Effect.provide(NodeServices.layer))
