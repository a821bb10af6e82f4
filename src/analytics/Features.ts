/**
 * Features (units of delivered work): connected groups of sessions that share work subjects (rules.ts
 * LINKING_RULE), recomputed by the materialiser for the sessions a batch touched, and pairs of features that look
 * like the same work (merge suggestions, rules.ts MERGE_RULE).
 *
 * A feature's id derives from its anchor — its earliest session — so it stays put while the feature grows; when two
 * features join, the older id survives.
 */
import { Effect } from "effect"
import { ScopedSql } from "../store/TenantSql.ts"
import {
  MAX_FEATURE_SESSIONS,
  MAX_SUBJECT_SESSIONS,
  MERGE_MIN_SCORE,
  MERGE_MIN_SUBJECT_OVERLAP,
  MERGE_MIN_TEXT_SIMILARITY,
  MERGE_TIME_HORIZON_HOURS,
  MERGE_WEIGHTS,
  MIN_SHARED_WEAK_SUBJECTS,
  STRONG_SUBJECT_KINDS,
  SUCCESS_OUTCOMES,
  WORK_SUBJECT_KINDS
} from "./rules.ts"
import { centroid, similarity, stableUuid, subjectTokens } from "./text.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

const WORK_KINDS: Array<string> = [...WORK_SUBJECT_KINDS]
const STRONG_KINDS: ReadonlySet<string> = new Set(STRONG_SUBJECT_KINDS)
const TITLE_SUBJECTS = 3
const SHOWN_SUBJECTS = 8
/** decisions whose vectors make a feature's centroid (the newest) */
const CENTROID_DECISIONS = 200
const CANDIDATE_FEATURES = 500

/** Sessions linked by shared work subjects, from the sessions of `frontier`. */
const linksFrom = Effect.fnUntraced(function*(frontier: ReadonlyArray<string>) {
  const sql = yield* ScopedSql
  return yield* sql<{ a: string; b: string; strong: number; shared: number }>`
    SELECT a.session_id::text AS a, b.session_id::text AS b,
      count(*) FILTER (WHERE s.kind = ANY(${[...STRONG_KINDS]}::text[]))::int AS strong, count(*)::int AS shared
    FROM session_subjects a
    JOIN subjects s ON s.tenant_id = a.tenant_id AND s.workspace_id = a.workspace_id AND s.subject_id = a.subject_id
    JOIN session_subjects b ON b.tenant_id = a.tenant_id AND b.workspace_id = a.workspace_id
      AND b.subject_id = a.subject_id AND b.session_id <> a.session_id
    WHERE a.session_id = ANY(${frontier}::uuid[]) AND s.kind = ANY(${WORK_KINDS}::text[])
      AND s.session_count <= ${MAX_SUBJECT_SESSIONS}
    GROUP BY a.session_id, b.session_id`
})

const linked = (link: { strong: number; shared: number }) =>
  link.strong > 0 || link.shared - link.strong >= MIN_SHARED_WEAK_SUBJECTS

/** Connected components (union-find) of `nodes` under `edges`. */
const components = (nodes: ReadonlyArray<string>, edges: ReadonlyArray<readonly [string, string]>): Array<Array<string>> => {
  const parent = new Map(nodes.map((node) => [node, node]))
  const find = (node: string): string => {
    let root = node
    while (parent.get(root) !== root) root = parent.get(root)!
    parent.set(node, root)
    return root
  }
  for (const [a, b] of edges) {
    const ra = find(a)
    const rb = find(b)
    if (ra !== rb) parent.set(ra < rb ? rb : ra, ra < rb ? ra : rb)
  }
  const groups = new Map<string, Array<string>>()
  for (const node of nodes) {
    const root = find(node)
    groups.set(root, [...(groups.get(root) ?? []), node])
  }
  return [...groups.values()]
}

interface ComponentStats {
  readonly comp: number
  readonly decisions: number
  readonly successes: number
  readonly errors: number
  readonly cost: number
  readonly first_at: Date
  readonly last_at: Date
  readonly agents: Array<string>
  readonly last_outcome: string
  readonly anchor: string
}

