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
 * names the rule and what it is about.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { findPrice, type PriceMatch } from "../builder/derive/pricing.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { ProviderType } from "../domain/capture.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { allWorkspaces, claimWorkspace } from "./lease.ts"
import type { InsightType, Severity } from "./schema.ts"
import { every } from "../supervision/supervise.ts"
import { yieldingToIngest } from "./yieldToIngest.ts"
import { stableUuid } from "./text.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

export const RULES = {
  cost_spike: { factor: 3, min_increase_usd: 0.01, baseline_hours: 24, min_baseline_active_hours: 3, critical_factor: 10 },
  error_rate_spike: { min_errors: 5, min_rate: 0.5, factor: 3, baseline_hours: 24, critical_rate: 0.8 },
  loop: { min_repeats: 4, window_minutes: 15, critical_repeats: 8 },
  low_quality_streak: { min_length: 5, max_quality: 0.4 },
  latency_regression: { min_calls: 4, min_baseline_calls: 10, factor: 2, min_increase_ms: 2_000, baseline_hours: 24, critical_factor: 4 },
  model_right_sizing: {
    min_calls: 20,
    max_avg_completion_tokens: 300,
    min_price_factor: 4,
    simple_intents: ["classification", "extraction", "translation", "conversation"]
  },
  idle_agent: { idle_hours: 24, min_decisions: 10, lookback_days: 7 }
} as const

/** Per price family, the small model right-sizing suggests. */
const SMALL_MODELS: Record<PriceMatch["family"], { readonly provider: ProviderType; readonly model: string }> = {
  openai: { provider: "openai", model: "gpt-4o-mini" },
  anthropic: { provider: "anthropic", model: "claude-haiku-4-5" },
  gemini: { provider: "gemini", model: "gemini-2.5-flash-lite" },
  bedrock: { provider: "bedrock", model: "amazon.nova-lite-v1:0" }
}

const PROVIDER_TYPES: ReadonlySet<string> = new Set(["openai", "azure", "anthropic", "gemini", "bedrock"])

/** Decisions looked at per detector pass. */
const PASS_SIZE = 2_000
const LINKED_DECISIONS = 50
/** Most repeats of one call a loop pass reads (the newest); a loop past it is reported at this many repeats. */
const LOOP_READ_LIMIT = 200

const insightsDetected = Metric.counter("ledger_analytics_insights_detected_total", {
  description: "Insights written or refreshed by the detectors",
  incremental: true
})

interface Finding {
  readonly type: InsightType
  readonly dedupKey: string
  readonly severity: Severity
  readonly title: string
  readonly evidence: Record<string, unknown>
  readonly windowStart: Date
  readonly windowEnd: Date
  readonly agentIds: ReadonlyArray<string>
  readonly sessionIds: ReadonlyArray<string>
  readonly ledgerIds: ReadonlyArray<string>
}

interface NewDecision {
  readonly seq: number
  readonly session_id: string
  readonly agent_id: string
  readonly created_at: Date
  readonly model: string
  readonly call_signature: string
}

const HOUR_MS = 3_600_000
const hourOf = (date: Date) => new Date(Math.floor(date.getTime() / HOUR_MS) * HOUR_MS)
const dayOf = (date: Date) => new Date(Math.floor(date.getTime() / (24 * HOUR_MS)) * 24 * HOUR_MS)
const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits
const usd = (value: number) => `$${value < 0.01 ? value.toPrecision(2) : value.toFixed(2)}`
const utcHour = (date: Date) => `${date.toISOString().slice(0, 13).replace("T", " ")}:00 UTC`
const unique = <A>(items: ReadonlyArray<A>) => [...new Set(items)]

