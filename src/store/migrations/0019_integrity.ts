import { indexableTenantScope, isolate, notRestricted, run, settingUuid } from "./sql.ts"

/**
 * The ledger proves itself (docs/ARCHITECTURE.md, "Integrity"):
 *
 * - Every decision carries its place in its workspace's keyed hash chain: `seq` (gapless, commit order), `prev_hash`,
 *   `hash` (HMAC-SHA-256 with the key `chain_key` names, kept outside the database), `raw_hash` (of the stored raw
 *   exchange) and `recorded_at` (when it was chained: never earlier than its predecessor's). `erasure_id` marks a
 *   tombstone: content removed by `ledger erase`, the hashes kept.
 * - `decisions` becomes partitioned by month of `recorded_at`, so retention drops whole partitions and, recorded_at
 *   growing with seq in every workspace, a dropped partition is a prefix of each chain. The table as it was becomes
 *   the first partition (attached, not copied); its rows are chained by the service at its next start, in the order
 *   they were captured (their `recorded_at` is their capture time).
 * - `ledger_chains` holds each workspace's head (locked by the builder for the rest of a batch's transaction once it
 *   chains), the signed "pruned up to seq N" marker and the workspace's content policy.
 * - `ledger_audit_events` records erasures (signed), which `ledger verify` checks tombstones against.
 *
 * A policy names its table by oid: the restricted policies of other tables that look into `decisions` are made again
 * so they look into the partitioned table, not the renamed one.
 */
const LEGACY_INDEXES = [
  "decisions_session", "decisions_agent_recent", "decisions_recent", "decisions_built", "decisions_cost", "decisions_quality",
  "decisions_outcome", "decisions_user", "decisions_response", "decisions_unlinked"
]

