/**
 * Insight detectors: a supervised fiber that looks at decisions as they are materialised (keyset on
 * `decision_search.seq` per workspace) and writes deduplicated insights. Each rule is deterministic, uses the
 * data's own time (decision timestamps, never the wall clock), and records in `evidence` the figures it compared
 * and the thresholds it applied, so a person can recompute the verdict:
 *
 *   cost_spike          an agent's cost in one hour ≥ 3× its mean over its active hours of the previous 24 h
 *                       (at least 3 of them), and at least $0.01 above it
 *   error_rate_spike    an agent's hour with ≥ 5 errors, an error rate ≥ 50 %, and ≥ 3× its previous-24 h rate
 *   loop                one session repeating the same call (same newest input and same answer, ids and numbers
 *                       aside) ≥ 4 times within 15 minutes
 *   low_quality_streak  ≥ 5 consecutive answered (non-error) decisions of a session with quality < 0.4
 *   latency_regression  an agent+model hour (≥ 4 answered calls) with mean latency ≥ 2× the previous 24 h
 *                       (≥ 10 calls) and at least 2 s slower
 *   model_right_sizing  ≥ 20 simple calls (classification, extraction, translation, conversation; answers ≤ 300
 *                       tokens on average) in one UTC day on a model priced ≥ 4× its family's small model
 *   idle_agent          an agent with ≥ 10 decisions in the week before its last one, silent for ≥ 24 h while
 *                       the workspace kept working (measured to the workspace's newest decision); one insight per
 *                       silent spell, its idle time brought up to date at most hourly
 *
 * A finding detected again (more decisions in the same hour, a loop growing) updates its insight: the dedup key
 * names the rule and what it is about. Each pass reads only what its new decisions can change — their hours and
 * days, and a bounded window of their sessions — so its cost does not grow with sessions or workspaces. The rules are
 * in `detect/`; this file runs the passes and writes what they find.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { every } from "../supervision/supervise.ts"
import { type Finding, HOUR_MS, type NewDecision } from "./detect/finding.ts"
import { agentHourRules, latencyRule, rightSizingRule } from "./detect/hourly.ts"
import { idleRule } from "./detect/idle.ts"
import { loopRule } from "./detect/loops.ts"
import { streakRule } from "./detect/streaks.ts"
import { allWorkspaces, claimWorkspace } from "./lease.ts"
import { stableUuid } from "./text.ts"
import { yieldingToIngest } from "./yieldToIngest.ts"

/** Decisions looked at per detector pass. */
const PASS_SIZE = 2_000

const insightsDetected = Metric.counter("ledger_analytics_insights_detected_total", {
  description: "Insights written or refreshed by the detectors",
  incremental: true
})

const hourOf = (date: Date) => new Date(Math.floor(date.getTime() / HOUR_MS) * HOUR_MS)
const dayOf = (date: Date) => new Date(Math.floor(date.getTime() / (24 * HOUR_MS)) * 24 * HOUR_MS)

const writeFindings = Effect.fnUntraced(function*(scope: WorkspaceScope, findings: ReadonlyArray<Finding>) {
  if (findings.length === 0) return
  const sql = yield* ScopedSql
  const records = findings.map((f) => ({
    insight_id: stableUuid(`${scope.tenant_id}/${scope.workspace_id}/insight/${f.dedupKey}`),
    dedup_key: f.dedupKey,
    type: f.type,
    severity: f.severity,
    title: f.title,
    evidence: f.evidence,
    window_start: f.windowStart.toISOString(),
    window_end: f.windowEnd.toISOString(),
    agent_ids: f.agentIds,
    session_ids: f.sessionIds,
    ledger_ids: f.ledgerIds
  }))
  yield* sql`INSERT INTO insights (insight_id, tenant_id, workspace_id, dedup_key, type, severity, title, evidence,
      window_start, window_end, agent_ids, session_ids, ledger_ids)
    SELECT t.insight_id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.dedup_key, t.type, t.severity, t.title,
      t.evidence, t.window_start, t.window_end, t.agent_ids, t.session_ids, t.ledger_ids
    FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS t(insight_id uuid, dedup_key text, type text,
      severity text, title text, evidence jsonb, window_start timestamptz, window_end timestamptz, agent_ids text[],
      session_ids text[], ledger_ids text[])
    ON CONFLICT (tenant_id, workspace_id, dedup_key) DO UPDATE SET severity = EXCLUDED.severity, title = EXCLUDED.title,
      evidence = EXCLUDED.evidence, window_start = EXCLUDED.window_start, window_end = EXCLUDED.window_end,
      agent_ids = EXCLUDED.agent_ids, session_ids = EXCLUDED.session_ids, ledger_ids = EXCLUDED.ledger_ids,
      updated_at = now()
    -- a loop pass sees the windows around new decisions only: a shorter run there leaves the longer one reported
    WHERE insights.type <> 'loop'
      OR (EXCLUDED.evidence->>'repeats')::int >= coalesce((insights.evidence->>'repeats')::int, 0)`
  yield* Metric.update(insightsDetected, findings.length)
})

