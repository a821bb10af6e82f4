/**
 * Upgrading a ledger that was written before chaining (PostgreSQL): migration 0019 keeps the old table as the first
 * partition of `decisions`, the builder role chains its rows at start in the order they were captured, and `ledger
 * verify` holds from then on.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { StoreLive } from "../../layers/Store.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { ChainBackfill } from "../../src/integrity/ChainBackfill.ts"
import { Verifier } from "../../src/integrity/Verifier.ts"
import { migrations } from "../../src/store/migrations/index.ts"
import { testDatabase } from "../support/db.ts"
import { testSettings } from "../support/settings.ts"
import { tempDir } from "../support/stack.ts"

const BEFORE_CHAINING = Object.fromEntries(Object.entries(migrations).filter(([id]) => id < "0019"))

describe("integrity upgrade", () => {
  it.effect("rows stored before chaining are chained in capture order and verify", () =>
    Effect.gen(function*() {
      const { url } = yield* testDatabase
      const old = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
      const [tenant, workspace] = [Crypto.randomUUID(), Crypto.randomUUID()]
      const T0 = Date.UTC(2025, 5, 1)
      // the ledger as an earlier version left it: five decisions, captured out of id order
      yield* Effect.gen(function*() {
        yield* PgMigrator.run({ loader: PgMigrator.fromRecord(BEFORE_CHAINING), table: "ledger_migrations" }).pipe(Effect.provide(NodeServices.layer))
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO tenants (tenant_id, name) VALUES (${tenant}, 'old-co')`
        yield* sql`INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${workspace}, ${tenant}, 'ops')`
        for (const [i, minute] of [3, 1, 4, 0, 2].entries()) {
          const at = new Date(T0 + minute * 60_000)
          yield* sql`INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, created_at,
            provider, provider_type, model, stream, status, title, intent, outcome, quality, confidence, latency_ms, derivation,
            raw_request, raw_response, capture_version, captured_at)
            VALUES (${Crypto.randomUUID()}, ${tenant}, ${workspace}, ${Crypto.randomUUID()}, ${Crypto.randomUUID()}, 'agent', ${Crypto.randomUUID()},
              ${at}, 'openai', 'openai', 'gpt-4o', false, 200, ${`call ${i}`}, 'answer', 'success', 0.5, 0.5, 900, '{}'::jsonb,
              ${JSON.stringify({ messages: [{ role: "user", content: `question ${i}` }] })}, ${`answer ${i}`}, 1, ${new Date(at.getTime() + 900)})`
        }
      }).pipe(Effect.provide(old), Effect.scoped)

      const settings = testSettings({ dataDir: yield* tempDir, databaseUrl: Option.some(Redacted.make(url)) })
      const stack = Layer.mergeAll(Verifier.layer, ChainBackfill.layer).pipe(
        Layer.provideMerge(StoreLive),
        Layer.provideMerge(LedgerConfig.layerFrom(settings))
      )
      yield* Effect.gen(function*() {
        const verifier = yield* Verifier
        const before = yield* verifier.run()
        assert.isFalse(before.ok)
        assert.strictEqual(before.workspaces[0]!.integrity.altered_total, 5)

        assert.strictEqual(yield* (yield* ChainBackfill).run, 5)
        const after = yield* verifier.run()
        assert.isTrue(after.ok)
        assert.deepStrictEqual([after.workspaces[0]!.decisions, after.workspaces[0]!.head_seq], [5, 5])
      }).pipe(Effect.provide(stack))

      // chained in the order they were captured, and still in the partition they were in
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ title: string; part: string }>`SELECT title, tableoid::regclass::text AS part FROM decisions ORDER BY seq`
        assert.deepStrictEqual(rows.map((row) => row.title), ["call 3", "call 1", "call 4", "call 0", "call 2"])
        assert.isTrue(rows.every((row) => row.part === "decisions_legacy"))
      }).pipe(Effect.provide(old), Effect.scoped)
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
