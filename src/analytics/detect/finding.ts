/** What every detector rule shares: the rules' thresholds, the finding it writes, the decisions a pass looks at. */
import type { InsightType, Severity } from "../schema.ts"

/** Thresholds of every rule (docs in Detectors.ts). */
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

/** Decisions an insight links to, at most. */
export const LINKED_DECISIONS = 50

export interface Finding {
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

/** A decision the pass has not looked at yet. */
export interface NewDecision {
  readonly seq: number
  readonly ledger_id: string
  readonly session_id: string
  readonly agent_id: string
  readonly created_at: Date
  readonly model: string
  readonly call_signature: string
}

export const HOUR_MS = 3_600_000
export const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits
export const unique = <A>(items: ReadonlyArray<A>) => [...new Set(items)]
/** Windows are half-open, [start, end): one that ends with a decision ends just after it. */
export const justAfter = (date: Date) => new Date(date.getTime() + 1)
