/** Hourly rollups: decisions, cost, tokens, latency and quality per hour, agent, model, intent and outcome. */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { floats, texts, times, zipped } from "../../store/arrays.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import { groupBy } from "./shared.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/** The hour a time falls in, in epoch milliseconds. */
const hourOf = (date: Date) => Math.floor(date.getTime() / 3_600_000) * 3_600_000

/** Adds each fresh decision to its hour's rollup; written once per decision, when it is first materialised. */
export const writeRollups = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) {
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
  yield* sql`INSERT INTO hourly_rollups (tenant_id, workspace_id, hour, agent_id, model, intent, outcome, decisions,
      cost_usd, tokens, completion_tokens, latency_ms_sum, quality_sum)
    SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM ${zipped(sql, {
      hour: times(rollups.map((r) => r.hour)),
      agent_id: texts(rollups.map((r) => r.agent)),
      model: texts(rollups.map((r) => r.model)),
      intent: texts(rollups.map((r) => r.intent)),
      outcome: texts(rollups.map((r) => r.outcome)),
      decisions: floats(rollups.map((r) => r.decisions)),
      cost_usd: floats(rollups.map((r) => r.cost)),
      tokens: floats(rollups.map((r) => r.tokens)),
      completion_tokens: floats(rollups.map((r) => r.completion)),
      latency_ms_sum: floats(rollups.map((r) => r.latency)),
      quality_sum: floats(rollups.map((r) => r.quality))
    })} AS t
    ON CONFLICT (tenant_id, workspace_id, hour, agent_id, model, intent, outcome) DO UPDATE SET
      decisions = hourly_rollups.decisions + EXCLUDED.decisions, cost_usd = hourly_rollups.cost_usd + EXCLUDED.cost_usd,
      tokens = hourly_rollups.tokens + EXCLUDED.tokens,
      completion_tokens = hourly_rollups.completion_tokens + EXCLUDED.completion_tokens,
      latency_ms_sum = hourly_rollups.latency_ms_sum + EXCLUDED.latency_ms_sum,
      quality_sum = hourly_rollups.quality_sum + EXCLUDED.quality_sum`
})