interface ComponentSubject {
  readonly comp: number
  readonly subject_id: string
  readonly kind: string
  readonly label: string
  readonly key: string
  readonly sessions: number
  readonly session_count: number
}

/**
 * Recomputes the features of the given sessions (and of everything linked to them); yields the ids of features
 * written and of features that no longer exist.
 */
export const recomputeFeatures = Effect.fnUntraced(function*(scope: WorkspaceScope, sessionIds: ReadonlyArray<string>) {
  if (sessionIds.length === 0) return { written: [], removed: [] }
  const sql = yield* ScopedSql
  // the members of their current features too: a change may split or join them
  const members = yield* sql<{ session_id: string }>`
    SELECT fs.session_id::text AS session_id FROM feature_sessions fs
    WHERE fs.feature_id IN (SELECT feature_id FROM feature_sessions WHERE session_id = ANY(${sessionIds}::uuid[]))`
  // within the bound: a feature grown past it is left as it was beyond the bound
  const start = [...new Set([...sessionIds, ...members.map((m) => m.session_id)])]
  const visited = new Set<string>(start.slice(0, Math.max(sessionIds.length, MAX_FEATURE_SESSIONS)))
  const edges: Array<readonly [string, string]> = []
  let frontier = [...visited]
  let bounded = visited.size < start.length
  while (frontier.length > 0) {
    const next: Array<string> = []
    for (const link of yield* linksFrom(frontier)) {
      if (!linked(link)) continue
      if (!visited.has(link.b)) {
        if (visited.size >= MAX_FEATURE_SESSIONS) {
          bounded = true
          continue
        }
        visited.add(link.b)
        next.push(link.b)
      }
      edges.push([link.a, link.b])
    }
    frontier = next
  }
  if (bounded) {
    yield* Effect.logWarning("feature recomputation reached its session bound; sessions beyond it keep their feature", {
      sessions: visited.size
    })
  }
  const groups = components([...visited], edges).filter((group) => group.length >= 2)
  const sessionsArg = groups.flat()
  const compArg = groups.flatMap((group, index) => group.map(() => index))

  const stats = sessionsArg.length === 0 ? [] : yield* sql<ComponentStats>`
    WITH m AS (SELECT * FROM UNNEST(${sessionsArg}::uuid[], ${compArg}::int[]) AS m(session_id, comp))
    SELECT m.comp, count(*)::int AS decisions,
      count(*) FILTER (WHERE d.outcome = ANY(${[...SUCCESS_OUTCOMES]}::text[]))::int AS successes,
      count(*) FILTER (WHERE d.outcome = 'error')::int AS errors,
      coalesce(sum(d.cost_usd), 0)::float8 AS cost, min(d.created_at) AS first_at,
      max(d.created_at + d.latency_ms * interval '1 millisecond') AS last_at,
      array_agg(DISTINCT d.agent_id ORDER BY d.agent_id) AS agents,
      (array_agg(d.outcome ORDER BY d.created_at DESC, d.ledger_id DESC))[1] AS last_outcome,
      (SELECT (array_agg(s.session_id::text ORDER BY s.started_at, s.session_id))[1] FROM sessions s
        JOIN m m2 ON m2.session_id = s.session_id WHERE m2.comp = m.comp) AS anchor
    FROM m JOIN decisions d ON d.session_id = m.session_id
    GROUP BY m.comp`
  const byIntent = sessionsArg.length === 0 ? [] : yield* sql<{ comp: number; intent: string; n: number }>`
    WITH m AS (SELECT * FROM UNNEST(${sessionsArg}::uuid[], ${compArg}::int[]) AS m(session_id, comp))
    SELECT m.comp, d.intent, count(*)::int AS n FROM m JOIN decisions d ON d.session_id = m.session_id
    WHERE d.outcome = ANY(${[...SUCCESS_OUTCOMES]}::text[]) GROUP BY m.comp, d.intent`
  const subjects = sessionsArg.length === 0 ? [] : yield* sql<ComponentSubject>`
    WITH m AS (SELECT * FROM UNNEST(${sessionsArg}::uuid[], ${compArg}::int[]) AS m(session_id, comp))
    SELECT m.comp, sj.subject_id, sj.kind, sj.label, sj.key, count(*)::int AS sessions, sj.session_count::int AS session_count
    FROM m JOIN session_subjects ss ON ss.tenant_id = ${scope.tenant_id}::uuid AND ss.workspace_id = ${scope.workspace_id}::uuid
      AND ss.session_id = m.session_id
    -- one key probe per session subject: a workspace newer than the statistics was estimated at a row, and the join
    -- became a walk of all its subjects per session subject (0.2-0.6 s a pass at 3,000)
    CROSS JOIN LATERAL (SELECT * FROM subjects sj WHERE sj.tenant_id = ss.tenant_id AND sj.workspace_id = ss.workspace_id
      AND sj.subject_id = ss.subject_id LIMIT 1) sj
    WHERE sj.kind = ANY(${WORK_KINDS}::text[])
    GROUP BY m.comp, sj.subject_id, sj.kind, sj.label, sj.key, sj.session_count`
  const vectors = sessionsArg.length === 0 ? [] : yield* sql<{ comp: number; local_vector: Array<number> }>`
    WITH m AS (SELECT * FROM UNNEST(${sessionsArg}::uuid[], ${compArg}::int[]) AS m(session_id, comp))
    SELECT comp, local_vector FROM (
      SELECT m.comp, s.local_vector, row_number() OVER (PARTITION BY m.comp ORDER BY s.created_at DESC) AS r
      FROM m JOIN decision_search s ON s.session_id = m.session_id) v
    WHERE r <= ${CENTROID_DECISIONS}`

  const features = stats.map((stat) => {
    const own = subjects.filter((s) => s.comp === stat.comp && s.session_count <= MAX_SUBJECT_SESSIONS)
    const linking = own.filter((s) => s.sessions >= 2).sort((a, b) =>
      Number(STRONG_KINDS.has(b.kind)) - Number(STRONG_KINDS.has(a.kind)) || b.sessions - a.sessions ||
      a.subject_id.localeCompare(b.subject_id)
    )
    const intents = Object.fromEntries(byIntent.filter((i) => i.comp === stat.comp).map((i) => [i.intent, i.n]))
    return {
      feature_id: stableUuid(`${scope.tenant_id}/${scope.workspace_id}/feature/${stat.anchor}`),
      anchor: stat.anchor,
      title: linking.slice(0, TITLE_SUBJECTS).map((s) => s.label).join(" · "),
      subjects: linking.slice(0, SHOWN_SUBJECTS).map((s) => ({ subject_id: s.subject_id, kind: s.kind, label: s.label, sessions: s.sessions })),
      sessions: groups[stat.comp]!,
      stat,
      intents,
      centroid: centroid(vectors.filter((v) => v.comp === stat.comp).map((v) => v.local_vector)),
      tokens: [...new Set(own.flatMap((s) => subjectTokens(s.key)))].sort()
    }
  })

  const previous = yield* sql<{ feature_id: string }>`
    DELETE FROM feature_sessions WHERE session_id = ANY(${[...visited]}::uuid[]) RETURNING feature_id::text AS feature_id`
  if (features.length > 0) {
    const records = features.map((f) => ({
      feature_id: f.feature_id,
      anchor: f.anchor,
      title: f.title,
      subjects: f.subjects,
      agents: f.stat.agents,
      sessions: f.sessions.length,
      decisions: f.stat.decisions,
      successes: f.stat.successes,
      errors: f.stat.errors,
      cost: f.stat.cost,
      first_at: f.stat.first_at.toISOString(),
      last_at: f.stat.last_at.toISOString(),
      last_outcome: f.stat.last_outcome,
      intents: f.intents,
      centroid: f.centroid,
      tokens: f.tokens
    }))
    yield* sql`INSERT INTO features (feature_id, tenant_id, workspace_id, anchor_session_id, title, subjects, agents,
        session_count, decision_count, success_count, error_count, cost_usd, first_at, last_at, last_outcome,
        successes_by_intent, centroid, subject_tokens, updated_at)
      SELECT t.feature_id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.anchor, t.title, t.subjects, t.agents,
        t.sessions, t.decisions, t.successes, t.errors, t.cost, t.first_at, t.last_at, t.last_outcome, t.intents,
        t.centroid, t.tokens, now()
      FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS t(feature_id uuid, anchor uuid, title text,
        subjects jsonb, agents text[], sessions int8, decisions int8, successes int8, errors int8, cost float8,
        first_at timestamptz, last_at timestamptz, last_outcome text, intents jsonb, centroid real[], tokens text[])
      ON CONFLICT (feature_id) DO UPDATE SET anchor_session_id = EXCLUDED.anchor_session_id, title = EXCLUDED.title,
        subjects = EXCLUDED.subjects, agents = EXCLUDED.agents, session_count = EXCLUDED.session_count,
        decision_count = EXCLUDED.decision_count, success_count = EXCLUDED.success_count,
        error_count = EXCLUDED.error_count, cost_usd = EXCLUDED.cost_usd, first_at = EXCLUDED.first_at,
        last_at = EXCLUDED.last_at, last_outcome = EXCLUDED.last_outcome,
        successes_by_intent = EXCLUDED.successes_by_intent, centroid = EXCLUDED.centroid,
        subject_tokens = EXCLUDED.subject_tokens, updated_at = now()`
    yield* sql`INSERT INTO feature_sessions (tenant_id, workspace_id, session_id, feature_id)
      SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.session_id, t.feature_id
      FROM UNNEST(${features.flatMap((f) => f.sessions)}::uuid[], ${features.flatMap((f) => f.sessions.map(() => f.feature_id))}::uuid[])
        AS t(session_id, feature_id)`
  }
  const written = new Set(features.map((f) => f.feature_id))
  const stale = [...new Set(previous.map((p) => p.feature_id))].filter((id) => !written.has(id))
  const removed = stale.length === 0 ? [] : yield* sql<{ feature_id: string }>`
    DELETE FROM features f WHERE f.feature_id = ANY(${stale}::uuid[])
      AND NOT EXISTS (SELECT 1 FROM feature_sessions fs WHERE fs.feature_id = f.feature_id)
    RETURNING f.feature_id::text AS feature_id`
  return { written: [...written], removed: removed.map((r) => r.feature_id) }
})