/** The decisions of one agent in one hour (optionally one model, optionally only errors or only answered). */
const decisionsInHour = (agentId: string, hour: Date, options: { readonly model?: string; readonly outcome?: "error" | "answered"; readonly order: "cost" | "latency" | "time" }) =>
  Effect.gen(function*() {
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

// ---------------------------------------------------------------------------------------------------------
// Rules

const agentHourRules = (agentHours: ReadonlyArray<{ agent_id: string; hour: Date }>) =>
  Effect.gen(function*() {
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

const latencyRule = (keys: ReadonlyArray<{ agent_id: string; model: string; hour: Date }>) =>
  Effect.gen(function*() {
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

const rightSizingRule = (keys: ReadonlyArray<{ agent_id: string; model: string; day: Date }>) =>
  Effect.gen(function*() {
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

/**
 * Loops and low-quality streaks in the sessions of new decisions. Only what a new decision can change is read, so a
 * pass costs the same on the thousandth decision of a session as on the fifth: for loops, the session's repeats of
 * each new decision's call signature within the loop window around the new ones — only a window holding a new
 * decision can hold a longer run than the one reported already (writeFindings keeps the longer), and at most
 * LOOP_READ_LIMIT of them, the newest (a loop at hundreds of calls a second re-read in full made every pass cost
 * more than the last: 0.1–1 s a pass at 500 calls/s, bench/RESULTS.md); for streaks, the session's answered
 * decisions from the last one that broke a streak (quality at or above the threshold) before the earliest new
 * decision. Both lists are probed session by session (LATERAL with ORDER BY, which Postgres does not flatten into a
 * join over the workspace).
 */
const sessionRules = (fresh: ReadonlyArray<NewDecision>) =>
  Effect.gen(function*() {
    if (fresh.length === 0) return []
    const sql = yield* ScopedSql
    const findings: Array<Finding> = []
    const loop = RULES.loop
    // per session and signature, the span of its new decisions: windows holding one of them reach a window before
    // the earliest and after the latest
    const spans = new Map<string, { session_id: string; signature: string; from: number; to: number }>()
    for (const d of fresh) {
      const key = `${d.session_id}/${d.call_signature}`
      const at = d.created_at.getTime()
      const span = spans.get(key) ?? { session_id: d.session_id, signature: d.call_signature, from: at, to: at }
      span.from = Math.min(span.from, at)
      span.to = Math.max(span.to, at)
      spans.set(key, span)
    }
    const windowMs = loop.window_minutes * 60_000
    const groups = [...spans.values()]
    const repeats = yield* sql<{ session_id: string; agent_id: string; signature: string; ledger_ids: Array<string>; times: Array<Date> }>`
      SELECT f.session_id::text AS session_id, min(r.agent_id) AS agent_id, f.signature,
        array_agg(r.ledger_id::text ORDER BY r.created_at, r.ledger_id) AS ledger_ids,
        array_agg(r.created_at ORDER BY r.created_at, r.ledger_id) AS times
      FROM unnest(${groups.map((g) => g.session_id)}::uuid[], ${groups.map((g) => g.signature)}::text[],
        ${groups.map((g) => new Date(g.from - windowMs).toISOString())}::timestamptz[],
        ${groups.map((g) => new Date(g.to + windowMs).toISOString())}::timestamptz[]) AS f(session_id, signature, from_at, to_at)
      CROSS JOIN LATERAL (
        SELECT r.agent_id, r.ledger_id, r.created_at FROM decision_search r
        WHERE r.session_id = f.session_id AND r.call_signature = f.signature
          AND r.created_at >= f.from_at AND r.created_at <= f.to_at
        ORDER BY r.created_at DESC, r.ledger_id DESC LIMIT ${LOOP_READ_LIMIT}) r
      GROUP BY f.session_id, f.signature HAVING count(*) >= ${loop.min_repeats}`
    // the longest run of repeats inside one window, per group
    const runs = repeats.flatMap((group) => {
      let best = { from: 0, to: -1 }
      for (let from = 0, to = 0; to < group.times.length; to++) {
        while (group.times[to]!.getTime() - group.times[from]!.getTime() > loop.window_minutes * 60_000) from++
        if (to - from > best.to - best.from) best = { from, to }
      }
      return best.to - best.from + 1 < loop.min_repeats
        ? []
        : [{ group, ledgerIds: group.ledger_ids.slice(best.from, best.to + 1), first: group.times[best.from]!, last: group.times[best.to]! }]
    })
    // costs and titles of the repeats, key by key (a join with decisions could be planned as a scan of the workspace)
    const facts = new Map<string, { readonly cost_usd: number | null; readonly title: string }>()
    if (runs.length > 0) {
      const rows = yield* sql<{ ledger_id: string; cost_usd: number | null; title: string }>`
        SELECT x.* FROM unnest(${runs.flatMap((run) => run.ledgerIds)}::uuid[]) AS q(id) CROSS JOIN LATERAL (
          SELECT d.ledger_id::text AS ledger_id, d.cost_usd, d.title FROM decisions d WHERE d.ledger_id = q.id LIMIT 1) x`
      for (const row of rows) facts.set(row.ledger_id, row)
    }
    for (const { first, group, last, ledgerIds } of runs) {
      const count = ledgerIds.length
      const wasted = ledgerIds.slice(1).reduce((sum, id) => sum + (facts.get(id)?.cost_usd ?? 0), 0)
      findings.push({
        type: "loop",
        dedupKey: `loop:${group.session_id}:${group.signature}`,
        severity: count >= loop.critical_repeats ? "critical" : "warning",
        title: `Loop: ${group.agent_id} made the same call ${count} times in ${
          Math.max(1, Math.round((last.getTime() - first.getTime()) / 60_000))
        } min (“${facts.get(ledgerIds[0]!)?.title ?? ""}”)`,
        evidence: {
          repeats: count,
          call_signature: group.signature,
          first_at: first.toISOString(),
          last_at: last.toISOString(),
          repeated_cost_usd: round(wasted, 6),
          rule: `the same newest input and answer (ids and numbers aside) ≥ ${loop.min_repeats} times within ${loop.window_minutes} min in one session ` +
            `(repeats counted up to ${LOOP_READ_LIMIT})`
        },
        windowStart: first,
        windowEnd: last,
        agentIds: [group.agent_id],
        sessionIds: [group.session_id],
        ledgerIds: ledgerIds.slice(0, LINKED_DECISIONS)
      })
    }

    const quality = RULES.low_quality_streak
    const earliest = new Map<string, Date>()
    for (const d of fresh) {
      const seen = earliest.get(d.session_id)
      if (seen === undefined || d.created_at < seen) earliest.set(d.session_id, d.created_at)
    }
    const answered = yield* sql<{ session_id: string; agent_id: string; ledger_id: string; created_at: Date; quality: number; outcome: string }>`
      SELECT f.session_id::text AS session_id, d.agent_id, d.ledger_id::text AS ledger_id, d.created_at, d.quality, d.outcome
      FROM unnest(${[...earliest.keys()]}::uuid[], ${[...earliest.values()].map((at) => at.toISOString())}::timestamptz[]) AS f(session_id, from_at)
      LEFT JOIN LATERAL (
        SELECT b.created_at, b.ledger_id FROM decisions b
        WHERE b.session_id = f.session_id AND b.created_at < f.from_at AND b.outcome <> 'error' AND b.quality >= ${quality.max_quality}
        ORDER BY b.created_at DESC, b.ledger_id DESC LIMIT 1) breaker ON true
      CROSS JOIN LATERAL (
        SELECT d.agent_id, d.ledger_id, d.created_at, d.quality, d.outcome FROM decisions d
        WHERE d.session_id = f.session_id AND d.outcome <> 'error'
          -- from the breaker itself, in the streak order (decisions of the same instant are ordered by id)
          AND (d.created_at, d.ledger_id) >= (coalesce(breaker.created_at, '-infinity'), coalesce(breaker.ledger_id, '00000000-0000-0000-0000-000000000000'))
        ORDER BY d.created_at, d.ledger_id) d
      ORDER BY f.session_id, d.created_at, d.ledger_id`
    const flush = (streak: ReadonlyArray<(typeof answered)[number]>) => {
      if (streak.length < quality.min_length) return
      const first = streak[0]!
      const mean = streak.reduce((sum, d) => sum + d.quality, 0) / streak.length
      const outcomes: Record<string, number> = {}
      for (const d of streak) outcomes[d.outcome] = (outcomes[d.outcome] ?? 0) + 1
      findings.push({
        type: "low_quality_streak",
        dedupKey: `low_quality_streak:${first.session_id}:${first.ledger_id}`,
        severity: "warning",
        title: `Low quality: ${streak.length} answers of ${first.agent_id} in a row scored below ${quality.max_quality} (mean ${round(mean, 2)})`,
        evidence: {
          streak_length: streak.length,
          mean_quality: round(mean, 3),
          outcomes,
          rule: `≥ ${quality.min_length} consecutive answered decisions of one session with quality < ${quality.max_quality}`
        },
        windowStart: first.created_at,
        windowEnd: streak.at(-1)!.created_at,
        agentIds: [first.agent_id],
        sessionIds: [first.session_id],
        ledgerIds: streak.map((d) => d.ledger_id).slice(0, LINKED_DECISIONS)
      })
    }
    let streak: Array<(typeof answered)[number]> = []
    for (const decision of answered) {
      if (streak.length > 0 && streak[0]!.session_id !== decision.session_id) {
        flush(streak)
        streak = []
      }
      if (decision.quality < quality.max_quality) streak.push(decision)
      else {
        flush(streak)
        streak = []
      }
    }
    flush(streak)
    return findings
  })

/** How often, in workspace time, an idle spell already reported has its idle time brought up to date. */
const IDLE_REFRESH = "1 hour"

const idleRule = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const rule = RULES.idle_agent
  // One statement for every idle agent. An agent whose idle spell is reported already is refreshed at most once
  // per IDLE_REFRESH, its count of decisions taken from the insight (it cannot change while the agent is silent):
  // retired agents stay idle for ever, and a pass runs whenever decisions arrive. The dedup key is formed here,
  // the one place, as the insight's key (last_seen_at in toISOString's format).
  const rows = yield* sql<{ agent_id: string; last_seen_at: Date; now: Date; dedup_key: string; recent: number; ledger_id: string; session_id: string }>`
    WITH clock AS (SELECT max(created_at) AS now FROM decision_search),
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

const writeFindings = (scope: WorkspaceScope, findings: ReadonlyArray<Finding>) =>
  Effect.gen(function*() {
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
const detectWorkspace = (scope: WorkspaceScope) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const [progress] = yield* sql<{ detected_seq: number }>`SELECT detected_seq::float8 AS detected_seq FROM analytics_progress`
    // each decision's model by its key: a join could be planned as a scan of the workspace's decisions
    const fresh = yield* sql<NewDecision>`
      SELECT s.seq::float8 AS seq, s.session_id::text AS session_id, s.agent_id, s.created_at, d.model, s.call_signature
      FROM (SELECT * FROM decision_search WHERE seq > ${progress?.detected_seq ?? 0} ORDER BY seq LIMIT ${PASS_SIZE}) s
      CROSS JOIN LATERAL (SELECT d.provider || '/' || d.model AS model FROM decisions d WHERE d.ledger_id = s.ledger_id LIMIT 1) d
      ORDER BY s.seq`
    if (fresh.length === 0) return 0
    const byKey = <A>(items: ReadonlyArray<A>) => [...new Map(items.map((item) => [JSON.stringify(item), item])).values()]
    const findings = [
      ...(yield* agentHourRules(byKey(fresh.map((d) => ({ agent_id: d.agent_id, hour: hourOf(d.created_at) }))))),
      ...(yield* latencyRule(byKey(fresh.map((d) => ({ agent_id: d.agent_id, model: d.model, hour: hourOf(d.created_at) }))))),
      ...(yield* rightSizingRule(byKey(fresh.map((d) => ({ agent_id: d.agent_id, model: d.model, day: dayOf(d.created_at) }))))),
      ...(yield* sessionRules(fresh)),
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
    yield* every("analytics-detectors", yield* yieldingToIngest("analytics-detectors", detectors.round), analytics.intervalMs)
  }))
}
