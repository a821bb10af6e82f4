/**
 * The rules over an agent's hours and days, read from the hourly rollups: cost and error spikes, latency regressions
 * (each hour against the agent's previous 24 hours) and model right-sizing (a UTC day of simple calls on a costly
 * model). A pass evaluates only the hours and days its new decisions fall in.
 */
import { Effect } from "effect"
import { findPrice, type PriceMatch } from "../../derive/pricing.ts"
import type { ProviderType } from "../../domain/capture.ts"
import { ScopedSql } from "../../store/TenantSql.ts"
import { type Finding, HOUR_MS, LINKED_DECISIONS, round, RULES, unique } from "./finding.ts"

const usd = (value: number) => `$${value < 0.01 ? value.toPrecision(2) : value.toFixed(2)}`
const utcHour = (date: Date) => `${date.toISOString().slice(0, 13).replace("T", " ")}:00 UTC`

/** Per price family, the small model right-sizing suggests. */
const SMALL_MODELS: Record<PriceMatch["family"], { readonly provider: ProviderType; readonly model: string }> = {
  openai: { provider: "openai", model: "gpt-4o-mini" },
  anthropic: { provider: "anthropic", model: "claude-haiku-4-5" },
  gemini: { provider: "gemini", model: "gemini-2.5-flash-lite" },
  bedrock: { provider: "bedrock", model: "amazon.nova-lite-v1:0" }
}

const PROVIDER_TYPES: ReadonlySet<string> = new Set(["openai", "azure", "anthropic", "gemini", "bedrock"])

/** The decisions of one agent in one hour (optionally one model, optionally only errors or only answered). */
const decisionsInHour = Effect.fnUntraced(function*(agentId: string, hour: Date, options: { readonly model?: string; readonly outcome?: "error" | "answered"; readonly order: "cost" | "latency" | "time" }) {
  const sql = yield* ScopedSql
  const end = new Date(hour.getTime() + HOUR_MS)
  const model = options.model === undefined ? sql`true` : sql`provider || '/' || model = ${options.model}`
  const outcome = options.outcome === "error" ? sql`outcome = 'error'` : options.outcome === "answered" ? sql`outcome <> 'error'` : sql`true`
  const order = options.order === "cost" ? sql`coalesce(cost_usd, 0) DESC` : options.order === "latency" ? sql`latency_ms DESC` : sql`created_at`
  return yield* sql<{ ledger_id: string; session_id: string }>`
    SELECT ledger_id::text AS ledger_id, session_id::text AS session_id FROM decisions
    WHERE agent_id = ${agentId} AND created_at >= ${hour.toISOString()}::timestamptz AND created_at < ${end.toISOString()}::timestamptz
      AND ${model} AND ${outcome}
    ORDER BY ${order}, ledger_id LIMIT ${LINKED_DECISIONS}`
})

const links = (rows: ReadonlyArray<{ ledger_id: string; session_id: string }>) => ({
  sessionIds: unique(rows.map((row) => row.session_id)),
  ledgerIds: rows.map((row) => row.ledger_id)
})

