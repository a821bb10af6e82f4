/**
 * SQL the migrations share (one file per migration in this folder, registered in index.ts), and the isolation model
 * it implements.
 *
 * Isolation model (docs/ARCHITECTURE.md):
 * - Every table carrying `tenant_id` has row-level security ENABLEd and FORCEd.
 * - Runtime code never queries as the owner: it runs inside a transaction that sets `ledger.*` settings with
 *   `set_config(..., true)` and `SET LOCAL ROLE` to one of three NOLOGIN roles:
 *     ledger_reader   — query layer (SELECT on ledger tables only)
 *     ledger_builder  — decision builder (SELECT/INSERT/UPDATE on ledger tables only)
 *     ledger_control  — authentication and administration (identity tables only)
 * - Policies read settings through `(select nullif(current_setting(name, true), ''))` so Postgres evaluates them
 *   once per statement, and an unset setting (NULL, or '' on a reused connection) matches no row.
 *
 * Each statement is its own query: the extended protocol (and PGlite behind it) refuses multi-statement strings.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const setting = (name: string) => `(select nullif(current_setting('ledger.${name}', true), ''))`
const tenantScope = `tenant_id = ${setting("tenant_id")}::uuid AND workspace_id = ${setting("workspace_id")}::uuid`
/** restricted members see only what their own gateway keys produced */
export const notRestricted = `${setting("member_role")} IS DISTINCT FROM 'restricted'`

/**
 * PL/pgSQL statements that set lz4 on a column of `decisions` and of every partition of it: setting it on the
 * partitioned table reaches only partitions made later. A server built without lz4 (PGlite) keeps pglz. For a block
 * that declares `part regclass`.
 */
export const lz4OnEveryPartition = (column: string) =>
  `FOR part IN SELECT relid FROM pg_partition_tree('decisions') LOOP
      BEGIN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN ${column} SET COMPRESSION lz4', part);
      EXCEPTION WHEN feature_not_supported THEN NULL;
      END;
    END LOOP;`

export const run = Effect.fnUntraced(function*(statements: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})

/**
 * Roles are cluster-wide: create them only when missing, so several databases can share a server. Two databases
 * migrating at once on a fresh server race on the same role (a check-then-create loses with a unique violation),
 * so the loser's error is what says "it exists".
 */
export const createRole = (role: string) =>
  `DO $$ BEGIN CREATE ROLE ${role} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`

/** ENABLE + FORCE row-level security with the tenant/workspace policy for the runtime roles. */
export const isolate = (table: string) => [
  `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY ${table}_tenant ON ${table} TO ledger_reader, ledger_builder USING (${tenantScope}) WITH CHECK (${tenantScope})`
]

export const LEDGER_TABLES = ["agents", "sessions", "decisions"] as const
export const CONTROL_TABLES = ["tenants", "workspaces", "users", "memberships", "credentials"] as const

/** A uuid setting, cast inside the sub-select: the policy compares uuid = uuid, which is leakproof */
export const settingUuid = (name: string) => `(select nullif(current_setting('ledger.${name}', true), '')::uuid)`
/**
 * The tenant/workspace condition for tables that also have a RESTRICTIVE policy. Postgres applies each policy kind
 * at its own security level, and a condition above the lowest level can become an index condition only when it is
 * leakproof — `tenant_id = (text)::uuid` is not (the text-to-uuid cast may fail), so `tenantScope` left the ledger
 * tables scanned in full. With the cast inside the sub-select the comparison is uuid = uuid.
 */
export const indexableTenantScope = `tenant_id = ${settingUuid("tenant_id")} AND workspace_id = ${settingUuid("workspace_id")}`
