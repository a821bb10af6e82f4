/**
 * Analytics sessions: registered when their first decision is materialised, marked dirty when what they hold
 * changes, and recomputed (features, merge suggestions, summaries) by the deferred session pass.
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { texts, uuids, zipped } from "../../store/arrays.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import { recomputeFeatures, refreshMergeSuggestions } from "../Features.ts"
import { writeDeterministicSummaries } from "../Summaries.ts"
import { addAgentEdges } from "./agentEdges.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/**
 * Registers the fresh decisions' sessions, and links agents working under one execution_id: counted once per agent
 * pair and execution, when the later session appears.
 */
export const writeSharedExecutions = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) {
  const sql = yield* ScopedSql
  const sessions = [...new Map(fresh.map((a) => [a.decision.session_id, a.decision])).values()]
  const created = yield* sql<{ agent_id: string; execution_id: string | null; first_at: Date }>`
    INSERT INTO analytics_sessions (tenant_id, workspace_id, session_id, agent_id, execution_id)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM ${zipped(sql, {
      session_id: uuids(sessions.map((d) => d.session_id)),
      agent_id: texts(sessions.map((d) => d.agent_id)),
      execution_id: texts(sessions.map((d) => d.execution_id))
    })} AS t
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

/** Sessions whose features and summary the next session pass recomputes. */
export const markDirty = Effect.fnUntraced(function*(sessionIds: ReadonlyArray<string>) {
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
export const sessionPass = Effect.fnUntraced(function*(scope: WorkspaceScope, keepModelSummaries: boolean) {
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