export const agentHourRules = Effect.fnUntraced(function*(agentHours: ReadonlyArray<{ agent_id: string; hour: Date }>) {
  if (agentHours.length === 0) return []
  const sql = yield* ScopedSql
  const rows = yield* sql<{
    agent_id: string
    hour: Date
    decisions: number
    cost: number
    errors: number
    base_hours: number
    base_cost: number
    base_decisions: number
    base_errors: number
  }>`
    WITH t AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(agentHours)}::jsonb) AS t(agent_id text, hour timestamptz))
    SELECT t.agent_id, t.hour, cur.decisions, cur.cost, cur.errors, base.hours AS base_hours, base.cost AS base_cost,
      base.decisions AS base_decisions, base.errors AS base_errors
    FROM t
    CROSS JOIN LATERAL (SELECT coalesce(sum(decisions), 0)::int AS decisions, coalesce(sum(cost_usd), 0)::float8 AS cost,
        coalesce(sum(decisions) FILTER (WHERE outcome = 'error'), 0)::int AS errors
      FROM hourly_rollups r WHERE r.agent_id = t.agent_id AND r.hour = t.hour) cur
    CROSS JOIN LATERAL (SELECT count(DISTINCT hour)::int AS hours, coalesce(sum(cost_usd), 0)::float8 AS cost,
        coalesce(sum(decisions), 0)::int AS decisions,
        coalesce(sum(decisions) FILTER (WHERE outcome = 'error'), 0)::int AS errors
      FROM hourly_rollups r WHERE r.agent_id = t.agent_id AND r.hour >= t.hour - interval '24 hours' AND r.hour < t.hour) base`
  const findings: Array<Finding> = []
  for (const row of rows) {
    const window = { windowStart: row.hour, windowEnd: new Date(row.hour.getTime() + HOUR_MS) }
    const cost = RULES.cost_spike
    const baseline = row.base_hours > 0 ? row.base_cost / row.base_hours : 0
    if (row.base_hours >= cost.min_baseline_active_hours && row.cost >= cost.factor * baseline && row.cost - baseline >= cost.min_increase_usd) {
      const ratio = baseline === 0 ? null : round(row.cost / baseline, 1)
      findings.push({
        type: "cost_spike",
        dedupKey: `cost_spike:${row.agent_id}:${row.hour.toISOString()}`,
        severity: ratio === null || ratio >= cost.critical_factor ? "critical" : "warning",
        title: `Cost spike: ${row.agent_id} spent ${usd(row.cost)} in the hour from ${utcHour(row.hour)}` +
          (ratio === null ? ", with no cost in its baseline" : `, ${ratio}× its usual ${usd(baseline)} per active hour`),
        evidence: {
          hour_cost_usd: round(row.cost, 6),
          hour_decisions: row.decisions,
          baseline_mean_hourly_cost_usd: round(baseline, 6),
          baseline_active_hours: row.base_hours,
          baseline_window_hours: cost.baseline_hours,
          ratio,
          rule: `hour cost ≥ ${cost.factor}× the mean over active hours of the previous ${cost.baseline_hours} h (≥ ${cost.min_baseline_active_hours} of them) and ≥ $${cost.min_increase_usd} above it`
        },
        ...window,
        agentIds: [row.agent_id],
        ...links(yield* decisionsInHour(row.agent_id, row.hour, { order: "cost" }))
      })
    }
    const errors = RULES.error_rate_spike
    const rate = row.decisions === 0 ? 0 : row.errors / row.decisions
    const baseRate = row.base_decisions === 0 ? 0 : row.base_errors / row.base_decisions
    if (row.errors >= errors.min_errors && rate >= errors.min_rate && rate >= errors.factor * baseRate) {
      findings.push({
        type: "error_rate_spike",
        dedupKey: `error_rate_spike:${row.agent_id}:${row.hour.toISOString()}`,
        severity: rate >= errors.critical_rate ? "critical" : "warning",
        title: `Error spike: ${row.errors} of ${row.decisions} calls of ${row.agent_id} failed in the hour from ${utcHour(row.hour)} ` +
          `(${round(rate * 100, 1)}% vs ${round(baseRate * 100, 1)}% before)`,
        evidence: {
          hour_errors: row.errors,
          hour_decisions: row.decisions,
          error_rate: round(rate, 4),
          baseline_error_rate: round(baseRate, 4),
          baseline_decisions: row.base_decisions,
          baseline_window_hours: errors.baseline_hours,
          rule: `≥ ${errors.min_errors} errors, error rate ≥ ${errors.min_rate * 100}% and ≥ ${errors.factor}× the previous ${errors.baseline_hours} h`
        },
        ...window,
        agentIds: [row.agent_id],
        ...links(yield* decisionsInHour(row.agent_id, row.hour, { outcome: "error", order: "time" }))
      })
    }
  }
  return findings
})

