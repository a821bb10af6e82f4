/**
 * Upgrading a ledger whose sessions were written before they kept their first decision (migration 0023): each
 * session gets the earliest of its decisions (by time, then id), which the builder then reads instead of probing the
 * decisions.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { testDatabase } from "../support/db.ts"
import { migrateBefore } from "../support/migrate.ts"

describe("sessions upgrade", () => {
  it.effect("each session stored before migration 0023 gets its earliest decision as its first", () =>
    Effect.gen(function*() {
      const { url } = yield* testDatabase
      const [tenant, workspace] = [Crypto.randomUUID(), Crypto.randomUUID()]
      const [one, two, empty] = [Crypto.randomUUID(), Crypto.randomUUID(), Crypto.randomUUID()]
      const T0 = Date.UTC(2026, 10, 2)
      // two decisions at the same minute in session `one`: the lower id comes first
      const [low, high] = [Crypto.randomUUID(), Crypto.randomUUID()].sort()
      const calls = [
        { session: one, id: Crypto.randomUUID(), minute: 4, title: "later" },
        { session: one, id: high, minute: 1, title: "same minute, higher id" },
        { session: one, id: low, minute: 1, title: "first of one" },
        { session: two, id: Crypto.randomUUID(), minute: 0, title: "first of two" },
        { session: two, id: Crypto.randomUUID(), minute: 9, title: "last of two" }
      ]
      yield* Effect.gen(function*() {
        yield* migrateBefore("0023")
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO tenants (tenant_id, name) VALUES (${tenant}, 'old-co')`
        yield* sql`INSERT INTO workspaces (workspace_id, tenant_id, name) VALUES (${workspace}, ${tenant}, 'ops')`
        for (const session of [one, two, empty]) {
          yield* sql`INSERT INTO sessions (session_id, tenant_id, workspace_id, agent_id, started_at, ended_at, decision_count,
            error_count, total_cost_usd, total_tokens, summary)
            VALUES (${session}, ${tenant}, ${workspace}, 'agent', ${new Date(T0)}, ${new Date(T0 + 600_000)}, 0, 0, 0, 0, '')`
        }
        for (const call of calls) {
          const at = new Date(T0 + call.minute * 60_000)
          yield* sql`INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, created_at,
            provider, provider_type, model, stream, status, title, intent, outcome, quality, confidence, latency_ms, derivation,
            raw_request, raw_response, capture_version, captured_at)
            VALUES (${call.id}, ${tenant}, ${workspace}, ${Crypto.randomUUID()}, ${Crypto.randomUUID()}, 'agent', ${call.session},
              ${at}, 'openai', 'openai', 'gpt-4o', false, 200, ${call.title}, 'answer', 'success', 0.5, 0.5, 900, '{}'::jsonb,
              '{}', 'answer', 2, ${at})`
        }
        yield* migrateBefore("9999")
        const rows = yield* sql<{ session_id: string; first_ledger_id: string | null; first_at: Date | null; first_title: string | null }>`
          SELECT session_id::text AS session_id, first_ledger_id::text AS first_ledger_id, first_at, first_title FROM sessions`
        const bySession = new Map(rows.map((row) => [row.session_id, row]))
        assert.deepStrictEqual(bySession.get(one), { session_id: one, first_ledger_id: low, first_at: new Date(T0 + 60_000), first_title: "first of one" })
        assert.deepStrictEqual(bySession.get(two)?.first_title, "first of two")
        assert.deepStrictEqual(bySession.get(empty), { session_id: empty, first_ledger_id: null, first_at: null, first_title: null })
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })), Effect.scoped)
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
