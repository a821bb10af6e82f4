/**
 * The materialiser: a supervised fiber that turns decisions the builder committed into analytics — search documents
 * and vectors, subjects and evidence sources, graph edges, hourly rollups, features, session summaries — so the
 * builder never needs to know about analytics.
 *
 * Per workspace it reads the decisions after its keyset cursor (`built_at`, `ledger_id`) — and, every few rounds, the
 * moments just before it, for builder transactions that committed late — and writes everything for a batch in one
 * transaction as the builder role (RLS-bound) under a per-workspace advisory lock. Idempotent by construction: a decision counts once —
 * the `decision_search` row it inserts (`ON CONFLICT DO NOTHING RETURNING`) gates every increment — and per-session
 * data (features, summaries) is recomputed from decision-level rows by a deferred session pass, which also absorbs
 * the builder merging two sessions into one.
 */
import { Context, Effect, Layer, Metric, Option } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { asUnavailable } from "./errors.ts"
import { analyseDecision, type BuiltDecision, type DecisionAnalysis } from "./analyse.ts"
import { recomputeFeatures, refreshMergeSuggestions, type WorkspaceScope } from "./Features.ts"
import { claimWorkspace } from "./lease.ts"
import { ModelCalls } from "./ModelCalls.ts"
import { MAX_SUBJECT_SESSIONS, WORK_SUBJECT_KINDS } from "./rules.ts"
import { modelSummaries, writeDeterministicSummaries, writeModelSummaries } from "./Summaries.ts"
import { superviseLoop, yieldingToIngest } from "./supervise.ts"

/** Decisions read and written per transaction. */
const BATCH_SIZE = 200
/** Batches per workspace per round, so one busy workspace does not starve the others. */
const BATCHES_PER_ROUND = 25
/** How far before the cursor the late-commit sweep looks: longer than any builder transaction lasts. */
const COMMIT_OVERLAP = "30 seconds"
/** How often sessions the builder merged away are looked for. */
const REPAIR_EVERY_ROUNDS = 15
/** While a backlog drains, features and summaries are recomputed at most this often per workspace. */
const SESSION_PASS_EVERY_MS = 10_000

const WORK_KINDS: Array<string> = [...WORK_SUBJECT_KINDS]

const decisionsMaterialized = Metric.counter("ledger_analytics_decisions_materialized_total", {
  description: "Decisions the analytics materialiser has processed",
  incremental: true
})

const hourOf = (date: Date) => new Date(Math.floor(date.getTime() / 3_600_000) * 3_600_000).toISOString()

/** Sums numeric fields per key (one row per key for `INSERT … ON CONFLICT DO UPDATE`). */
const groupBy = <A, K>(items: ReadonlyArray<A>, key: (item: A) => string, init: (item: A) => K, add: (acc: K, item: A) => void) => {
  const groups = new Map<string, K>()
  for (const item of items) {
    const k = key(item)
    const existing = groups.get(k)
    if (existing === undefined) groups.set(k, init(item))
    else add(existing, item)
  }
  return groups
}

// ---------------------------------------------------------------------------------------------------------
// Reading

const BUILT_COLUMNS = `d.ledger_id::text AS ledger_id, d.session_id::text AS session_id, d.agent_id, d.execution_id,
  d.created_at, d.built_at, d.provider, d.model, d.title, d.intent, d.outcome, d.cost_usd, d.quality, d.latency_ms, d.status,
  coalesce((d.usage->>'total_tokens')::int, 0) AS total_tokens,
  coalesce((d.usage->>'completion_tokens')::int, 0) AS completion_tokens,
  jsonb_build_object('evidence', d.derivation->'evidence', 'findings', d.derivation->'findings',
    'artifacts', d.derivation->'artifacts') AS derivation,
  d.api, d.raw_request, d.raw_response, d.subjects`

const progressOf = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const [progress] = yield* sql<{ at: string; id: string }>`
    SELECT built_cursor::text AS at, built_cursor_id::text AS id FROM analytics_progress`
  return progress ?? { at: "-infinity", id: "00000000-0000-0000-0000-000000000000" }
})

/** The next decisions after the cursor, in build order. */
const readBatch = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const cursor = yield* progressOf
  return yield* sql<BuiltDecision>`
    SELECT ${sql.literal(BUILT_COLUMNS)} FROM decisions d
    WHERE (d.built_at, d.ledger_id) > (${cursor.at}::timestamptz, ${cursor.id}::uuid)
    ORDER BY d.built_at, d.ledger_id
    LIMIT ${BATCH_SIZE}`
})

/**
 * Decisions stamped shortly before the cursor that committed after it passed (concurrent builders), not yet
 * materialised. One key probe of the search rows per decision (LATERAL … LIMIT 1): as `NOT EXISTS`, a planner
 * without statistics on young tables took the window for a row or two and scanned every search row for each of
 * its decisions — 14.8 s of a core at 500 decisions/s (bench/RESULTS.md, "Serve").
 */