export const integrity = run([
  `ALTER TABLE decisions RENAME TO decisions_legacy`,
  `ALTER TABLE decisions_legacy ADD COLUMN recorded_at timestamptz`,
  `UPDATE decisions_legacy SET recorded_at = captured_at`,
  `ALTER TABLE decisions_legacy ALTER COLUMN recorded_at SET NOT NULL`,
  `ALTER TABLE decisions_legacy ADD COLUMN seq bigint`,
  `ALTER TABLE decisions_legacy ADD COLUMN prev_hash bytea`,
  `ALTER TABLE decisions_legacy ADD COLUMN hash bytea`,
  `ALTER TABLE decisions_legacy ADD COLUMN raw_hash bytea`,
  `ALTER TABLE decisions_legacy ADD COLUMN chain_key smallint`,
  `ALTER TABLE decisions_legacy ADD COLUMN erasure_id uuid`,
  `CREATE TABLE decisions (LIKE decisions_legacy INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING COMPRESSION)
    PARTITION BY RANGE (recorded_at)`,
  `ALTER TABLE decisions_legacy DROP CONSTRAINT decisions_pkey`,
  // the partitioned table's indexes take the names; the legacy partition's own are attached to them
  ...LEGACY_INDEXES.map((name) => `ALTER INDEX ${name} RENAME TO ${name.replace("decisions_", "decisions_legacy_")}`),
  // ledger ids stay unique: the builder probes for them under the agent's lock before it inserts (store.ts). The key
  // includes the partition column, as a partitioned table's must, and leads with the tenant and workspace every
  // scoped statement names: a probe by ledger id is then three equalities on one index, which the planner takes even
  // on a partition without statistics yet (with (ledger_id, recorded_at) it scanned the workspace's seq index instead)
  `ALTER TABLE decisions ADD PRIMARY KEY (tenant_id, workspace_id, ledger_id, recorded_at)`,
  `CREATE INDEX decisions_session ON decisions (tenant_id, workspace_id, session_id, created_at, ledger_id)`,
  `CREATE INDEX decisions_agent_recent ON decisions (tenant_id, workspace_id, agent_id, created_at DESC, ledger_id)`,
  `CREATE INDEX decisions_recent ON decisions (tenant_id, workspace_id, created_at DESC, ledger_id)`,
  `CREATE INDEX decisions_built ON decisions (tenant_id, workspace_id, built_at, ledger_id)`,
  `CREATE INDEX decisions_cost ON decisions (tenant_id, workspace_id, cost_rank, ledger_id)`,
  `CREATE INDEX decisions_quality ON decisions (tenant_id, workspace_id, quality, ledger_id)`,
  `CREATE INDEX decisions_outcome ON decisions (tenant_id, workspace_id, outcome, created_at, ledger_id)`,
  `CREATE INDEX decisions_user ON decisions (tenant_id, workspace_id, user_id, created_at, ledger_id)
    INCLUDE (agent_id, session_id, outcome, cost_usd, confidence)`,
  `CREATE INDEX decisions_response ON decisions (tenant_id, workspace_id, response_id) WHERE response_id IS NOT NULL`,
  `CREATE INDEX decisions_unlinked ON decisions (tenant_id, workspace_id, previous_response_id)
    WHERE previous_response_id IS NOT NULL AND previous_ledger_id IS NULL`,
  `CREATE INDEX decisions_chain ON decisions (tenant_id, workspace_id, seq)`,
  // what is not chained yet (the rows from before chaining, until the service chains them at start): empty after
  `CREATE INDEX decisions_unchained ON decisions (tenant_id, workspace_id) WHERE seq IS NULL`,
  // the builder always sets it; rows written otherwise (imports, tests' seeds) are recorded when written
  `ALTER TABLE decisions ALTER COLUMN recorded_at SET DEFAULT now()`,
  // the legacy rows' partition ends where the first monthly partition begins (the month after this one)
  `DO $$ BEGIN EXECUTE format('ALTER TABLE decisions ATTACH PARTITION decisions_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
    (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC'); END $$`,
  `DROP POLICY decisions_tenant ON decisions_legacy`,
  `DROP POLICY decisions_restricted ON decisions_legacy`,
  `REVOKE ALL ON decisions_legacy FROM ledger_reader, ledger_builder`,
  ...isolate("decisions"),
  `ALTER POLICY decisions_tenant ON decisions USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
  `CREATE POLICY decisions_restricted ON decisions AS RESTRICTIVE TO ledger_reader
    USING (${notRestricted} OR user_id = ${settingUuid("user_id")})`,
  `GRANT SELECT ON decisions TO ledger_reader`,
  `GRANT SELECT, INSERT, UPDATE ON decisions TO ledger_builder`,
  `ALTER POLICY sessions_restricted ON sessions
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = sessions.session_id))`,
  `ALTER POLICY agents_restricted ON agents
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.tenant_id = agents.tenant_id AND d.workspace_id = agents.workspace_id AND d.agent_id = agents.agent_id))`,
  `ALTER POLICY decision_search_restricted ON decision_search
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.ledger_id = decision_search.ledger_id))`,
  `ALTER POLICY session_aliases_restricted ON session_aliases
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = session_aliases.merged_into))`,

  `CREATE TABLE ledger_chains (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    head_seq bigint NOT NULL DEFAULT 0,
    head_hash bytea,
    head_at timestamptz,
    pruned_seq bigint NOT NULL DEFAULT 0,
    pruned_hash bytea,
    pruned_at timestamptz,
    pruned_key smallint,
    pruned_mac bytea,
    content_policy text NOT NULL DEFAULT 'full' CHECK (content_policy IN ('full', 'redacted', 'metadata')),
    PRIMARY KEY (tenant_id, workspace_id)
  )`,
  ...isolate("ledger_chains"),
  `ALTER POLICY ledger_chains_tenant ON ledger_chains USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
  `GRANT SELECT ON ledger_chains TO ledger_reader`,
  `GRANT SELECT, INSERT, UPDATE ON ledger_chains TO ledger_builder`,

  `CREATE TABLE ledger_audit_events (
    event_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    kind text NOT NULL,
    at timestamptz NOT NULL,
    detail jsonb NOT NULL,
    chain_key smallint NOT NULL,
    mac bytea NOT NULL
  )`,
  `CREATE INDEX ledger_audit_events_recent ON ledger_audit_events (tenant_id, workspace_id, at DESC)`,
  ...isolate("ledger_audit_events"),
  `ALTER POLICY ledger_audit_events_tenant ON ledger_audit_events USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
  `GRANT SELECT ON ledger_audit_events TO ledger_reader`,
  `GRANT SELECT, INSERT ON ledger_audit_events TO ledger_builder`
])