/** One detector pass over a workspace's newly materialised decisions; yields how many it looked at. */
const detectWorkspace = Effect.fnUntraced(function*(scope: WorkspaceScope) {
  const sql = yield* ScopedSql
  const [progress] = yield* sql<{ detected_seq: number }>`SELECT detected_seq::float8 AS detected_seq FROM analytics_progress`
  const fresh = yield* sql<NewDecision>`
    SELECT seq::float8 AS seq, ledger_id::text AS ledger_id, session_id::text AS session_id, agent_id, created_at, model, call_signature
    FROM decision_search WHERE seq > ${progress?.detected_seq ?? 0} ORDER BY seq LIMIT ${PASS_SIZE}`
  if (fresh.length === 0) return 0
  const byKey = <A>(items: ReadonlyArray<A>) => [...new Map(items.map((item) => [JSON.stringify(item), item])).values()]
  const findings = [
    ...(yield* agentHourRules(byKey(fresh.map((d) => ({ agent_id: d.agent_id, hour: hourOf(d.created_at) }))))),
    ...(yield* latencyRule(byKey(fresh.map((d) => ({ agent_id: d.agent_id, model: d.model, hour: hourOf(d.created_at) }))))),
    ...(yield* rightSizingRule(byKey(fresh.map((d) => ({ agent_id: d.agent_id, model: d.model, day: dayOf(d.created_at) }))))),
    ...(yield* loopRule(fresh)),
    ...(yield* streakRule(fresh)),
    ...(yield* idleRule)
  ]
  yield* writeFindings(scope, findings)
  yield* sql`INSERT INTO analytics_progress (tenant_id, workspace_id, detected_seq)
    VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${fresh.at(-1)!.seq})
    ON CONFLICT (tenant_id, workspace_id) DO UPDATE
    SET detected_seq = greatest(analytics_progress.detected_seq, EXCLUDED.detected_seq), updated_at = now()`
  return fresh.length
})

export class Detectors extends Context.Service<Detectors, {
  /** One detector pass over every workspace whose analytics lease this process holds (what the fiber runs); yields decisions looked at. */
  readonly round: Effect.Effect<number, DatabaseUnavailable>
  /** Passes until every materialised decision has been looked at (tests, tools). */
  readonly catchUp: Effect.Effect<number, DatabaseUnavailable>
}>()("ledger/analytics/Detectors") {
  static readonly layer = Layer.effect(
    Detectors,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const workspaces = allWorkspaces(tenantSql)
      const pass = (scope: WorkspaceScope) => tenantSql.write(scope, detectWorkspace(scope))
      const round = Effect.gen(function*() {
        let total = 0
        for (const scope of yield* workspaces) {
          if (yield* claimWorkspace(tenantSql, scope)) total += yield* pass(scope)
        }
        return total
      })
      const catchUp = Effect.gen(function*() {
        let total = 0
        for (const scope of yield* workspaces) {
          for (;;) {
            const looked = yield* pass(scope)
            total += looked
            if (looked < PASS_SIZE) break
          }
        }
        return total
      })
      return Detectors.of({ round: round.pipe(Effect.withSpan("Detectors.round")), catchUp: catchUp.pipe(Effect.withSpan("Detectors.catchUp")) })
    })
  )

  /** The supervised fiber: a pass every LEDGER_ANALYTICS_INTERVAL_MS for the life of the layer, yielding to ingest. */
  static readonly fiber = Layer.effectDiscard(Effect.gen(function*() {
    const detectors = yield* Detectors
    const { analytics } = yield* LedgerConfig
    yield* every("analytics-detectors", yield* yieldingToIngest("analytics-detectors", () => detectors.round), analytics.intervalMs)
  }))
}