const readLateBatch = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const cursor = yield* progressOf
  return yield* sql<BuiltDecision>`
    SELECT ${sql.literal(BUILT_COLUMNS)} FROM decisions d
    LEFT JOIN LATERAL (SELECT true AS done FROM decision_search s WHERE s.ledger_id = d.ledger_id LIMIT 1) s ON true
    WHERE d.built_at >= ${cursor.at}::timestamptz - ${COMMIT_OVERLAP}::interval AND d.built_at <= ${cursor.at}::timestamptz
      AND s.done IS NULL
    ORDER BY d.built_at, d.ledger_id
    LIMIT ${BATCH_SIZE}`
})

// ---------------------------------------------------------------------------------------------------------
// Writing one batch

/** Inserts the search rows; yields the decisions that were not materialised before (the batch's real work). */
const insertSearchRows = (
  scope: WorkspaceScope,
  analyses: ReadonlyArray<DecisionAnalysis>,
  embeddings: Option.Option<{ readonly model: string; readonly vectors: ReadonlyArray<ReadonlyArray<number>> }>
) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const records = analyses.map((a, i) => ({
      ledger_id: a.decision.ledger_id,
      session_id: a.decision.session_id,
      agent_id: a.decision.agent_id,
      created_at: a.decision.created_at.toISOString(),
      search_text: a.searchText,
      local_vector: a.vector,
      embedding: Option.match(embeddings, { onNone: () => null, onSome: (e) => e.vectors[i] }),
      embedding_model: Option.match(embeddings, { onNone: () => null, onSome: (e) => e.model }),
      call_signature: a.signature
    }))
    // one JSON parameter: no parameter limit, and nullable columns need no array type inference. The postings and
    // term counts are written from what the insert returns: reading the new rows back by id let a planner without
    // statistics on a young table scan (and unnest) every document of the workspace, 1.3 s a batch.
    const { tenant_id, workspace_id } = scope
    const rows = yield* sql<{ ledger_id: string }>`
      WITH fresh AS (
        INSERT INTO decision_search (ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, document,
          local_vector, embedding, embedding_model, call_signature)
        SELECT t.ledger_id, ${tenant_id}::uuid, ${workspace_id}::uuid, t.session_id, t.agent_id, t.created_at,
          to_tsvector('english', t.search_text), t.local_vector, t.embedding, t.embedding_model, t.call_signature
        FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS t(ledger_id uuid, session_id uuid, agent_id text,
          created_at timestamptz, search_text text, local_vector real[], embedding real[], embedding_model text,
          call_signature text)
        ON CONFLICT (ledger_id) DO NOTHING
        RETURNING ledger_id, created_at, document
      ), postings AS (
        INSERT INTO search_postings (tenant_id, workspace_id, lexeme, created_at, ledger_id)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, u.lexeme, f.created_at, f.ledger_id FROM fresh f, unnest(f.document) u
        ON CONFLICT DO NOTHING
      ), terms AS (
        INSERT INTO search_terms (tenant_id, workspace_id, lexeme, doc_count)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, u.lexeme, count(*) FROM fresh f, unnest(f.document) u GROUP BY u.lexeme
        ON CONFLICT (tenant_id, workspace_id, lexeme) DO UPDATE SET doc_count = search_terms.doc_count + EXCLUDED.doc_count
      )
      SELECT ledger_id::text AS ledger_id FROM fresh`
    const inserted = new Set(rows.map((row) => row.ledger_id))
    return analyses.filter((a) => inserted.has(a.decision.ledger_id))
  })