export const latencyRule = Effect.fnUntraced(function*(keys: ReadonlyArray<{ agent_id: string; model: string; hour: Date }>) {
  if (keys.length === 0) return []
  const sql = yield* ScopedSql
  const rule = RULES.latency_regression
  const rows = yield* sql<{ agent_id: string; model: string; hour: Date; n: number; mean: number | null; base_n: number; base_mean: number | null }>`
    WITH t AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(keys)}::jsonb) AS t(agent_id text, model text, hour timestamptz))
    SELECT t.agent_id, t.model, t.hour, cur.n, cur.mean, base.n AS base_n, base.mean AS base_mean
    FROM t
    CROSS JOIN LATERAL (SELECT coalesce(sum(decisions), 0)::int AS n, (sum(latency_ms_sum) / nullif(sum(decisions), 0))::float8 AS mean
      FROM hourly_rollups r WHERE r.agent_id = t.agent_id AND r.model = t.model AND r.hour = t.hour AND r.outcome <> 'error') cur
    CROSS JOIN LATERAL (SELECT coalesce(sum(decisions), 0)::int AS n, (sum(latency_ms_sum) / nullif(sum(decisions), 0))::float8 AS mean
      FROM hourly_rollups r WHERE r.agent_id = t.agent_id AND r.model = t.model AND r.outcome <> 'error'
        AND r.hour >= t.hour - interval '24 hours' AND r.hour < t.hour) base`
  const findings: Array<Finding> = []
  for (const row of rows) {
    if (row.mean === null || row.base_mean === null || row.n < rule.min_calls || row.base_n < rule.min_baseline_calls) continue
    if (row.mean < rule.factor * row.base_mean || row.mean - row.base_mean < rule.min_increase_ms) continue
    const ratio = round(row.mean / row.base_mean, 1)
    findings.push({
      type: "latency_regression",
      dedupKey: `latency_regression:${row.agent_id}:${row.model}:${row.hour.toISOString()}`,
      severity: ratio >= rule.critical_factor ? "critical" : "warning",
      title: `Latency regression: ${row.agent_id} on ${row.model} averaged ${round(row.mean / 1000, 1)} s in the hour from ` +
        `${utcHour(row.hour)}, ${ratio}× its usual ${round(row.base_mean / 1000, 1)} s`,
      evidence: {
        model: row.model,
        hour_mean_latency_ms: Math.round(row.mean),
        hour_calls: row.n,
        baseline_mean_latency_ms: Math.round(row.base_mean),
        baseline_calls: row.base_n,
        baseline_window_hours: rule.baseline_hours,
        ratio,
        rule: `≥ ${rule.min_calls} answered calls with mean latency ≥ ${rule.factor}× the previous ${rule.baseline_hours} h ` +
          `(≥ ${rule.min_baseline_calls} calls) and ≥ ${rule.min_increase_ms} ms slower`
      },
      windowStart: row.hour,
      windowEnd: new Date(row.hour.getTime() + HOUR_MS),
      agentIds: [row.agent_id],
      ...links(yield* decisionsInHour(row.agent_id, row.hour, { model: row.model, outcome: "answered", order: "latency" }))
    })
  }
  return findings
})

/** `openai/gpt-4.1` → its price and the family's small model's price, when it is priced at all. */
const priceOfRoutedModel = (routed: string) => {
  const slash = routed.indexOf("/")
  const prefix = routed.slice(0, slash)
  const type = (PROVIDER_TYPES.has(prefix) ? prefix : "openai_compatible") as ProviderType
  const current = findPrice(type, routed.slice(slash + 1))
  if (current === undefined) return undefined
  const target = SMALL_MODELS[current.family]
  const small = findPrice(target.provider, target.model)
  return small === undefined ? undefined : { current, small, smallId: `${target.provider}/${target.model}` }
}

