import { CONTROL_TABLES, createRole, isolate, LEDGER_TABLES, notRestricted, run, setting } from "./sql.ts"

/** The runtime roles, the control plane's identity tables and the ledger's agents → sessions → decisions. */
export const initial = run([
  createRole("ledger_reader"),
  createRole("ledger_builder"),
  createRole("ledger_control"),
  // the connecting (owning) user must be able to SET ROLE to them; harmless for a superuser
  `GRANT ledger_reader, ledger_builder, ledger_control TO CURRENT_USER`,

  // --- control plane: tenants, workspaces, users, memberships, credentials
  `CREATE TABLE tenants (
    tenant_id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE workspaces (
    workspace_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
  )`,
  `CREATE TABLE users (
    user_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    email text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, email)
  )`,
  `CREATE TABLE memberships (
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    role text NOT NULL CHECK (role IN ('member', 'restricted')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id)
  )`,
  `CREATE TABLE credentials (
    token_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    kind text NOT NULL CHECK (kind IN ('pat', 'gateway')),
    -- visible part of the token (e.g. ldg_pat_AbC1), to recognise it in listings
    display_prefix text NOT NULL,
    -- sha256 of the whole token; the plaintext is never stored
    token_hash bytea NOT NULL UNIQUE,
    name text,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
  )`,
  `CREATE INDEX credentials_user ON credentials (tenant_id, user_id)`,
  ...CONTROL_TABLES.flatMap((table) => [
    `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
    `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
    // authentication resolves a token before any tenant is known: only the control role reads these tables
    `CREATE POLICY ${table}_control ON ${table} TO ledger_control USING (true) WITH CHECK (true)`,
    `GRANT SELECT, INSERT, UPDATE ON ${table} TO ledger_control`
  ]),

  // --- ledger: agents → sessions → decisions
  `CREATE TABLE agents (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    agent_id text NOT NULL,
    agent_name text,
    decision_count bigint NOT NULL DEFAULT 0,
    session_count bigint NOT NULL DEFAULT 0,
    error_count bigint NOT NULL DEFAULT 0,
    total_cost_usd double precision NOT NULL DEFAULT 0,
    -- mean confidence = confidence_sum / decision_count
    confidence_sum double precision NOT NULL DEFAULT 0,
    first_seen_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, agent_id)
  )`,
  `CREATE INDEX agents_recent ON agents (tenant_id, workspace_id, last_seen_at DESC, agent_id)`,
  `CREATE TABLE sessions (
    session_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    agent_id text NOT NULL,
    execution_id text,
    started_at timestamptz NOT NULL,
    ended_at timestamptz NOT NULL,
    decision_count bigint NOT NULL DEFAULT 0,
    error_count bigint NOT NULL DEFAULT 0,
    total_cost_usd double precision NOT NULL DEFAULT 0,
    total_tokens bigint NOT NULL DEFAULT 0,
    summary text NOT NULL DEFAULT ''
  )`,
  `CREATE INDEX sessions_agent_recent ON sessions (tenant_id, workspace_id, agent_id, ended_at DESC, session_id)`,
  `CREATE INDEX sessions_agent_start ON sessions (tenant_id, workspace_id, agent_id, started_at)`,
  `CREATE UNIQUE INDEX sessions_execution ON sessions (tenant_id, workspace_id, agent_id, execution_id) WHERE execution_id IS NOT NULL`,
  `CREATE TABLE decisions (
    ledger_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    user_id uuid NOT NULL,
    key_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    execution_id text,
    created_at timestamptz NOT NULL,
    provider text NOT NULL,
    provider_type text NOT NULL,
    model text NOT NULL,
    stream boolean NOT NULL,
    status integer NOT NULL,
    title text NOT NULL,
    intent text NOT NULL,
    outcome text NOT NULL,
    cost_usd double precision,
    quality double precision NOT NULL,
    confidence double precision NOT NULL,
    latency_ms integer NOT NULL,
    first_token_ms integer,
    usage jsonb,
    -- the rest of the derivation (trace, evidence, findings, artifacts, score and cost details)
    derivation jsonb NOT NULL,
    -- the call as exchanged, credentials removed: what \`ledger rebuild\` re-derives from
    raw_request text NOT NULL,
    raw_response text,
    error jsonb,
    capture_version integer NOT NULL,
    captured_at timestamptz NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX decisions_session ON decisions (tenant_id, workspace_id, session_id, created_at, ledger_id)`,
  `CREATE INDEX decisions_agent_recent ON decisions (tenant_id, workspace_id, agent_id, created_at DESC, ledger_id)`,
  `CREATE INDEX decisions_recent ON decisions (tenant_id, workspace_id, created_at DESC, ledger_id)`,
  ...LEDGER_TABLES.flatMap((table) => [
    ...isolate(table),
    `GRANT SELECT ON ${table} TO ledger_reader`,
    `GRANT SELECT, INSERT, UPDATE ON ${table} TO ledger_builder`
  ]),
  // restricted members: only decisions made with their own keys, and the sessions/agents those belong to
  `CREATE POLICY decisions_restricted ON decisions AS RESTRICTIVE TO ledger_reader
    USING (${notRestricted} OR user_id = ${setting("user_id")}::uuid)`,
  `CREATE POLICY sessions_restricted ON sessions AS RESTRICTIVE TO ledger_reader
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = sessions.session_id))`,
  `CREATE POLICY agents_restricted ON agents AS RESTRICTIVE TO ledger_reader
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.tenant_id = agents.tenant_id AND d.workspace_id = agents.workspace_id AND d.agent_id = agents.agent_id))`
])