/** Decision-level facts: each written once, when its decision is first materialised. */
const writeDecisionFacts = (scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const { tenant_id, workspace_id } = scope

    const rollups = [...groupBy(
      fresh.map((a) => a.decision),
      (d) => JSON.stringify([hourOf(d.created_at), d.agent_id, `${d.provider}/${d.model}`, d.intent, d.outcome]),
      (d) => ({
        hour: hourOf(d.created_at),
        agent: d.agent_id,
        model: `${d.provider}/${d.model}`,
        intent: d.intent as string,
        outcome: d.outcome as string,
        decisions: 1,
        cost: d.cost_usd ?? 0,
        tokens: d.total_tokens,
        completion: d.completion_tokens,
        latency: d.latency_ms,
        quality: d.quality
      }),
      (acc, d) => {
        acc.decisions += 1
        acc.cost += d.cost_usd ?? 0
        acc.tokens += d.total_tokens
        acc.completion += d.completion_tokens
        acc.latency += d.latency_ms
        acc.quality += d.quality
      }
    ).values()]
    // JSON parameter: the figures mix integers and fractions, which array parameters cannot
    yield* sql`INSERT INTO hourly_rollups (tenant_id, workspace_id, hour, agent_id, model, intent, outcome, decisions,
        cost_usd, tokens, completion_tokens, latency_ms_sum, quality_sum)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM jsonb_to_recordset(${JSON.stringify(rollups)}::jsonb)
        AS t(hour timestamptz, agent text, model text, intent text, outcome text, decisions int8, cost float8, tokens int8,
             completion int8, latency float8, quality float8)
      ON CONFLICT (tenant_id, workspace_id, hour, agent_id, model, intent, outcome) DO UPDATE SET
        decisions = hourly_rollups.decisions + EXCLUDED.decisions, cost_usd = hourly_rollups.cost_usd + EXCLUDED.cost_usd,
        tokens = hourly_rollups.tokens + EXCLUDED.tokens,
        completion_tokens = hourly_rollups.completion_tokens + EXCLUDED.completion_tokens,
        latency_ms_sum = hourly_rollups.latency_ms_sum + EXCLUDED.latency_ms_sum,
        quality_sum = hourly_rollups.quality_sum + EXCLUDED.quality_sum`

    const mentions = fresh.flatMap((a) => a.subjects.map((subject) => ({ decision: a.decision, subject, id: `${subject.kind}:${subject.key}` })))
    if (mentions.length > 0) {
      const subjects = [...groupBy(
        mentions,
        (m) => m.id,
        (m) => ({ id: m.id, kind: m.subject.kind as string, key: m.subject.key, label: m.subject.label, n: 1, first: m.decision.created_at, last: m.decision.created_at }),
        (acc, m) => {
          acc.n += 1
          if (m.decision.created_at < acc.first) acc.first = m.decision.created_at
          if (m.decision.created_at > acc.last) acc.last = m.decision.created_at
        }
      ).values()]
      yield* sql`INSERT INTO subjects (tenant_id, workspace_id, subject_id, kind, key, label, decision_count, first_seen_at, last_seen_at)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM UNNEST(${subjects.map((s) => s.id)}::text[],
          ${subjects.map((s) => s.kind)}::text[], ${subjects.map((s) => s.key)}::text[], ${subjects.map((s) => s.label)}::text[],
          ${subjects.map((s) => s.n)}::int8[], ${subjects.map((s) => s.first.toISOString())}::timestamptz[],
          ${subjects.map((s) => s.last.toISOString())}::timestamptz[]) AS t
        ON CONFLICT (tenant_id, workspace_id, subject_id) DO UPDATE SET decision_count = subjects.decision_count + EXCLUDED.decision_count,
          first_seen_at = least(subjects.first_seen_at, EXCLUDED.first_seen_at),
          last_seen_at = greatest(subjects.last_seen_at, EXCLUDED.last_seen_at)`
      yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, 'decision', t.ledger_id, 'about', 'subject', t.subject_id, 1, t.at, t.at
        FROM UNNEST(${mentions.map((m) => m.decision.ledger_id)}::text[], ${mentions.map((m) => m.id)}::text[],
          ${mentions.map((m) => m.decision.created_at.toISOString())}::timestamptz[]) AS t(ledger_id, subject_id, at)
        ON CONFLICT DO NOTHING`
    }

    const citations = fresh.flatMap((a) => a.sources.map((source) => ({ decision: a.decision, source })))
    if (citations.length > 0) {
      const sources = [...groupBy(
        citations,
        (c) => c.source.source_id,
        (c) => ({ ...c.source, n: 1, first: c.decision.created_at, last: c.decision.created_at }),
        (acc, c) => {
          acc.n += 1
          if (c.decision.created_at < acc.first) acc.first = c.decision.created_at
          if (c.decision.created_at > acc.last) acc.last = c.decision.created_at
        }
      ).values()]
      yield* sql`INSERT INTO sources (tenant_id, workspace_id, source_id, kind, label, decision_count, first_seen_at, last_seen_at)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM UNNEST(${sources.map((s) => s.source_id)}::text[],
          ${sources.map((s) => s.kind)}::text[], ${sources.map((s) => s.label)}::text[], ${sources.map((s) => s.n)}::int8[],
          ${sources.map((s) => s.first.toISOString())}::timestamptz[], ${sources.map((s) => s.last.toISOString())}::timestamptz[]) AS t
        ON CONFLICT (tenant_id, workspace_id, source_id) DO UPDATE SET decision_count = sources.decision_count + EXCLUDED.decision_count,
          first_seen_at = least(sources.first_seen_at, EXCLUDED.first_seen_at),
          last_seen_at = greatest(sources.last_seen_at, EXCLUDED.last_seen_at)`
      yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, 'decision', t.ledger_id, 'cites', 'source', t.source_id, 1, t.at, t.at
        FROM UNNEST(${citations.map((c) => c.decision.ledger_id)}::text[], ${citations.map((c) => c.source.source_id)}::text[],
          ${citations.map((c) => c.decision.created_at.toISOString())}::timestamptz[]) AS t(ledger_id, source_id, at)
        ON CONFLICT DO NOTHING`
    }
  })

