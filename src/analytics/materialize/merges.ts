/** Following the builder when it folds one session into another after both were materialised. */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { recomputeFeatures, refreshMergeSuggestions } from "../Features.ts"
import { markDirty } from "./sessions.ts"
import { addSessionSubjects } from "./subjects.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/**
 * Sessions the builder folded into another since they were materialised: their decisions' search rows follow the
 * decisions, and the per-session data of both sides is recomputed.
 */
export const repairMergedSessions = Effect.fnUntraced(function*(scope: WorkspaceScope) {
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
