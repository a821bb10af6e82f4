/**
 * Row-level security, property-style: random ledgers for two tenants (two workspaces in one, a restricted
 * member), then every principal reads only what it may see; runtime roles cannot write across tenants; nothing
 * leaks to the next pooled query. Runs on real PostgreSQL and on embedded PGlite.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import type { TenantScope } from "../../src/domain/principal.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { createRole } from "../../src/store/migrations/sql.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { ADMIN_URL } from "../support/db.ts"
import { type Backend, storeLayer, storeWithPoolLayer } from "../support/stack.ts"

interface Seeded {
  readonly ledger_id: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly session_id: string
  readonly agent_id: string
}

const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(Math.random() * items.length)]!

/** Inserts one agent/session/decision as the builder role, in the row's own scope. */
const insertDecision = (row: Seeded) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const now = new Date()
    yield* sql`INSERT INTO agents (tenant_id, workspace_id, agent_id, first_seen_at, last_seen_at, decision_count)
      VALUES (${row.tenant_id}, ${row.workspace_id}, ${row.agent_id}, ${now}, ${now}, 1)
      ON CONFLICT (tenant_id, workspace_id, agent_id) DO UPDATE SET decision_count = agents.decision_count + 1`
    yield* sql`INSERT INTO sessions (session_id, tenant_id, workspace_id, agent_id, started_at, ended_at)
      VALUES (${row.session_id}, ${row.tenant_id}, ${row.workspace_id}, ${row.agent_id}, ${now}, ${now})
      ON CONFLICT (session_id) DO NOTHING`
    yield* sql`INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, created_at,
        provider, provider_type, model, stream, status, title, intent, outcome, quality, confidence, latency_ms,
        derivation, raw_request, capture_version, captured_at)
      VALUES (${row.ledger_id}, ${row.tenant_id}, ${row.workspace_id}, ${row.user_id}, ${Crypto.randomUUID()}, ${row.agent_id},
        ${row.session_id}, ${now}, 'openai', 'openai', 'gpt-4o', false, 200, 't', 'question', 'success', 0.5, 0.5, 10,
        '{}'::jsonb, '{}', 1, ${now})`
  })

const visible = (scope: TenantScope) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    return yield* tenantSql.read(scope, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const decisions = yield* sql<{ ledger_id: string; tenant_id: string; workspace_id: string; user_id: string }>`
        SELECT ledger_id, tenant_id, workspace_id, user_id FROM decisions`
      const sessions = yield* sql<{ session_id: string; tenant_id: string; workspace_id: string }>`
        SELECT session_id, tenant_id, workspace_id FROM sessions`
      const agents = yield* sql<{ agent_id: string; tenant_id: string; workspace_id: string }>`
        SELECT agent_id, tenant_id, workspace_id FROM agents`
      return { decisions, sessions, agents }
    }))
  })