// ---------------------------------------------------------------------------------------------------------
// Merge suggestions

interface FeatureSignals {
  readonly feature_id: string
  readonly title: string
  readonly subject_tokens: Array<string>
  readonly centroid: Array<number>
  readonly agents: Array<string>
  readonly first_at: Date
  readonly last_at: Date
}

const jaccard = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  const left = new Set(a)
  const right = new Set(b)
  const union = new Set([...left, ...right]).size
  if (union === 0) return 0
  return [...left].filter((item) => right.has(item)).length / union
}

const round = (value: number) => Math.round(value * 1000) / 1000

/** Scores one pair by MERGE_RULE; undefined when it does not look like the same work. */
export const scoreMerge = (a: FeatureSignals, b: FeatureSignals) => {
  const gapHours = Math.max(0, Math.max(a.first_at.getTime(), b.first_at.getTime()) - Math.min(a.last_at.getTime(), b.last_at.getTime())) /
    3_600_000
  const signals = {
    subject_overlap: round(jaccard(a.subject_tokens, b.subject_tokens)),
    text_similarity: round(similarity(a.centroid, b.centroid)),
    shared_agents: round(jaccard(a.agents, b.agents)),
    time_proximity: round(Math.max(0, 1 - gapHours / MERGE_TIME_HORIZON_HOURS))
  }
  const score = round(
    MERGE_WEIGHTS.subject_overlap * signals.subject_overlap + MERGE_WEIGHTS.text_similarity * signals.text_similarity +
      MERGE_WEIGHTS.shared_agents * signals.shared_agents + MERGE_WEIGHTS.time_proximity * signals.time_proximity
  )
  const strong = signals.subject_overlap >= MERGE_MIN_SUBJECT_OVERLAP || signals.text_similarity >= MERGE_MIN_TEXT_SIMILARITY
  if (score < MERGE_MIN_SCORE || !strong) return undefined
  const sharedTokens = a.subject_tokens.filter((token) => b.subject_tokens.includes(token))
  const sharedAgents = a.agents.filter((agent) => b.agents.includes(agent))
  const reasons = [
    sharedTokens.length > 0 ? `subjects share ${sharedTokens.slice(0, 6).join(", ")} (overlap ${signals.subject_overlap})` : "",
    `their decisions read alike (text similarity ${signals.text_similarity})`,
    sharedAgents.length > 0 ? `same agents: ${sharedAgents.join(", ")}` : "",
    gapHours === 0 ? "active at the same time" : `${Math.round(gapHours)} h apart`
  ].filter((reason) => reason !== "")
  return { score, signals, reason: reasons.join("; ") }
}

