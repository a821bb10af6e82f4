import { indexableTenantScope, notRestricted, run } from "./sql.ts"

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

export const analytics = run([
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
