import { indexableTenantScope, LEDGER_TABLES, notRestricted, run, settingUuid } from "./sql.ts"

/**
 * Query layer (src/query): the install's cursor-signing secret, tenant policies the planner can use as index
 * conditions, and the indexes behind the read model's keyset pages (each list orders by (sort key, id) in one
 * direction, so a row comparison bounds the index scan of every page).
 */
export const query = run([
  // install-wide secrets, generated on first use by the service (never by the migration): only the control role
  `CREATE TABLE install_secrets (
    name text PRIMARY KEY,
    secret bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `ALTER TABLE install_secrets ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE install_secrets FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY install_secrets_control ON install_secrets TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT SELECT, INSERT ON install_secrets TO ledger_control`,

  ...LEDGER_TABLES.map((table) =>
    `ALTER POLICY ${table}_tenant ON ${table} USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`
  ),
  `ALTER POLICY decisions_restricted ON decisions USING (${notRestricted} OR user_id = ${settingUuid("user_id")})`,

  // order by cost: a plain column (unpriced = -1, below every price), since an expression such as coalesce() in
  // a keyset condition is not leakproof and could not bound the index scan
  `ALTER TABLE decisions ADD COLUMN cost_rank double precision GENERATED ALWAYS AS (coalesce(cost_usd, -1)) STORED`,
  `CREATE INDEX decisions_cost ON decisions (tenant_id, workspace_id, cost_rank, ledger_id)`,
  `CREATE INDEX decisions_quality ON decisions (tenant_id, workspace_id, quality, ledger_id)`,
  // the most asked-for filter (errors, refusals, ...), newest first
  `CREATE INDEX decisions_outcome ON decisions (tenant_id, workspace_id, outcome, created_at, ledger_id)`,
  // a restricted member's queries read their own decisions only
  `CREATE INDEX decisions_user ON decisions (tenant_id, workspace_id, user_id, created_at, ledger_id)`,
  `CREATE INDEX sessions_agent_cost ON sessions (tenant_id, workspace_id, agent_id, total_cost_usd, session_id)`
])