const rlsSuite = (backend: Backend) =>
  layer(storeWithPoolLayer(backend), { timeout: 120_000 })(`row-level security (${backend})`, (it) => {
    it.effect("every principal sees exactly its own rows; writes cannot cross tenants; nothing leaks", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const tenantSql = yield* TenantSql
        const pool = yield* SqlClient.SqlClient

        const a = yield* credentials.bootstrap({ tenant: "acme", workspace: "ops", email: "ann@acme.test", role: "member" })
        const aRestricted = yield* credentials.bootstrap({ tenant: "acme", workspace: "ops", email: "rex@acme.test", role: "restricted" })
        const a2 = yield* credentials.bootstrap({ tenant: "acme", workspace: "research", email: "ann@acme.test", role: "member" })
        const b = yield* credentials.bootstrap({ tenant: "globex", workspace: "ops", email: "bob@globex.test", role: "member" })
        const members: Record<string, TenantScope> = {
          a: { ...a, role: "member" },
          aRestricted: { ...aRestricted, role: "restricted" },
          a2: { ...a2, role: "member" },
          b: { ...b, role: "member" }
        }

        // random ledgers: workspaces × agents × sessions × decisions, users mixed within acme/ops
        const rows: Array<Seeded> = []
        for (const [scope, users] of [[a, [a.user_id, aRestricted.user_id]], [a2, [a2.user_id]], [b, [b.user_id]]] as const) {
          const agents = Array.from({ length: 2 + Math.floor(Math.random() * 3) }, (_, i) => `agent-${i}`)
          const sessions = Array.from({ length: 3 + Math.floor(Math.random() * 4) }, () => ({ id: Crypto.randomUUID(), agent: pick(agents) }))
          for (let i = 0; i < 10 + Math.floor(Math.random() * 20); i++) {
            const session = pick(sessions)
            rows.push({
              ledger_id: Crypto.randomUUID(),
              tenant_id: scope.tenant_id,
              workspace_id: scope.workspace_id,
              user_id: pick(users),
              session_id: session.id,
              agent_id: session.agent
            })
          }
        }
        for (const row of rows) yield* tenantSql.write(row, insertDecision(row))

        for (const [name, scope] of Object.entries(members)) {
          const seen = yield* visible(scope)
          const mine = rows.filter((r) =>
            r.tenant_id === scope.tenant_id && r.workspace_id === scope.workspace_id &&
            (scope.role !== "restricted" || r.user_id === scope.user_id)
          )
          assert.deepStrictEqual(seen.decisions.map((d) => d.ledger_id).sort(), mine.map((r) => r.ledger_id).sort(), name)
          assert.deepStrictEqual(
            seen.sessions.map((s) => s.session_id).sort(),
            [...new Set(mine.map((r) => r.session_id))].sort(),
            `${name} sessions`
          )
          assert.deepStrictEqual(
            seen.agents.map((s) => s.agent_id).sort(),
            [...new Set(mine.map((r) => r.agent_id))].sort(),
            `${name} agents`
          )
        }

        // no scope at all (empty settings) sees nothing
        const none = yield* visible({ tenant_id: "", workspace_id: "", user_id: "", role: "member" })
        assert.strictEqual(none.decisions.length + none.sessions.length + none.agents.length, 0)

        // the builder role, scoped to acme, cannot write a globex row; the reader role cannot write at all
        const crossTenant = { ...rows[0]!, tenant_id: b.tenant_id, workspace_id: b.workspace_id, ledger_id: Crypto.randomUUID() }
        const crossWrite = yield* Effect.exit(tenantSql.write(a, insertDecision(crossTenant)))
        assert.isTrue(crossWrite._tag === "Failure", "cross-tenant insert by the builder role must fail")
        const readerWrite = yield* Effect.exit(tenantSql.read(members.a!, insertDecision({ ...rows[0]!, ledger_id: Crypto.randomUUID() })))
        assert.isTrue(readerWrite._tag === "Failure", "insert by the reader role must fail")
        // the control role sees no ledger rows
        const controlView = yield* Effect.exit(tenantSql.control(ScopedSql.use((sql) => sql`SELECT count(*) FROM decisions`)))
        assert.isTrue(controlView._tag === "Failure", "the control role has no grant on ledger tables")

        // after scoped transactions, the pool's connections carry no scope and no role
        for (let i = 0; i < 20; i++) {
          yield* visible(members.b!)
          const [state] = yield* pool<{ tenant: string | null; role: string | null; current_user: string }>`
            SELECT current_setting('ledger.tenant_id', true) AS tenant, current_setting('ledger.member_role', true) AS role, current_user`
          assert.isTrue(state!.tenant === null || state!.tenant === "", `tenant setting leaked: ${state!.tenant}`)
          assert.isTrue(state!.role === null || state!.role === "", "member role leaked")
          assert.notInclude(["ledger_reader", "ledger_builder", "ledger_control"], state!.current_user)
        }
      }))
  })

describe("RLS", () => {
  rlsSuite("postgres")
  rlsSuite("pglite")

  // a generic plan cached while the ledger was empty made the builder's redelivery probe a per-id sequential scan
  layer(storeLayer("postgres"), { timeout: 60_000, excludeTestServices: true })("plans", (it) => {
    it.effect("writers plan each statement for the table as it is; readers keep the default plan cache", () =>
      Effect.gen(function*() {
        const tenantSql = yield* TenantSql
        const scope = { tenant_id: Crypto.randomUUID(), workspace_id: Crypto.randomUUID() }
        const mode = ScopedSql.use((sql) => sql<{ mode: string }>`SELECT current_setting('plan_cache_mode') AS mode`)
        const [written] = yield* tenantSql.write(scope, mode)
        const [read] = yield* tenantSql.read({ ...scope, user_id: Crypto.randomUUID(), role: "member" }, mode)
        assert.strictEqual(written!.mode, "force_custom_plan")
        assert.strictEqual(read!.mode, "auto")
      }))
  })

  // runtime roles are cluster-wide: databases migrating at once on a fresh server all create them
  it.effect("creating a runtime role races safely across concurrent migrations", () =>
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const role = `ledger_race_${Crypto.randomBytes(4).toString("hex")}`
      yield* Effect.addFinalizer(() => sql.unsafe(`DROP ROLE IF EXISTS ${role}`).pipe(Effect.ignore))
      yield* Effect.all(Array.from({ length: 8 }, () => sql.unsafe(createRole(role))), { concurrency: "unbounded" })
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ${role}`
      assert.strictEqual(row!.n, 1)
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(ADMIN_URL), maxConnections: 8 }))))
})
