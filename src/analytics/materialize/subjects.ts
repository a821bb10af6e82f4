/**
 * Subjects the fresh decisions mention: the workspace-wide counts with their `about` edges, and the per-session and
 * per-agent links that features and the `shares_subject` edges come from.
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { floats, texts, times, uuids, zipped } from "../../store/arrays.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import { MAX_SUBJECT_SESSIONS, WORK_SUBJECT_KINDS } from "../rules.ts"
import { addAgentEdges } from "./agentEdges.ts"
import { markDirty } from "./sessions.ts"
import { groupBy, widen } from "./shared.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

const WORK_KINDS: Array<string> = [...WORK_SUBJECT_KINDS]

/** Counts each fresh decision once per subject it mentions, and links the two. */
export const writeMentions = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) {
  const sql = yield* ScopedSql
  const { tenant_id, workspace_id } = scope
  const mentions = fresh.flatMap((a) => a.subjects.map((subject) => ({ decision: a.decision, subject, id: `${subject.kind}:${subject.key}` })))
  if (mentions.length > 0) {
    const subjects = [...groupBy(
      mentions,
      (m) => m.id,
      (m) => ({ id: m.id, kind: m.subject.kind as string, key: m.subject.key, label: m.subject.label, n: 1, first: m.decision.created_at, last: m.decision.created_at }),
      (acc, m) => {
        acc.n += 1
        widen(acc, m.decision.created_at)
      }
    ).values()]
    yield* sql`INSERT INTO subjects (tenant_id, workspace_id, subject_id, kind, key, label, decision_count, first_seen_at, last_seen_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM ${zipped(sql, {
        subject_id: texts(subjects.map((s) => s.id)),
        kind: texts(subjects.map((s) => s.kind)),
        key: texts(subjects.map((s) => s.key)),
        label: texts(subjects.map((s) => s.label)),
        decision_count: floats(subjects.map((s) => s.n)),
        first_seen_at: times(subjects.map((s) => s.first.getTime())),
        last_seen_at: times(subjects.map((s) => s.last.getTime()))
      })} AS t
      ON CONFLICT (tenant_id, workspace_id, subject_id) DO UPDATE SET decision_count = subjects.decision_count + EXCLUDED.decision_count,
        first_seen_at = least(subjects.first_seen_at, EXCLUDED.first_seen_at),
        last_seen_at = greatest(subjects.last_seen_at, EXCLUDED.last_seen_at)`
    yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, 'decision', t.ledger_id, 'about', 'subject', t.subject_id, 1, t.at, t.at
      FROM ${zipped(sql, {
        ledger_id: texts(mentions.map((m) => m.decision.ledger_id)),
        subject_id: texts(mentions.map((m) => m.id)),
        at: times(mentions.map((m) => m.decision.created_at.getTime()))
      })} AS t
      ON CONFLICT DO NOTHING`
  }
})

/**
 * Which subjects each session mentions, from the batch's fresh decisions (added to the counts, so each decision
 * counts once) — or, for `recount` sessions (the builder merged sessions into them), recomputed from all their
 * decisions. A new (session, subject) pair updates the subject's session count and marks the session for the session
 * pass (its links changed; session↔session links are read from these rows, not stored); a new (agent, subject)
 * pair links the agent to the other agents that have the subject.
 */
export const addSessionSubjects = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>, recount: ReadonlyArray<string>) {
  const sql = yield* ScopedSql
  const { tenant_id, workspace_id } = scope
  const mentions = [...groupBy(
    fresh.flatMap((a) => a.subjects.map((subject) => ({ decision: a.decision, id: `${subject.kind}:${subject.key}` }))),
    (m) => `${m.id}\u0000${m.decision.session_id}`,
    (m) => ({ subject_id: m.id, session_id: m.decision.session_id, agent_id: m.decision.agent_id, n: 1, first: m.decision.created_at, last: m.decision.created_at }),
    (acc, m) => {
      acc.n += 1
      widen(acc, m.decision.created_at)
    }
  ).values()]
  const added = mentions.length === 0 ? [] : yield* sql<{ subject_id: string; session_id: string; agent_id: string; inserted: boolean; last_at: Date }>`
    INSERT INTO session_subjects (tenant_id, workspace_id, subject_id, session_id, agent_id, decision_count, first_at, last_at)
    SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM ${zipped(sql, {
      subject_id: texts(mentions.map((m) => m.subject_id)),
      session_id: uuids(mentions.map((m) => m.session_id)),
      agent_id: texts(mentions.map((m) => m.agent_id)),
      decision_count: floats(mentions.map((m) => m.n)),
      first_at: times(mentions.map((m) => m.first.getTime())),
      last_at: times(mentions.map((m) => m.last.getTime()))
    })} AS t
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
    FROM UNNEST(${texts([...perSubject.keys()])}, ${floats([...perSubject.values()].map((v) => v.n))}::int8[]) AS t(subject_id, n)
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
    SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM ${zipped(sql, {
      subject_id: texts(agentPairs.map((p) => p.subject_id)),
      agent_id: texts(agentPairs.map((p) => p.agent_id))
    })} AS t
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
