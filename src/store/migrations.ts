/**
 * Database migrations, applied by `ledger migrate` and at `serve` start (Effect's SQL migrator, idempotent).
 *
 * Isolation model (DESIGN §4):
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

const setting = (name: string) => `(select nullif(current_setting('ledger.${name}', true), ''))`
const tenantScope = `tenant_id = ${setting("tenant_id")}::uuid AND workspace_id = ${setting("workspace_id")}::uuid`
/** restricted members see only what their own gateway keys produced */
const notRestricted = `${setting("member_role")} IS DISTINCT FROM 'restricted'`

const run = (statements: ReadonlyArray<string>) =>
  Effect.gen(function*() {
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
const isolate = (table: string) => [
  `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY ${table}_tenant ON ${table} TO ledger_reader, ledger_builder USING (${tenantScope}) WITH CHECK (${tenantScope})`
]

const LEDGER_TABLES = ["agents", "sessions", "decisions"] as const
const CONTROL_TABLES = ["tenants", "workspaces", "users", "memberships", "credentials"] as const

const initial = run([
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

/**
 * MCP OAuth 2.1 authorization server (src/mcp/oauth): registered clients, authorizations (sign-in ticket, then the
 * authorization code) and issued tokens. Control plane like `credentials`: only hashes of secrets are stored, and only
 * the control role reads them (tokens are resolved before any tenant is known).
 */
const OAUTH_TABLES = ["oauth_clients", "oauth_authorizations", "oauth_tokens"] as const

const oauth = run([
  `CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY,
    -- sha256 of the client secret; NULL for public clients (token_endpoint_auth_method 'none')
    client_secret_hash bytea,
    token_endpoint_auth_method text NOT NULL CHECK (token_endpoint_auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    redirect_uris text[] NOT NULL,
    -- the registered client metadata (RFC 7591), as answered to the client
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE oauth_authorizations (
    authorization_id uuid PRIMARY KEY,
    client_id text NOT NULL REFERENCES oauth_clients,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    -- the client's state, echoed on the redirect
    state text,
    scope text NOT NULL,
    resource text NOT NULL,
    tenant_id uuid NOT NULL REFERENCES tenants,
    user_id uuid NOT NULL REFERENCES users,
    -- chosen on the consent page among the user's memberships
    workspace_id uuid REFERENCES workspaces,
    -- sha256 of the sign-in ticket that carries the signed-in user to the consent step
    ticket_hash bytea NOT NULL UNIQUE,
    -- sha256 of the authorization code, once consent is given
    code_hash bytea UNIQUE,
    -- expiry of the ticket, then of the code
    expires_at timestamptz NOT NULL,
    consented_at timestamptz,
    code_used_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE oauth_tokens (
    token_id uuid PRIMARY KEY,
    token_hash bytea NOT NULL UNIQUE,
    kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
    -- the grant: every token descending from one consent (refresh rotation family)
    authorization_id uuid NOT NULL REFERENCES oauth_authorizations,
    client_id text NOT NULL REFERENCES oauth_clients,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    scope text NOT NULL,
    -- the resource (RFC 8707) the token is bound to: {public url}/mcp
    audience text NOT NULL,
    display_prefix text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    -- refresh tokens: when exchanged for a new pair; presenting it again revokes the whole grant
    rotated_at timestamptz,
    last_used_at timestamptz
  )`,
  `CREATE INDEX oauth_tokens_authorization ON oauth_tokens (authorization_id)`,
  ...OAUTH_TABLES.flatMap((table) => [
    `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
    `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
    `CREATE POLICY ${table}_control ON ${table} TO ledger_control USING (true) WITH CHECK (true)`,
    `GRANT SELECT, INSERT, UPDATE ON ${table} TO ledger_control`
  ])
])

/**
 * Query layer (src/query): the install's cursor-signing secret, tenant policies the planner can use as index
 * conditions, and the indexes behind the read model's keyset pages (each list orders by (sort key, id) in one
 * direction, so a row comparison bounds the index scan of every page).
 */
/** A uuid setting, cast inside the sub-select: the policy compares uuid = uuid, which is leakproof */
const settingUuid = (name: string) => `(select nullif(current_setting('ledger.${name}', true), '')::uuid)`
/**
 * The tenant/workspace condition for tables that also have a RESTRICTIVE policy. Postgres applies each policy kind
 * at its own security level, and a condition above the lowest level can become an index condition only when it is
 * leakproof — `tenant_id = (text)::uuid` is not (the text-to-uuid cast may fail), so `tenantScope` left the ledger
 * tables scanned in full. With the cast inside the sub-select the comparison is uuid = uuid.
 */
const indexableTenantScope = `tenant_id = ${settingUuid("tenant_id")} AND workspace_id = ${settingUuid("workspace_id")}`

const query = run([
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

/**
 * Decision builder (src/builder): what reconstruction adds to a decision (its subjects, and the capture fields
 * `ledger rebuild` needs to re-derive it), the agent token rollup, and the pipeline's throughput record.
 */
const builder = run([
  // subjects the decision is about (extractSubjects): the analytics graph and features are built on them
  `ALTER TABLE decisions ADD COLUMN subjects jsonb NOT NULL DEFAULT '[]'::jsonb`,
  // capture fields the derivation reads that no other column keeps
  `ALTER TABLE decisions ADD COLUMN aborted boolean NOT NULL DEFAULT false`,
  `ALTER TABLE decisions ADD COLUMN upstream_ms integer`,
  `ALTER TABLE agents ADD COLUMN total_tokens bigint NOT NULL DEFAULT 0`,
  // a late capture that falls between two sessions merges them: the builder folds one into the other
  `GRANT DELETE ON sessions TO ledger_builder`,
  // decisions built per second and builder (no tenant data: counts only), for `ledger status`; kept for an hour
  `CREATE TABLE pipeline_throughput (
    second timestamptz NOT NULL,
    consumer text NOT NULL,
    decisions integer NOT NULL,
    PRIMARY KEY (second, consumer)
  )`,
  `GRANT SELECT, INSERT, UPDATE, DELETE ON pipeline_throughput TO ledger_builder`,
  `GRANT SELECT ON pipeline_throughput TO ledger_control`,
  // lz4 compresses the large columns several times faster than the default pglz, a sizeable share of an insert's
  // cost; a server built without lz4 (PGlite) keeps pglz
  ...["raw_request", "raw_response", "derivation", "subjects"].map((column) =>
    `DO $$ BEGIN ALTER TABLE decisions ALTER COLUMN ${column} SET COMPRESSION lz4; EXCEPTION WHEN feature_not_supported THEN NULL; END $$`
  )
])

/**
 * Analytics (src/analytics): what the materialiser and the detectors derive from built decisions — search documents
 * and vectors, subjects and evidence sources, the graph's materialised edges, hourly rollups, features, insights —
 * and each workspace's progress and ROI settings. Tenant tables like the ledger's. They aggregate across users, so a
 * restricted member reads none of them, except the search rows of decisions it may see.
 */
const ANALYTICS_TABLES = [
  "analytics_progress",
  "analytics_settings",
  "analytics_sessions",
  "decision_search",
  "decision_prints",
  "search_postings",
  "search_terms",
  "subjects",
  "sources",
  "session_subjects",
  "agent_subjects",
  "graph_edges",
  "handoffs",
  "hourly_rollups",
  "features",
  "feature_sessions",
  "feature_merge_suggestions",
  "insights"
] as const

const analytics = run([
  `CREATE TABLE analytics_progress (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- keyset (built_at, ledger_id) of the last decision materialised; a sweep of the moments before it catches
    -- decisions whose transaction committed after later ones
    built_cursor timestamptz NOT NULL DEFAULT '-infinity',
    built_cursor_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    -- the detectors have looked at every decision_search row up to this seq
    detected_seq bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workspace_id)
  )`,
  `CREATE TABLE analytics_settings (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    hourly_rate_usd double precision,
    -- intent → minutes; intents not named keep the install default
    minutes_saved jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workspace_id)
  )`,
  `CREATE TABLE analytics_sessions (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    session_id uuid NOT NULL,
    agent_id text NOT NULL,
    execution_id text,
    -- how the session's summary was last written: deterministic or model
    summary_source text NOT NULL DEFAULT 'deterministic',
    summarized_decisions bigint NOT NULL DEFAULT 0,
    summarized_at timestamptz,
    -- new decisions since its features and summary were last recomputed (the session pass picks these up)
    dirty boolean NOT NULL DEFAULT true,
    PRIMARY KEY (tenant_id, workspace_id, session_id)
  )`,
  `CREATE INDEX analytics_sessions_execution ON analytics_sessions (tenant_id, workspace_id, execution_id) WHERE execution_id IS NOT NULL`,
  `CREATE INDEX analytics_sessions_dirty ON analytics_sessions (tenant_id, workspace_id, session_id) WHERE dirty`,
  `CREATE TABLE decision_search (
    ledger_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- materialisation order: the detectors' keyset
    seq bigint GENERATED ALWAYS AS IDENTITY,
    session_id uuid NOT NULL,
    agent_id text NOT NULL,
    created_at timestamptz NOT NULL,
    document tsvector NOT NULL,
    -- hashed word/trigram vector (src/analytics/text.ts), 256 dimensions, L2-normalised
    local_vector real[] NOT NULL,
    -- model embedding (256 dimensions requested) when an embeddings model is configured
    embedding real[],
    embedding_model text,
    -- normalised newest input + answer: repeats of one call share it (loops)
    call_signature text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE UNIQUE INDEX decision_search_seq ON decision_search (tenant_id, workspace_id, seq)`,
  `CREATE INDEX decision_search_recent ON decision_search (tenant_id, workspace_id, created_at DESC)`,
  `CREATE INDEX decision_search_session ON decision_search (session_id, created_at)`,
  // Lookups on these tables run under row-level security, where only leakproof conditions can use an index: `=` on
  // text is, `@@` and `&&` are not (a GIN index would be read after scanning the whole workspace). So full-text
  // candidates and hand-off prints are b-tree postings, found by equality.
  // the document's lexemes (to_tsvector 'english'), newest first per lexeme
  `CREATE TABLE search_postings (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    lexeme text NOT NULL,
    created_at timestamptz NOT NULL,
    ledger_id uuid NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, lexeme, created_at, ledger_id)
  )`,
  // hashes of the distinctive lines of a decision's newest input ('in') and of its output ('out'): one agent's
  // output reused as another's input is a hand-off
  `CREATE TABLE decision_prints (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    direction text NOT NULL CHECK (direction IN ('in', 'out')),
    print text NOT NULL,
    ledger_id uuid NOT NULL,
    agent_id text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, direction, print, ledger_id)
  )`,
  // document frequency of each lexeme per workspace: similarity search starts from a query's rarest terms
  `CREATE TABLE search_terms (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    lexeme text NOT NULL,
    doc_count bigint NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, lexeme)
  )`,
  `CREATE TABLE subjects (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- kind:key
    subject_id text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    label text NOT NULL,
    decision_count bigint NOT NULL DEFAULT 0,
    session_count bigint NOT NULL DEFAULT 0,
    first_seen_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, subject_id)
  )`,
  `CREATE TABLE sources (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- kind:identity (url:…, file:…, tool:…, document:<hash>, image:…)
    source_id text NOT NULL,
    kind text NOT NULL,
    label text NOT NULL,
    decision_count bigint NOT NULL DEFAULT 0,
    first_seen_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, source_id)
  )`,
  `CREATE TABLE session_subjects (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    subject_id text NOT NULL,
    session_id uuid NOT NULL,
    agent_id text NOT NULL,
    decision_count bigint NOT NULL,
    first_at timestamptz NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, subject_id, session_id)
  )`,
  `CREATE INDEX session_subjects_session ON session_subjects (tenant_id, workspace_id, session_id)`,
  `CREATE TABLE agent_subjects (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    subject_id text NOT NULL,
    agent_id text NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, subject_id, agent_id)
  )`,
  // about, cites, and agent↔agent handed_off_to, shares_subject, shares_execution; ran and contains are read from
  // sessions/decisions, session↔session shares_subject from session_subjects
  `CREATE TABLE graph_edges (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    src_type text NOT NULL,
    src_id text NOT NULL,
    edge_type text NOT NULL,
    dst_type text NOT NULL,
    dst_id text NOT NULL,
    weight double precision NOT NULL,
    first_at timestamptz NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id)
  )`,
  `CREATE INDEX graph_edges_dst ON graph_edges (tenant_id, workspace_id, dst_type, dst_id, edge_type)`,
  `CREATE TABLE handoffs (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    producer_ledger_id uuid NOT NULL,
    consumer_ledger_id uuid NOT NULL,
    producer_agent text NOT NULL,
    consumer_agent text NOT NULL,
    shared_lines integer NOT NULL,
    at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, producer_ledger_id, consumer_ledger_id)
  )`,
  `CREATE TABLE hourly_rollups (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    hour timestamptz NOT NULL,
    agent_id text NOT NULL,
    -- provider/model
    model text NOT NULL,
    intent text NOT NULL,
    outcome text NOT NULL,
    decisions bigint NOT NULL,
    cost_usd double precision NOT NULL,
    tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    latency_ms_sum double precision NOT NULL,
    quality_sum double precision NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, hour, agent_id, model, intent, outcome)
  )`,
  `CREATE INDEX hourly_rollups_agent ON hourly_rollups (tenant_id, workspace_id, agent_id, hour)`,
  `CREATE TABLE features (
    feature_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- the earliest session of the work; the id is derived from it, so it survives recomputation
    anchor_session_id uuid NOT NULL,
    title text NOT NULL,
    -- the subjects that link its sessions: [{subject_id, kind, label, sessions}]
    subjects jsonb NOT NULL,
    agents text[] NOT NULL,
    session_count bigint NOT NULL,
    decision_count bigint NOT NULL,
    success_count bigint NOT NULL,
    error_count bigint NOT NULL,
    cost_usd double precision NOT NULL,
    first_at timestamptz NOT NULL,
    last_at timestamptz NOT NULL,
    -- outcome of the newest decision
    last_outcome text NOT NULL,
    -- successful decisions by intent (ROI input)
    successes_by_intent jsonb NOT NULL,
    centroid real[] NOT NULL,
    subject_tokens text[] NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX features_recent ON features (tenant_id, workspace_id, last_at DESC, feature_id)`,
  `CREATE INDEX features_tokens ON features USING gin (subject_tokens) WITH (fastupdate = off)`,
  `CREATE TABLE feature_sessions (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    session_id uuid NOT NULL,
    feature_id uuid NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, session_id)
  )`,
  `CREATE INDEX feature_sessions_feature ON feature_sessions (feature_id)`,
  `CREATE TABLE feature_merge_suggestions (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- feature_a < feature_b
    feature_a uuid NOT NULL,
    feature_b uuid NOT NULL,
    score double precision NOT NULL,
    reasons jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workspace_id, feature_a, feature_b)
  )`,
  `CREATE INDEX feature_merge_suggestions_b ON feature_merge_suggestions (tenant_id, workspace_id, feature_b)`,
  `CREATE TABLE insights (
    insight_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    -- the same finding detected again updates its insight instead of adding one
    dedup_key text NOT NULL,
    type text NOT NULL,
    severity text NOT NULL,
    title text NOT NULL,
    evidence jsonb NOT NULL,
    window_start timestamptz NOT NULL,
    window_end timestamptz NOT NULL,
    agent_ids text[] NOT NULL,
    session_ids text[] NOT NULL,
    ledger_ids text[] NOT NULL,
    detected_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, workspace_id, dedup_key)
  )`,
  `CREATE INDEX insights_recent ON insights (tenant_id, workspace_id, window_end DESC, insight_id)`,
  // the materialiser's keyset over what the builder committed, and the lookups the graph needs on ledger tables
  `CREATE INDEX decisions_built ON decisions (tenant_id, workspace_id, built_at, ledger_id)`,
  `CREATE INDEX sessions_ended ON sessions (tenant_id, workspace_id, ended_at)`,
  ...ANALYTICS_TABLES.flatMap((table) => [
    `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
    `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
    // the indexable form (see the query layer's migration): these tables carry a RESTRICTIVE policy too
    `CREATE POLICY ${table}_tenant ON ${table} TO ledger_reader, ledger_builder
      USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
    `GRANT SELECT ON ${table} TO ledger_reader`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${table} TO ledger_builder`,
    table === "decision_search"
      ? `CREATE POLICY decision_search_restricted ON decision_search AS RESTRICTIVE TO ledger_reader
          USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.ledger_id = decision_search.ledger_id))`
      : `CREATE POLICY ${table}_restricted ON ${table} AS RESTRICTIVE TO ledger_reader USING (${notRestricted})`
  ]),
  // pgvector, when the server has it: approximate nearest neighbours over the same 256-dimension vectors
  `DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
      CREATE EXTENSION IF NOT EXISTS vector;
      CREATE INDEX decision_search_local_hnsw ON decision_search USING hnsw ((local_vector::vector(256)) vector_cosine_ops);
      CREATE INDEX decision_search_embedding_hnsw ON decision_search USING hnsw ((embedding::vector(256)) vector_cosine_ops);
    END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgvector is available but this role cannot create it: similarity search uses full-text candidates';
  END $$`
])

/**
 * Analytics leases: each workspace's analytics (materialiser and detectors) runs in one builder process at a time.
 * Without one, every builder process read and analysed the same batches and all but one found them done.
 */
const analyticsLeases = run([
  `ALTER TABLE analytics_progress ADD COLUMN lease_owner uuid`,
  `ALTER TABLE analytics_progress ADD COLUMN lease_until timestamptz`
])

/** The OAuth sweeper deletes tokens and authorizations a day after they expired (OAuthStore.sweep); the control policy of 0004 covers DELETE. */
const oauthSweep = run([`GRANT DELETE ON oauth_tokens, oauth_authorizations TO ledger_control`])

/** The loop detector reads a session's repeats of one call signature (Detectors.sessionRules), not the whole session. */
const loopIndex = run([`CREATE INDEX decision_search_session_signature ON decision_search (session_id, call_signature, created_at)`])

/**
 * Registration is open (RFC 7591), so clients would pile up: the sweeper forgets a client never used a day after it
 * registered, and one idle for OAUTH_CLIENT_IDLE_DAYS once no grant of it is left (OAuthStore.sweep). Clients that
 * exist at this migration count as used now.
 */
const oauthClientUse = run([
  `ALTER TABLE oauth_clients ADD COLUMN last_used_at timestamptz`,
  `UPDATE oauth_clients SET last_used_at = now()`,
  `GRANT DELETE ON oauth_clients TO ledger_control`,
  // the sweep's checks, and the foreign keys a client's deletion checks, look clients up in both
  `CREATE INDEX oauth_authorizations_client ON oauth_authorizations (client_id)`,
  `CREATE INDEX oauth_tokens_client ON oauth_tokens (client_id)`
])

/**
 * A late call that bridges two stored sessions makes the builder fold one into the other. The folded session's id
 * stays an alias of the surviving one, so ids clients have seen (links, saved queries, agents' notes) keep working.
 * Aliases pointing at a session that is folded later are moved to its survivor: one lookup always resolves.
 */
const sessionAliases = run([
  // keyed under the tenant columns, and the merged_into index (for moving aliases on a later merge) without them:
  // a lookup by id then has one index to choose whatever the statistics say (with the tenant columns in both, stale
  // statistics made Postgres scan a workspace's aliases through the other: 100 ms at 100k aliases against 0.06 ms)
  `CREATE TABLE session_aliases (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    session_id uuid NOT NULL,
    merged_into uuid NOT NULL,
    merged_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workspace_id, session_id)
  )`,
  `CREATE INDEX session_aliases_target ON session_aliases (merged_into)`,
  `ALTER TABLE session_aliases ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE session_aliases FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY session_aliases_tenant ON session_aliases TO ledger_reader, ledger_builder
    USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
  // a restricted member resolves only ids of sessions it can see (as for the sessions themselves)
  `CREATE POLICY session_aliases_restricted ON session_aliases AS RESTRICTIVE TO ledger_reader
    USING (${notRestricted} OR EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = session_aliases.merged_into))`,
  `GRANT SELECT ON session_aliases TO ledger_reader`,
  `GRANT SELECT, INSERT, UPDATE ON session_aliases TO ledger_builder`
])

/**
 * `sessions.summary` has two writers. The builder writes a short summary as it builds; analytics, where it runs,
 * writes its own (from the summary model when one is configured) in its session passes. Once analytics has written a
 * session's summary it owns it: the builder keeps updating the rollup and leaves the summary alone, so a model
 * summary is not replaced by the builder's at the session's next decision (it was, until the session had grown by
 * ten more and the model rewrote it). Analytics rewrites its summary after every pass that finds the session
 * changed.
 */
const sessionSummaryOwner = run([`ALTER TABLE sessions ADD COLUMN summary_by_analytics boolean NOT NULL DEFAULT false`])

/**
 * Sign-in through an external OpenID Connect provider (LEDGER_OIDC_*). Between sending the user to the provider and
 * its callback, a login holds what finishing it needs: the PKCE verifier and nonce for the provider, and the MCP
 * client's authorization request, already checked. It is found by the hash of the state, used once, within ten
 * minutes, and only from the browser that started it (the hash of a cookie set then).
 *
 * An account at the provider (issuer, subject) is linked to the ledger user its verified email named at its first
 * sign-in; later sign-ins follow the link, and a user linked to one account of a provider cannot be taken over by
 * another account that comes to carry the same email.
 */
const oidcLogins = run([
  `CREATE TABLE oauth_oidc_logins (
    state_hash bytea PRIMARY KEY,
    browser_hash bytea NOT NULL,
    nonce text NOT NULL,
    code_verifier text NOT NULL,
    request jsonb NOT NULL,
    expires_at timestamptz NOT NULL
  )`,
  `ALTER TABLE oauth_oidc_logins ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE oauth_oidc_logins FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY oauth_oidc_logins_control ON oauth_oidc_logins TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT SELECT, INSERT, DELETE ON oauth_oidc_logins TO ledger_control`,
  `CREATE TABLE oidc_identities (
    issuer text NOT NULL,
    subject text NOT NULL,
    tenant_id uuid NOT NULL REFERENCES tenants,
    user_id uuid NOT NULL REFERENCES users,
    linked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject),
    UNIQUE (user_id, issuer)
  )`,
  `ALTER TABLE oidc_identities ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE oidc_identities FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY oidc_identities_control ON oidc_identities TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT SELECT, INSERT ON oidc_identities TO ledger_control`,
  // the provider's verified email names the user, in whichever tenant it is (OAuthStore.usersByEmail)
  `CREATE INDEX users_email ON users (lower(email))`
])

/**
 * The agents' own APIs (Responses, Messages, embeddings). A decision names the API it was made on (its raw request
 * and response are in that format), the provider's id of its answer (`resp_…`, `msg_…`, `chatcmpl-…`), the
 * `previous_response_id` it continues and the decision that is (found by that id when both are built, whichever
 * first). Existing decisions are chat completions. The indexes are built as the migration runs, holding writes to
 * `decisions` meanwhile (see README, Upgrading).
 */
const agentApis = run([
  `ALTER TABLE decisions ADD COLUMN api text NOT NULL DEFAULT 'chat'`,
  `ALTER TABLE decisions ADD COLUMN response_id text`,
  `ALTER TABLE decisions ADD COLUMN previous_response_id text`,
  `ALTER TABLE decisions ADD COLUMN previous_ledger_id uuid`,
  // the earlier turns of a chain the gateway kept itself, as it joined them to the call (Capture.context)
  `ALTER TABLE decisions ADD COLUMN raw_context text`,
  `CREATE INDEX decisions_response ON decisions (tenant_id, workspace_id, response_id) WHERE response_id IS NOT NULL`,
  // calls built before the call they continue, waiting to be linked to it
  `CREATE INDEX decisions_unlinked ON decisions (tenant_id, workspace_id, previous_response_id)
    WHERE previous_response_id IS NOT NULL AND previous_ledger_id IS NULL`
])

/**
 * Transcript turns (`ledger watch`): a decision made from a coding assistant's transcript names where it came from
 * (`{kind, client, client_version, cwd, git_branch}`; NULL for a call through the gateway), so `ledger rebuild` keeps it.
 */
const transcriptSource = run([`ALTER TABLE decisions ADD COLUMN source jsonb`])

/** Ordered migrations; ids never change once released. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_initial": initial,
  "0002_builder": builder,
  "0003_query": query,
  "0004_oauth": oauth,
  "0005_analytics": analytics,
  "0006_analytics_leases": analyticsLeases,
  "0007_oauth_sweep": oauthSweep,
  "0008_loop_index": loopIndex,
  "0009_oauth_client_use": oauthClientUse,
  "0010_session_aliases": sessionAliases,
  "0011_session_summary_owner": sessionSummaryOwner,
  "0012_oidc_logins": oidcLogins,
  "0013_agent_apis": agentApis,
  "0014_transcript_source": transcriptSource
}
