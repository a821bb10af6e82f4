/**
 * Idle agents: an agent with ≥ 10 decisions in the week before its last one, silent for ≥ 24 h while the workspace
 * kept working (measured to the workspace's newest decision). One insight per silent spell.
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { type Finding, HOUR_MS, round, RULES } from "./finding.ts"

/** How often, in workspace time, an idle spell already reported has its idle time brought up to date. */
const IDLE_REFRESH = "1 hour"

export const idleRule = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const rule = RULES.idle_agent
  // One statement for every idle agent. An agent whose idle spell is reported already is refreshed at most once
  // per IDLE_REFRESH, its count of decisions taken from the insight (it cannot change while the agent is silent):
  // retired agents stay idle for ever, and a pass runs whenever decisions arrive. The dedup key is formed here,
  // the one place, as the insight's key (last_seen_at in toISOString's format).
  const rows = yield* sql<{ agent_id: string; last_seen_at: Date; now: Date; dedup_key: string; recent: number; ledger_id: string; session_id: string }>`
    -- the newest search row by the index (max() under the tenant policy read the workspace's whole index)
    WITH clock AS (SELECT created_at AS now FROM decision_search ORDER BY created_at DESC LIMIT 1),
    candidates AS (
      SELECT a.agent_id, a.last_seen_at, clock.now, k.dedup_key,
        CASE WHEN i.insight_id IS NULL
          THEN (SELECT count(*)::int FROM decisions d WHERE d.agent_id = a.agent_id
            AND d.created_at > a.last_seen_at - ${`${rule.lookback_days} days`}::interval)
          ELSE (i.evidence->>'decisions_in_week_before')::int END AS recent
      FROM agents a CROSS JOIN clock
      CROSS JOIN LATERAL (SELECT 'idle_agent:' || a.agent_id || ':'
        || to_char(a.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS dedup_key) k
      LEFT JOIN insights i ON i.dedup_key = k.dedup_key
      WHERE a.last_seen_at <= clock.now - ${`${rule.idle_hours} hours`}::interval
        AND (i.insight_id IS NULL OR i.window_end <= clock.now - ${IDLE_REFRESH}::interval))
    SELECT c.agent_id, c.last_seen_at, c.now, c.dedup_key, c.recent, l.ledger_id::text AS ledger_id, l.session_id::text AS session_id
    FROM candidates c
    CROSS JOIN LATERAL (SELECT d.ledger_id, d.session_id FROM decisions d WHERE d.agent_id = c.agent_id
      ORDER BY d.created_at DESC, d.ledger_id DESC LIMIT 1) l
    WHERE c.recent >= ${rule.min_decisions}`
  const findings: Array<Finding> = []
  for (const row of rows) {
    const idleHours = round((row.now.getTime() - row.last_seen_at.getTime()) / HOUR_MS, 1)
    findings.push({
      type: "idle_agent",
      dedupKey: row.dedup_key,
      severity: "info",
      title: `Idle agent: ${row.agent_id} has made no call for ${idleHours} h (last at ${row.last_seen_at.toISOString()}) while the workspace kept working`,
      evidence: {
        idle_hours: idleHours,
        last_seen_at: row.last_seen_at.toISOString(),
        workspace_latest_decision_at: row.now.toISOString(),
        decisions_in_week_before: row.recent,
        rule: `≥ ${rule.min_decisions} decisions in the ${rule.lookback_days} days before its last one, then none for ≥ ${rule.idle_hours} h ` +
          `before the workspace's newest decision`
      },
      windowStart: row.last_seen_at,
      windowEnd: row.now,
      agentIds: [row.agent_id],
      sessionIds: [row.session_id],
      ledgerIds: [row.ledger_id]
    })
  }
  return findings
})

