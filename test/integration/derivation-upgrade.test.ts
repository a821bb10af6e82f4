/**
 * Upgrading a ledger whose derivations were stored as jsonb (migration 0024): every partition's column becomes json
 * holding the same documents, compressed with lz4 as before (PostgreSQL does not carry a partitioned table's
 * compression to its partitions, nor keep a column's through a change of type). Every partition's `raw_context`
 * compresses with lz4 too (migration 0026).
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { testDatabase } from "../support/db.ts"
import { migrateBefore } from "../support/migrate.ts"

describe("derivation upgrade", () => {
  it.effect("jsonb derivations stored before migration 0024 become json, in every partition, still lz4; contexts lz4 too", () =>
    Effect.gen(function*() {
      const { url } = yield* testDatabase
      const [tenant, workspace] = [Crypto.randomUUID(), Crypto.randomUUID()]
      const derivation = { title: "Fix the login bug", cost: { total_usd: 0.0021 }, logic_trace: [{ index: 0, text: "read the logs" }] }
      // one decision in the legacy partition, one in a month's partition made as the ledger's retention makes them
      const calls = [{ id: Crypto.randomUUID(), at: new Date(Date.UTC(2026, 10, 2)) }, { id: Crypto.randomUUID(), at: new Date(Date.UTC(2030, 0, 5)) }]
      yield* Effect.gen(function*() {
        yield* migrateBefore("0024")
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE decisions_2030_01 PARTITION OF decisions FOR VALUES FROM ('2030-01-01') TO ('2030-02-01')`
        yield* sql`INSERT INTO tenants (tenant_id, name) VALUES (${tenant}, 'old-co')`
        yield* sql`INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${workspace}, ${tenant}, 'ops')`
        for (const call of calls) {
          yield* sql`INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, created_at,
            provider, provider_type, model, stream, status, title, intent, outcome, quality, confidence, latency_ms, derivation,
            raw_request, raw_response, capture_version, captured_at, recorded_at)
            VALUES (${call.id}, ${tenant}, ${workspace}, ${Crypto.randomUUID()}, ${Crypto.randomUUID()}, 'agent', ${Crypto.randomUUID()},
              ${call.at}, 'openai', 'openai', 'gpt-4o', false, 200, 'a title', 'answer', 'success', 0.5, 0.5, 900,
              ${JSON.stringify(derivation)}::jsonb, '{}', 'answer', 2, ${call.at}, ${call.at})`
        }
        yield* migrateBefore("9999")
        const columns = yield* sql<{ relname: string; type: string; compression: string }>`
          SELECT c.relname, format_type(a.atttypid, a.atttypmod) AS type, a.attcompression::text AS compression
          FROM pg_partition_tree('decisions') t JOIN pg_class c ON c.oid = t.relid
          JOIN pg_attribute a ON a.attrelid = t.relid AND a.attname IN ('derivation', 'raw_context') ORDER BY c.relname, a.attname`
        // a Responses chain's context, left to the server's default before, compresses with lz4 too (0026)
        assert.deepStrictEqual(columns, ["decisions", "decisions_2030_01", "decisions_legacy"].flatMap((relname) => [
          { relname, type: "json", compression: "l" },
          { relname, type: "text", compression: "l" }
        ]))
        const rows = yield* sql<{ derivation: unknown; title: string }>`
          SELECT derivation, derivation->>'title' AS title FROM decisions ORDER BY created_at`
        assert.deepStrictEqual(rows, calls.map(() => ({ derivation, title: derivation.title })))
        const [setting] = yield* sql<{ compression: string }>`SELECT current_setting('default_toast_compression') AS compression`
        assert.strictEqual(setting!.compression, "pglz")
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })), Effect.scoped)
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
