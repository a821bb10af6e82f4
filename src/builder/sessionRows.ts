/**
 * The sessions a batch touches, as rows: read before session assignment (sessions.ts plans it) and written with their
 * rollups after it, under the agents' locks.
 */
import { Effect } from "effect"
import { type SessionRollup, sessionSummary } from "../domain/sessionSummary.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { floats, texts, times, uuids, zipped } from "../store/arrays.ts"
import type { HeldReconstruction } from "./prepared.ts"
import { callFacts } from "./reconstruct.ts"
import { pgText } from "../store/pgValues.ts"
import { earlierFirst, type KnownSession } from "./sessions.ts"

export interface LoadedSession extends KnownSession {
  readonly rollup: SessionRollup | undefined
}

/** When a call ended. */
export const callEnd = (item: HeldReconstruction) => item.capture.started_at + callFacts(item).latencyMs

/** What the builder reads of a session `s`: its identity, span and rollup, with its first decision (migration 0023). */
const SESSION_COLUMNS = `s.session_id, s.agent_id, s.execution_id, s.started_at, s.ended_at,
  s.decision_count::float8 AS decision_count, s.error_count::float8 AS error_count,
  s.total_cost_usd, s.total_tokens::float8 AS total_tokens,
  s.first_ledger_id, s.first_at, s.first_title`

/** The sessions the items may touch: their executions', those within the gap, and the ones they continue (`followed`). */
export const loadSessions = Effect.fnUntraced(function*(items: ReadonlyArray<HeldReconstruction>, gapMs: number, followed: ReadonlyArray<string>) {
  const sql = yield* ScopedSql
  // one probe per execution, and one window per agent for its gap-grouped calls
  const probes = new Map<string, { agent: string; execution: string | null; lo: number | null; hi: number | null }>()
  for (const item of items) {
    const { agent_id, execution_id, started_at } = item.capture
    // execution ids are never empty: "" stands for the agent's gap-grouped calls
    const key = `${agent_id}\u0000${execution_id ?? ""}`
    const probe = probes.get(key) ?? { agent: agent_id, execution: execution_id, lo: null, hi: null }
    if (execution_id === null) {
      probe.lo = Math.min(probe.lo ?? Infinity, started_at - gapMs)
      probe.hi = Math.max(probe.hi ?? -Infinity, callEnd(item) + gapMs)
    }
    probes.set(key, probe)
  }
  const list = [...probes.values()]
  type Row = {
    session_id: string
    agent_id: string
    execution_id: string | null
    started_at: Date
    ended_at: Date
    decision_count: number
    error_count: number
    total_cost_usd: number
    total_tokens: number
    first_ledger_id: string | null
    first_at: Date | null
    first_title: string | null
  }
  const found = yield* sql<Row>`
    SELECT ${sql.literal(SESSION_COLUMNS)}
    FROM UNNEST(${texts(list.map((p) => p.agent))}, ${texts(list.map((p) => p.execution))},
                ${times(list.map((p) => p.lo))}, ${times(list.map((p) => p.hi))}) AS q(agent_id, execution_id, lo, hi)
    JOIN sessions s ON s.agent_id = q.agent_id AND (
      (q.execution_id IS NOT NULL AND s.execution_id = q.execution_id)
      OR (q.execution_id IS NULL AND s.execution_id IS NULL AND s.ended_at >= q.lo AND s.started_at <= q.hi))`
  const seen = new Set(found.map((row) => row.session_id))
  const more = followed.filter((id) => !seen.has(id))
  const rows = more.length === 0 ? found : [
    ...found,
    ...yield* sql<Row>`SELECT ${sql.literal(SESSION_COLUMNS)} FROM unnest(${uuids(more)}) AS q(id)
      CROSS JOIN LATERAL (SELECT * FROM sessions s WHERE s.session_id = q.id LIMIT 1) s`
  ]
  // a session written without its first decision (by a builder of an earlier version, during an upgrade): its first
  // decision is looked up, so that its rollup goes on from where it was
  const unknown = rows.filter((row) => row.first_ledger_id === null && row.decision_count > 0).map((row) => row.session_id)
  const looked = unknown.length === 0 ? [] : yield* sql<{ session_id: string; ledger_id: string; created_at: Date; title: string }>`
    SELECT q.id AS session_id, f.ledger_id, f.created_at, f.title FROM unnest(${uuids(unknown)}) AS q(id)
    CROSS JOIN LATERAL (SELECT d.ledger_id, d.created_at, d.title FROM decisions d WHERE d.session_id = q.id
      ORDER BY d.created_at, d.ledger_id LIMIT 1) f`
  const firsts = new Map(looked.map((f) => [f.session_id, { at: f.created_at.getTime(), ledger_id: f.ledger_id, title: f.title }]))
  return rows.map((row): LoadedSession => {
    const first = row.first_ledger_id !== null && row.first_at !== null
      ? { at: row.first_at.getTime(), ledger_id: row.first_ledger_id, title: row.first_title ?? "" }
      : firsts.get(row.session_id)
    return {
      session_id: row.session_id,
      agent_id: row.agent_id,
      execution_id: row.execution_id,
      start: row.started_at.getTime(),
      end: row.ended_at.getTime(),
      rollup: first === undefined ? undefined : {
        decision_count: row.decision_count,
        error_count: row.error_count,
        total_cost_usd: row.total_cost_usd,
        total_tokens: row.total_tokens,
        started_at: row.started_at.getTime(),
        ended_at: row.ended_at.getTime(),
        first
      }
    }
  })
})