/** Re-scores the suggestions of changed features against every feature that could look like them. */
export const refreshMergeSuggestions = Effect.fnUntraced(function*(scope: WorkspaceScope, changed: ReadonlyArray<string>, removed: ReadonlyArray<string>) {
  const sql = yield* ScopedSql
  const touched = [...changed, ...removed]
  if (touched.length === 0) return
  yield* sql`DELETE FROM feature_merge_suggestions
    WHERE feature_a = ANY(${touched}::uuid[]) OR feature_b = ANY(${touched}::uuid[])`
  if (changed.length === 0) return
  const columns = sql`feature_id::text AS feature_id, title, subject_tokens, centroid, agents, first_at, last_at`
  const mine = yield* sql<FeatureSignals>`SELECT ${columns} FROM features WHERE feature_id = ANY(${changed}::uuid[])`
  if (mine.length === 0) return
  const horizon = `${MERGE_TIME_HORIZON_HOURS} hours`
  const first = new Date(Math.min(...mine.map((f) => f.first_at.getTime())))
  const last = new Date(Math.max(...mine.map((f) => f.last_at.getTime())))
  const candidates = yield* sql<FeatureSignals>`SELECT ${columns} FROM features
    WHERE subject_tokens && ${[...new Set(mine.flatMap((f) => f.subject_tokens))]}::text[]
      OR (agents && ${[...new Set(mine.flatMap((f) => f.agents))]}::text[]
        AND last_at >= ${first.toISOString()}::timestamptz - ${horizon}::interval
        AND first_at <= ${last.toISOString()}::timestamptz + ${horizon}::interval)
    ORDER BY last_at DESC LIMIT ${CANDIDATE_FEATURES}`
  const pairs = new Map<string, { a: FeatureSignals; b: FeatureSignals; scored: NonNullable<ReturnType<typeof scoreMerge>> }>()
  for (const feature of mine) {
    for (const other of candidates) {
      if (other.feature_id === feature.feature_id) continue
      const [a, b] = feature.feature_id < other.feature_id ? [feature, other] : [other, feature]
      const key = `${a.feature_id}|${b.feature_id}`
      if (pairs.has(key)) continue
      const scored = scoreMerge(a, b)
      if (scored !== undefined) pairs.set(key, { a, b, scored })
    }
  }
  if (pairs.size === 0) return
  const rows = [...pairs.values()]
  const records = rows.map((r) => ({
    a: r.a.feature_id,
    b: r.b.feature_id,
    score: r.scored.score,
    reasons: { signals: r.scored.signals, reason: r.scored.reason }
  }))
  yield* sql`INSERT INTO feature_merge_suggestions (tenant_id, workspace_id, feature_a, feature_b, score, reasons, updated_at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.a, t.b, t.score, t.reasons, now()
    FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS t(a uuid, b uuid, score float8, reasons jsonb)
    ON CONFLICT (tenant_id, workspace_id, feature_a, feature_b) DO UPDATE SET score = EXCLUDED.score,
      reasons = EXCLUDED.reasons, updated_at = now()`
})