export const rightSizingRule = Effect.fnUntraced(function*(keys: ReadonlyArray<{ agent_id: string; model: string; day: Date }>) {
  const rule = RULES.model_right_sizing
  const expensive = keys.flatMap((key) => {
    const prices = priceOfRoutedModel(key.model)
    return prices !== undefined && prices.current.price.input >= rule.min_price_factor * prices.small.price.input ? [{ ...key, prices }] : []
  })
  if (expensive.length === 0) return []
  const sql = yield* ScopedSql
  const rows = yield* sql<{ agent_id: string; model: string; day: Date; n: number; cost: number; tokens: number; completion: number }>`
    WITH t AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(expensive.map(({ agent_id, model, day }) => ({ agent_id, model, day })))}::jsonb)
      AS t(agent_id text, model text, day timestamptz))
    SELECT t.agent_id, t.model, t.day, coalesce(sum(r.decisions), 0)::int AS n, coalesce(sum(r.cost_usd), 0)::float8 AS cost,
      coalesce(sum(r.tokens), 0)::float8 AS tokens, coalesce(sum(r.completion_tokens), 0)::float8 AS completion
    FROM t LEFT JOIN hourly_rollups r ON r.agent_id = t.agent_id AND r.model = t.model AND r.hour >= t.day
      AND r.hour < t.day + interval '1 day' AND r.intent = ANY(${[...rule.simple_intents]}::text[]) AND r.outcome <> 'error'
    GROUP BY t.agent_id, t.model, t.day`
  const findings: Array<Finding> = []
  for (const row of rows) {
    const prices = expensive.find((key) => key.agent_id === row.agent_id && key.model === row.model)!.prices
    const avgCompletion = row.n === 0 ? 0 : row.completion / row.n
    if (row.n < rule.min_calls || avgCompletion > rule.max_avg_completion_tokens) continue
    const prompt = row.tokens - row.completion
    const smallCost = (prompt * prices.small.price.input + row.completion * prices.small.price.output) / 1_000_000
    const dayEnd = new Date(row.day.getTime() + 24 * HOUR_MS)
    const linked = yield* sql<{ ledger_id: string; session_id: string }>`
      SELECT ledger_id::text AS ledger_id, session_id::text AS session_id FROM decisions
      WHERE agent_id = ${row.agent_id} AND provider || '/' || model = ${row.model}
        AND created_at >= ${row.day.toISOString()}::timestamptz AND created_at < ${dayEnd.toISOString()}::timestamptz
        AND intent = ANY(${[...rule.simple_intents]}::text[]) AND outcome <> 'error'
      ORDER BY created_at, ledger_id LIMIT ${LINKED_DECISIONS}`
    findings.push({
      type: "model_right_sizing",
      dedupKey: `model_right_sizing:${row.agent_id}:${row.model}:${row.day.toISOString().slice(0, 10)}`,
      severity: "info",
      title: `Right-size: ${row.agent_id} made ${row.n} simple calls on ${row.model} on ${row.day.toISOString().slice(0, 10)}; ` +
        `${prices.smallId} would have cost about ${usd(smallCost)} instead of ${usd(row.cost)}`,
      evidence: {
        model: row.model,
        simple_calls: row.n,
        intents: rule.simple_intents,
        avg_completion_tokens: Math.round(avgCompletion),
        cost_usd: round(row.cost, 6),
        suggested_model: prices.smallId,
        estimated_cost_usd: round(smallCost, 6),
        estimated_saving_usd: round(row.cost - smallCost, 6),
        input_price_per_mtok: prices.current.price.input,
        suggested_input_price_per_mtok: prices.small.price.input,
        rule: `≥ ${rule.min_calls} calls of intents ${rule.simple_intents.join("/")} in a UTC day with answers ≤ ` +
          `${rule.max_avg_completion_tokens} tokens on average, on a model whose input price is ≥ ${rule.min_price_factor}× the family's small model`
      },
      windowStart: row.day,
      windowEnd: dayEnd,
      agentIds: [row.agent_id],
      ...links(linked)
    })
  }
  return findings
})

