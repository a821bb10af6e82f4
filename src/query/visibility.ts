/**
 * What each caller reads as agents and sessions. Row-level security limits a restricted member to their own
 * decisions, but the `agents` and `sessions` rollups count everyone's; so for them the same columns are
 * aggregated here from the decisions they may see, and everyone else reads the stored rollups.
 */
import type { Statement } from "effect/sql"
import type { Principal } from "../domain/principal.ts"
import { SESSION_COLUMNS, VISIBLE_SESSION_COLUMNS } from "./rows.ts"

export const isRestricted = (principal: Principal) => principal.role === "restricted"

/**
 * The member's own decisions. RLS already enforces it; naming their user id again lets the planner read them
 * through the `decisions_user` index instead of filtering the whole workspace.
 */
export const ownDecisions = (sql: Statement.Constructor, principal: Principal) => sql`user_id = ${principal.user_id}::uuid`

/**
 * A restricted member's agents, aggregated from the decisions they may see: per session first, then per agent (two
 * hash aggregates, where `count(DISTINCT session_id)` sorted every decision), from the member index alone (its
 * included columns, migration 0017).
 */
const visibleAgents = (sql: Statement.Constructor, principal: Principal) =>
  sql`(SELECT v.*, (SELECT a.agent_name FROM agents a WHERE a.agent_id = v.agent_id) AS agent_name
    FROM (SELECT agent_id, sum(n)::bigint AS decision_count, count(*) AS session_count, sum(errors)::bigint AS error_count,
            coalesce(sum(cost), 0) AS total_cost_usd, coalesce(sum(confidence), 0) AS confidence_sum,
            min(first_at) AS first_seen_at, max(last_at) AS last_seen_at
          FROM (SELECT agent_id, session_id, count(*) AS n, count(*) FILTER (WHERE outcome = 'error') AS errors,
                  sum(cost_usd) AS cost, sum(confidence) AS confidence, min(created_at) AS first_at, max(created_at) AS last_at
                FROM decisions WHERE ${ownDecisions(sql, principal)} GROUP BY agent_id, session_id) per_session
          GROUP BY agent_id) v) agents`

/** A restricted member's sessions (within `scope`), aggregated from the decisions they may see. */
const visibleSessions = (sql: Statement.Constructor, principal: Principal, scope: Statement.Fragment) =>
  sql`(SELECT v.*, (SELECT s.execution_id FROM sessions s WHERE s.session_id = v.session_id) AS execution_id,
      NULL::text AS summary
    FROM (SELECT session_id, min(agent_id) AS agent_id, min(created_at) AS started_at,
            max(created_at + latency_ms * interval '1 millisecond') AS ended_at, count(*) AS decision_count,
            count(*) FILTER (WHERE outcome = 'error') AS error_count, coalesce(sum(cost_usd), 0) AS total_cost_usd,
            coalesce(sum((usage->>'total_tokens')::bigint), 0) AS total_tokens,
            (array_agg(ledger_id::text ORDER BY created_at, ledger_id))[1] AS first_ledger_id,
            (array_agg(title ORDER BY created_at, ledger_id))[1] AS first_title
          FROM decisions WHERE ${scope} AND ${ownDecisions(sql, principal)} GROUP BY session_id) v) sessions`

/** The caller's agents, as a FROM item named `agents`. */
export const agentsSource = (sql: Statement.Constructor, principal: Principal) =>
  isRestricted(principal) ? visibleAgents(sql, principal) : sql.literal("agents")

/** The columns of the caller's sessions (a restricted view adds what its summary is written from). */
export const sessionColumns = (principal: Principal) => isRestricted(principal) ? VISIBLE_SESSION_COLUMNS : SESSION_COLUMNS

/** The caller's sessions within `scope` (a condition on `agent_id` / `session_id`), as a FROM item named `sessions`. */
export const sessionsSource = (sql: Statement.Constructor, principal: Principal, scope: Statement.Fragment) =>
  isRestricted(principal)
    ? visibleSessions(sql, principal, scope)
    : sql`(SELECT ${sql.literal(SESSION_COLUMNS)} FROM sessions WHERE ${scope}) sessions`