/** Adds `weight` to agent↔agent edges (both directions for symmetric types), summed per pair first. */
const addAgentEdges = (
  scope: WorkspaceScope,
  edgeType: "handed_off_to" | "shares_subject" | "shares_execution",
  increments: ReadonlyArray<{ readonly from: string; readonly to: string; readonly at: Date }>
) =>
  Effect.gen(function*() {
    const directed = edgeType === "handed_off_to" ? increments : increments.flatMap((i) => [i, { from: i.to, to: i.from, at: i.at }])
    if (directed.length === 0) return
    const sql = yield* ScopedSql
    const pairs = [...groupBy(
      directed,
      (i) => `${i.from}\u0000${i.to}`,
      (i) => ({ from: i.from, to: i.to, n: 1, first: i.at, last: i.at }),
      (acc, i) => {
        acc.n += 1
        if (i.at < acc.first) acc.first = i.at
        if (i.at > acc.last) acc.last = i.at
      }
    ).values()]
    yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
      SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, 'agent', t.src, ${edgeType}, 'agent', t.dst, t.n, t.first_at, t.last_at
      FROM UNNEST(${pairs.map((p) => p.from)}::text[], ${pairs.map((p) => p.to)}::text[], ${pairs.map((p) => p.n)}::float8[],
        ${pairs.map((p) => p.first.toISOString())}::timestamptz[], ${pairs.map((p) => p.last.toISOString())}::timestamptz[])
        AS t(src, dst, n, first_at, last_at)
      ON CONFLICT (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id) DO UPDATE SET
        weight = graph_edges.weight + EXCLUDED.weight, first_at = least(graph_edges.first_at, EXCLUDED.first_at),
        last_at = greatest(graph_edges.last_at, EXCLUDED.last_at)`
  })

/**
 * Matching rows per hand-off lookup. A hand-off shows as a line few decisions share; a line thousands share is
 * boilerplate, and this bound keeps such lines from making every batch slow.
 */
const HANDOFF_CANDIDATES = 2_000

/**
 * Hand-offs: a fresh decision whose newest input repeats distinctive lines of another agent's earlier output (or
 * whose output another agent's later input repeats). Each producer/consumer pair counts once, with the number of
 * lines they share.
 */
const writeHandoffs = (scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const prints = fresh.flatMap((a) => [
      ...a.inputPrints.map((print) => ({ direction: "in", print, decision: a.decision })),
      ...a.outputPrints.map((print) => ({ direction: "out", print, decision: a.decision }))
    ])
    if (prints.length === 0) return
    yield* sql`INSERT INTO decision_prints (tenant_id, workspace_id, direction, print, ledger_id, agent_id, created_at)
      SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM jsonb_to_recordset(${
      JSON.stringify(prints.map((p) => ({
        direction: p.direction,
        print: p.print,
        ledger_id: p.decision.ledger_id,
        agent_id: p.decision.agent_id,
        created_at: p.decision.created_at.toISOString()
      })))
    }::jsonb) AS t(direction text, print text, ledger_id uuid, agent_id text, created_at timestamptz)
      ON CONFLICT DO NOTHING`
    // the other side of each print: outputs matching fresh inputs, inputs matching fresh outputs
    const matches = yield* sql<{ direction: "in" | "out"; print: string; ledger_id: string; agent_id: string; created_at: Date }>`
      (SELECT direction, print, ledger_id::text AS ledger_id, agent_id, created_at FROM decision_prints
        WHERE direction = 'out' AND print = ANY(${[...new Set(fresh.flatMap((a) => a.inputPrints))]}::text[]) LIMIT ${HANDOFF_CANDIDATES})
      UNION ALL
      (SELECT direction, print, ledger_id::text AS ledger_id, agent_id, created_at FROM decision_prints
        WHERE direction = 'in' AND print = ANY(${[...new Set(fresh.flatMap((a) => a.outputPrints))]}::text[]) LIMIT ${HANDOFF_CANDIDATES})`
    const pairs = new Map<string, { producer: Side; consumer: Side; shared: number }>()
    interface Side {
      readonly ledger_id: string
      readonly agent_id: string
      readonly created_at: Date
    }
    const count = (producer: Side, consumer: Side) => {
      if (producer.agent_id === consumer.agent_id || producer.created_at > consumer.created_at) return
      const key = `${producer.ledger_id}|${consumer.ledger_id}`
      const pair = pairs.get(key)
      if (pair === undefined) pairs.set(key, { producer, consumer, shared: 1 })
      else pair.shared += 1
    }
    for (const p of prints) {
      for (const match of matches) {
        if (match.print !== p.print || match.direction === p.direction) continue
        if (p.direction === "in") count(match, p.decision)
        // a pair of two fresh decisions is met from both sides: count it from its consumer's side only
        else if (!fresh.some((a) => a.decision.ledger_id === match.ledger_id)) count(p.decision, match)
      }
    }
    if (pairs.size === 0) return
    const found = yield* sql<{ producer_agent: string; consumer_agent: string; at: Date }>`
      INSERT INTO handoffs (tenant_id, workspace_id, producer_ledger_id, consumer_ledger_id, producer_agent, consumer_agent, shared_lines, at)
      SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM jsonb_to_recordset(${
      JSON.stringify([...pairs.values()].map(({ consumer, producer, shared }) => ({
        producer: producer.ledger_id,
        consumer: consumer.ledger_id,
        producer_agent: producer.agent_id,
        consumer_agent: consumer.agent_id,
        shared,
        at: consumer.created_at.toISOString()
      })))
    }::jsonb) AS t(producer uuid, consumer uuid, producer_agent text, consumer_agent text, shared int, at timestamptz)
      ON CONFLICT DO NOTHING
      RETURNING producer_agent, consumer_agent, at`
    yield* addAgentEdges(scope, "handed_off_to", found.map((h) => ({ from: h.producer_agent, to: h.consumer_agent, at: h.at })))
  })

/** Agents working under one execution_id: counted once per agent pair and execution, when the later session appears. */
const writeSharedExecutions = (scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const sessions = [...new Map(fresh.map((a) => [a.decision.session_id, a.decision])).values()]
    const created = yield* sql<{ agent_id: string; execution_id: string | null; first_at: Date }>`
      INSERT INTO analytics_sessions (tenant_id, workspace_id, session_id, agent_id, execution_id)
      SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM jsonb_to_recordset(${
      JSON.stringify(sessions.map((d) => ({ session_id: d.session_id, agent_id: d.agent_id, execution_id: d.execution_id })))
    }::jsonb) AS t(session_id uuid, agent_id text, execution_id text)
      ON CONFLICT DO NOTHING
      RETURNING agent_id, execution_id, now() AS first_at`
    const withExecution = created.filter((s) => s.execution_id !== null)
    if (withExecution.length === 0) return
    const peers = yield* sql<{ agent_id: string; execution_id: string }>`
      SELECT DISTINCT agent_id, execution_id FROM analytics_sessions
      WHERE execution_id = ANY(${withExecution.map((s) => s.execution_id!)}::text[])`
    const at = new Map(fresh.map((a) => [`${a.decision.agent_id}\u0000${a.decision.execution_id}`, a.decision.created_at]))
    const pairs = new Map<string, { from: string; to: string; at: Date }>()
    for (const session of withExecution) {
      for (const peer of peers) {
        if (peer.execution_id !== session.execution_id || peer.agent_id === session.agent_id) continue
        const [from, to] = [session.agent_id, peer.agent_id].sort() as [string, string]
        pairs.set(`${from}\u0000${to}\u0000${session.execution_id}`, {
          from,
          to,
          at: at.get(`${session.agent_id}\u0000${session.execution_id}`) ?? session.first_at
        })
      }
    }
    yield* addAgentEdges(scope, "shares_execution", [...pairs.values()])
  })

/**
 * Which subjects each session mentions, from the batch's fresh decisions (added to the counts, so each decision
 * counts once) — or, for `recount` sessions (the builder merged sessions into them), recomputed from all their
 * decisions. A new (session, subject) pair updates the subject's session count and marks the session for the session
 * pass (its links changed; session↔session links are read from these rows, not stored); a new (agent, subject)
 * pair links the agent to the other agents that have the subject.
 */
const addSessionSubjects = (scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>, recount: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const { tenant_id, workspace_id } = scope
    const mentions = [...groupBy(
      fresh.flatMap((a) => a.subjects.map((subject) => ({ decision: a.decision, id: `${subject.kind}:${subject.key}` }))),
      (m) => `${m.id}\u0000${m.decision.session_id}`,
      (m) => ({ subject_id: m.id, session_id: m.decision.session_id, agent_id: m.decision.agent_id, n: 1, first: m.decision.created_at, last: m.decision.created_at }),
      (acc, m) => {
        acc.n += 1
        if (m.decision.created_at < acc.first) acc.first = m.decision.created_at
        if (m.decision.created_at > acc.last) acc.last = m.decision.created_at
      }
    ).values()]
    const added = mentions.length === 0 ? [] : yield* sql<{ subject_id: string; session_id: string; agent_id: string; inserted: boolean; last_at: Date }>`
      INSERT INTO session_subjects (tenant_id, workspace_id, subject_id, session_id, agent_id, decision_count, first_at, last_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM jsonb_to_recordset(${
      JSON.stringify(mentions.map((m) => ({ ...m, first: m.first.toISOString(), last: m.last.toISOString() })))
    }::jsonb) AS t(subject_id text, session_id uuid, agent_id text, n int8, first timestamptz, last timestamptz)
      ON CONFLICT (tenant_id, workspace_id, subject_id, session_id) DO UPDATE SET
        decision_count = session_subjects.decision_count + EXCLUDED.decision_count,
        first_at = least(session_subjects.first_at, EXCLUDED.first_at), last_at = greatest(session_subjects.last_at, EXCLUDED.last_at)
      RETURNING subject_id, session_id::text AS session_id, agent_id, (xmax = 0) AS inserted, last_at`
    const recounted = recount.length === 0 ? [] : yield* sql<{ subject_id: string; session_id: string; agent_id: string; inserted: boolean; last_at: Date }>`
      INSERT INTO session_subjects (tenant_id, workspace_id, subject_id, session_id, agent_id, decision_count, first_at, last_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, e.dst_id, s.session_id, min(s.agent_id), count(*), min(s.created_at), max(s.created_at)
      FROM decision_search s
      JOIN graph_edges e ON e.tenant_id = s.tenant_id AND e.workspace_id = s.workspace_id AND e.src_type = 'decision'
        AND e.src_id = s.ledger_id::text AND e.edge_type = 'about'
      WHERE s.session_id = ANY(${recount}::uuid[])
      GROUP BY e.dst_id, s.session_id
      ON CONFLICT (tenant_id, workspace_id, subject_id, session_id) DO UPDATE SET decision_count = EXCLUDED.decision_count,
        first_at = EXCLUDED.first_at, last_at = EXCLUDED.last_at
      RETURNING subject_id, session_id::text AS session_id, agent_id, (xmax = 0) AS inserted, last_at`
    const pairs = [...added, ...recounted].filter((pair) => pair.inserted)
    if (pairs.length === 0) return
    const perSubject = groupBy(pairs, (p) => p.subject_id, () => ({ n: 1 }), (acc) => {
      acc.n += 1
    })
    const counted = yield* sql<{ subject_id: string; kind: string; before: number; after: number }>`
      UPDATE subjects s SET session_count = s.session_count + t.n
      FROM UNNEST(${[...perSubject.keys()]}::text[], ${[...perSubject.values()].map((v) => v.n)}::int8[]) AS t(subject_id, n)
      WHERE s.tenant_id = ${tenant_id}::uuid AND s.workspace_id = ${workspace_id}::uuid AND s.subject_id = t.subject_id
      RETURNING s.subject_id, s.kind, (s.session_count - t.n)::int AS before, s.session_count::int AS after`
    // a subject that just became too common unlinks every session that shares it: recompute them all
    const nowCommon = counted.filter((c) => c.before <= MAX_SUBJECT_SESSIONS && c.after > MAX_SUBJECT_SESSIONS).map((c) => c.subject_id)
    const alsoAffected = nowCommon.length === 0 ? [] : yield* sql<{ session_id: string }>`
      SELECT session_id::text AS session_id FROM session_subjects WHERE subject_id = ANY(${nowCommon}::text[])`
    // their features may change: new links, or links gone with a subject that became too common
    yield* markDirty([...new Set([...pairs.map((p) => p.session_id), ...alsoAffected.map((s) => s.session_id)])])

    // agent level: each new (agent, work subject) pair links the agent to the others that have the subject
    const linkable = new Set(counted.filter((c) => WORK_KINDS.includes(c.kind) && c.after <= MAX_SUBJECT_SESSIONS).map((c) => c.subject_id))
    const agentPairs = [...new Map(pairs.filter((p) => linkable.has(p.subject_id)).map((p) => [`${p.agent_id}\u0000${p.subject_id}`, p])).values()]
    if (agentPairs.length === 0) return
    const newAgentPairs = yield* sql<{ subject_id: string; agent_id: string }>`
      INSERT INTO agent_subjects (tenant_id, workspace_id, subject_id, agent_id)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM UNNEST(${agentPairs.map((p) => p.subject_id)}::text[],
        ${agentPairs.map((p) => p.agent_id)}::text[]) AS t
      ON CONFLICT DO NOTHING RETURNING subject_id, agent_id`
    if (newAgentPairs.length === 0) return
    const holders = yield* sql<{ subject_id: string; agent_id: string }>`
      SELECT subject_id, agent_id FROM agent_subjects WHERE subject_id = ANY(${[...new Set(newAgentPairs.map((p) => p.subject_id))]}::text[])`
    const lastAt = new Map(agentPairs.map((p) => [`${p.agent_id}\u0000${p.subject_id}`, p.last_at]))
    const links = new Map<string, { from: string; to: string; at: Date }>()
    for (const pair of newAgentPairs) {
      for (const holder of holders) {
        if (holder.subject_id !== pair.subject_id || holder.agent_id === pair.agent_id) continue
        const [from, to] = [pair.agent_id, holder.agent_id].sort() as [string, string]
        links.set(`${from}\u0000${to}\u0000${pair.subject_id}`, { from, to, at: lastAt.get(`${pair.agent_id}\u0000${pair.subject_id}`)! })
      }
    }
    yield* addAgentEdges(scope, "shares_subject", [...links.values()])
  })

/** Sessions whose features and summary the next session pass recomputes. */
const markDirty = (sessionIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (sessionIds.length === 0) return
    const sql = yield* ScopedSql
    yield* sql`UPDATE analytics_sessions SET dirty = true WHERE session_id = ANY(${sessionIds}::uuid[]) AND NOT dirty`
  })

/** Sessions recomputed per session pass: their features (and everything linked to them) and summaries. */
const SESSION_PASS_SIZE = 200

/**
 * The session pass: features, merge suggestions and summaries of the sessions marked dirty. Deferred from the
 * batches (a busy session is touched by many), so each is recomputed once however many decisions arrived.
 */
const sessionPass = (scope: WorkspaceScope, keepModelSummaries: boolean) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const dirty = yield* sql<{ session_id: string }>`
      UPDATE analytics_sessions SET dirty = false
      WHERE session_id IN (SELECT session_id FROM analytics_sessions WHERE dirty LIMIT ${SESSION_PASS_SIZE})
      RETURNING session_id::text AS session_id`
    const sessionIds = dirty.map((d) => d.session_id)
    if (sessionIds.length === 0) return { sessions: 0, states: [] }
    const features = yield* recomputeFeatures(scope, sessionIds)
    yield* refreshMergeSuggestions(scope, features.written, features.removed)
    return { sessions: sessionIds.length, states: yield* writeDeterministicSummaries(sessionIds, keepModelSummaries) }
  })

/**
 * Sessions the builder folded into another since they were materialised: their decisions' search rows follow the
 * decisions, and the per-session data of both sides is recomputed.
 */
const repairMergedSessions = (scope: WorkspaceScope) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const gone = yield* sql<{ session_id: string }>`
      SELECT a.session_id::text AS session_id FROM analytics_sessions a
      WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = a.session_id) LIMIT 100`
    if (gone.length === 0) return
    const goneIds = gone.map((g) => g.session_id)
    // a new seq: the detectors look at the moved decisions again, in the session they are in now (loops and streaks
    // that span the merge)
    const moved = yield* sql<{ session_id: string; agent_id: string; execution_id: string | null }>`
      UPDATE decision_search s SET session_id = d.session_id, seq = DEFAULT FROM decisions d
      WHERE s.session_id = ANY(${goneIds}::uuid[]) AND d.ledger_id = s.ledger_id
      RETURNING d.session_id::text AS session_id, d.agent_id, d.execution_id`
    const removedPairs = yield* sql<{ subject_id: string }>`
      DELETE FROM session_subjects WHERE session_id = ANY(${goneIds}::uuid[]) RETURNING subject_id`
    if (removedPairs.length > 0) {
      yield* sql`UPDATE subjects s SET session_count = (SELECT count(*) FROM session_subjects ss WHERE ss.tenant_id = s.tenant_id
          AND ss.workspace_id = s.workspace_id AND ss.subject_id = s.subject_id)
        WHERE s.subject_id = ANY(${[...new Set(removedPairs.map((p) => p.subject_id))]}::text[])`
    }
    yield* sql`DELETE FROM analytics_sessions WHERE session_id = ANY(${goneIds}::uuid[])`
    const targets = [...new Map(moved.map((m) => [m.session_id, m])).values()]
    if (targets.length > 0) {
      yield* sql`INSERT INTO analytics_sessions (tenant_id, workspace_id, session_id, agent_id, execution_id)
        SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM jsonb_to_recordset(${JSON.stringify(targets)}::jsonb)
          AS t(session_id uuid, agent_id text, execution_id text)
        ON CONFLICT DO NOTHING`
    }
    yield* addSessionSubjects(scope, [], targets.map((t) => t.session_id))
    // the merged-away sessions' features are recomputed with the sessions they were folded into
    yield* recomputeFeatures(scope, goneIds).pipe(Effect.flatMap((f) => refreshMergeSuggestions(scope, f.written, f.removed)))
    yield* markDirty(targets.map((t) => t.session_id))
    yield* Effect.logInfo("analytics followed merged sessions", { merged: goneIds.length, into: targets.length })
  })

// ---------------------------------------------------------------------------------------------------------

export class Materializer extends Context.Service<Materializer, {
  /**
   * One pass over every workspace whose analytics lease this process holds, a bounded number of batches each (what
   * the fiber runs); yields decisions materialised.
   */
  readonly round: Effect.Effect<number, DatabaseUnavailable>
  /** Materialises every decision built so far in every workspace (tests, tools); yields how many were new. */
  readonly catchUp: Effect.Effect<number, DatabaseUnavailable>
}>()("ledger/analytics/Materializer") {
  static readonly layer = Layer.effect(
    Materializer,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const models = yield* ModelCalls
      const keepModelSummaries = Option.isSome(models.summaryModel)
      let rounds = 0

      const workspaces = tenantSql.control(
        ScopedSql.use((sql) => sql<WorkspaceScope>`SELECT tenant_id::text AS tenant_id, workspace_id::text AS workspace_id FROM workspaces`)
      ).pipe(Effect.mapError(asUnavailable))

      const write = <A, E>(scope: WorkspaceScope, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.write(
          scope,
          Effect.andThen(
            // one materialiser per workspace at a time, across processes
            ScopedSql.use((sql) => sql`SELECT pg_advisory_xact_lock(hashtext(${`ledger-analytics:${scope.tenant_id}:${scope.workspace_id}`}))`),
            effect
          )
        ).pipe(Effect.mapError(asUnavailable))

      const embed = (analyses: ReadonlyArray<DecisionAnalysis>) =>
        Option.isNone(models.embeddingsModel) || analyses.length === 0
          ? Effect.succeed(Option.none())
          : models.embed(analyses.map((a) => a.searchText)).pipe(
            Effect.map((vectors) => Option.some({ model: models.embeddingsModel.pipe(Option.getOrThrow), vectors })),
            // the local vector is always there; embeddings are filled for the next decisions once the model answers
            Effect.catch((error) => Effect.logWarning("embeddings failed; decisions keep their local vectors", { error: error.message }).pipe(Effect.as(Option.none())))
          )

      /** One batch of one workspace; yields how many decisions it read (0: caught up) and how many were new. */
      const batch = (scope: WorkspaceScope, reader: typeof readBatch = readBatch) =>
        Effect.gen(function*() {
          const rows = yield* tenantSql.write(scope, reader).pipe(Effect.mapError(asUnavailable))
          if (rows.length === 0) return { read: 0, fresh: 0 }
          const analyses = rows.map(analyseDecision)
          const embeddings = yield* embed(analyses)
          const fresh = yield* write(scope, Effect.gen(function*() {
            const fresh = yield* insertSearchRows(scope, analyses, embeddings)
            if (fresh.length > 0) {
              yield* writeDecisionFacts(scope, fresh)
              yield* writeHandoffs(scope, fresh)
              yield* writeSharedExecutions(scope, fresh)
              yield* addSessionSubjects(scope, fresh, [])
              yield* markDirty([...new Set(fresh.map((a) => a.decision.session_id))])
            }
            if (reader === readBatch) {
              // rows come in (built_at, ledger_id) order: the last one is the new cursor (kept with microseconds)
              const last = rows.at(-1)!
              yield* ScopedSql.use((sql) =>
                sql`INSERT INTO analytics_progress (tenant_id, workspace_id, built_cursor, built_cursor_id)
                  SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, built_at, ledger_id FROM decisions
                  WHERE ledger_id = ${last.ledger_id}::uuid
                  ON CONFLICT (tenant_id, workspace_id) DO UPDATE
                  SET built_cursor = EXCLUDED.built_cursor, built_cursor_id = EXCLUDED.built_cursor_id, updated_at = now()
                  WHERE (analytics_progress.built_cursor, analytics_progress.built_cursor_id) < (EXCLUDED.built_cursor, EXCLUDED.built_cursor_id)`
              )
            }
            return fresh
          }))
          yield* Metric.update(decisionsMaterialized, fresh.length)
          return { read: rows.length, fresh: fresh.length }
        })

      /** One session pass, then the model summaries it made due (the model is called outside any transaction). */
      const passSessions = (scope: WorkspaceScope) =>
        Effect.gen(function*() {
          const { sessions, states } = yield* write(scope, sessionPass(scope, keepModelSummaries))
          yield* Option.match(models.summaryModel, {
            onNone: () => Effect.void,
            onSome: (model) =>
              modelSummaries(states).pipe(
                Effect.provideService(ModelCalls, models),
                Effect.flatMap((written) => write(scope, writeModelSummaries(model, written)))
              )
          })
          return sessions
        })

      const lastPass = new Map<string, number>()
      /** Late commits and merged sessions: the two things the cursor alone does not see. */
      const sweep = (scope: WorkspaceScope) =>
        Effect.gen(function*() {
          let total = 0
          for (;;) {
            const { fresh, read } = yield* batch(scope, readLateBatch)
            total += fresh
            if (read < BATCH_SIZE) break
          }
          yield* write(scope, repairMergedSessions(scope))
          return total
        })

      const workspaceRound = (scope: WorkspaceScope, repair: boolean) =>
        Effect.gen(function*() {
          let total = repair ? yield* sweep(scope) : 0
          let caughtUp = false
          for (let i = 0; i < BATCHES_PER_ROUND && !caughtUp; i++) {
            const { fresh, read } = yield* batch(scope)
            total += fresh
            caughtUp = read < BATCH_SIZE
          }
          // while a backlog drains, sessions are recomputed at most every SESSION_PASS_EVERY_MS
          const key = `${scope.tenant_id}/${scope.workspace_id}`
          const now = Date.now()
          if (caughtUp || now - (lastPass.get(key) ?? 0) >= SESSION_PASS_EVERY_MS) {
            lastPass.set(key, now)
            yield* passSessions(scope)
          }
          return total
        })

      const round = Effect.gen(function*() {
        const repair = rounds++ % REPAIR_EVERY_ROUNDS === 0
        let total = 0
        for (const scope of yield* workspaces) {
          if (yield* claimWorkspace(tenantSql, scope)) total += yield* workspaceRound(scope, repair)
        }
        return total
      })

      const catchUp = Effect.gen(function*() {
        let total = 0
        for (const scope of yield* workspaces) {
          for (;;) {
            const { read, fresh } = yield* batch(scope)
            total += fresh
            if (read < BATCH_SIZE) break
          }
          total += yield* sweep(scope)
          let passed: number
          do passed = yield* passSessions(scope)
          while (passed > 0)
        }
        return total
      }).pipe(Effect.withSpan("Materializer.catchUp"))

      return Materializer.of({ round: round.pipe(Effect.withSpan("Materializer.round")), catchUp })
    })
  )

  /** The supervised fiber: a round every LEDGER_ANALYTICS_INTERVAL_MS for the life of the layer, yielding to ingest. */
  static readonly fiber = Layer.effectDiscard(Effect.gen(function*() {
    const materializer = yield* Materializer
    const { analytics } = yield* LedgerConfig
    yield* superviseLoop("analytics-materializer", yield* yieldingToIngest("analytics-materializer", materializer.round), analytics.intervalMs)
  }))
}