/**
 * Absolute session rollups (the agent lock makes read-modify-write safe); new sessions are inserted. The builder's
 * summary is written until analytics has written one of its own (migration 0011).
 */
export const writeSessions = Effect.fnUntraced(function*(
  scope: WorkspaceScope,
  sessions: ReadonlyArray<{ readonly session_id: string; readonly agent_id: string; readonly execution_id: string | null; readonly rollup: SessionRollup }>
) {
  if (sessions.length === 0) return
  const sql = yield* ScopedSql
  yield* sql`
    INSERT INTO sessions (session_id, tenant_id, workspace_id, agent_id, execution_id, started_at, ended_at,
      decision_count, error_count, total_cost_usd, total_tokens, summary, first_ledger_id, first_at, first_title)
    SELECT session_id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, agent_id, execution_id, started_at,
      ended_at, decision_count, error_count, total_cost_usd, total_tokens, summary, first_ledger_id, first_at, first_title
    FROM ${zipped(sql, {
      session_id: uuids(sessions.map((s) => s.session_id)),
      agent_id: texts(sessions.map((s) => pgText(s.agent_id))),
      execution_id: texts(sessions.map((s) => s.execution_id === null ? null : pgText(s.execution_id))),
      started_at: times(sessions.map((s) => s.rollup.started_at)),
      ended_at: times(sessions.map((s) => s.rollup.ended_at)),
      decision_count: floats(sessions.map((s) => s.rollup.decision_count)),
      error_count: floats(sessions.map((s) => s.rollup.error_count)),
      total_cost_usd: floats(sessions.map((s) => s.rollup.total_cost_usd)),
      total_tokens: floats(sessions.map((s) => s.rollup.total_tokens)),
      summary: texts(sessions.map((s) => pgText(sessionSummary(s.rollup)))),
      first_ledger_id: uuids(sessions.map((s) => s.rollup.first.ledger_id)),
      first_at: times(sessions.map((s) => s.rollup.first.at)),
      first_title: texts(sessions.map((s) => pgText(s.rollup.first.title)))
    })} AS v
    ON CONFLICT (session_id) DO UPDATE SET started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
      decision_count = EXCLUDED.decision_count, error_count = EXCLUDED.error_count,
      total_cost_usd = EXCLUDED.total_cost_usd, total_tokens = EXCLUDED.total_tokens,
      summary = CASE WHEN sessions.summary_by_analytics THEN sessions.summary ELSE EXCLUDED.summary END,
      first_ledger_id = EXCLUDED.first_ledger_id, first_at = EXCLUDED.first_at, first_title = EXCLUDED.first_title`
})

/** A session's rollup with one more decision. */
export const addToRollup = (rollup: SessionRollup | undefined, item: HeldReconstruction): SessionRollup => {
  const facts = callFacts(item)
  const start = item.capture.started_at
  const first = { at: start, ledger_id: item.capture.ledger_id, title: item.derivation.title }
  return {
    decision_count: (rollup?.decision_count ?? 0) + 1,
    error_count: (rollup?.error_count ?? 0) + (facts.isError ? 1 : 0),
    total_cost_usd: (rollup?.total_cost_usd ?? 0) + (facts.costUsd ?? 0),
    total_tokens: (rollup?.total_tokens ?? 0) + facts.tokens,
    started_at: Math.min(rollup?.started_at ?? start, start),
    ended_at: Math.max(rollup?.ended_at ?? -Infinity, start + facts.latencyMs),
    first: rollup === undefined ? first : earlierFirst(rollup.first, first)
  }
}

/** Two sessions' rollups as one (a merge). */
export const foldRollups = (into: SessionRollup | undefined, from: SessionRollup | undefined): SessionRollup | undefined =>
  into === undefined ? from : from === undefined ? into : {
    decision_count: into.decision_count + from.decision_count,
    error_count: into.error_count + from.error_count,
    total_cost_usd: into.total_cost_usd + from.total_cost_usd,
    total_tokens: into.total_tokens + from.total_tokens,
    started_at: Math.min(into.started_at, from.started_at),
    ended_at: Math.max(into.ended_at, from.ended_at),
    first: earlierFirst(into.first, from.first)
  }
