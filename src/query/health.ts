/**
 * Session health (the single-session view): a status with the reasons behind it, from the session's most recent
 * decisions. Deterministic and explainable — every threshold is a constant here and every triggered one is named
 * in `reasons`, so a person can check the verdict against the decisions listed beside it.
 */
import type { Outcome } from "../domain/decision.ts"
import type { SessionHealth } from "../domain/ledger.ts"

/** how many of the latest decisions health looks at: it describes the session's current behaviour */
export const HEALTH_WINDOW = 100

const FAILING_ERROR_RATE = 0.5
const DEGRADED_ERROR_RATE = 0.1
/** the last calls all failing means failing, whatever came before */
const FAILING_ERROR_STREAK = 3
const FAILING_LOOPS = 5
const DEGRADED_LOOPS = 2
const DEGRADED_P95_MS = 30_000
const DEGRADED_TOKEN_GROWTH = 10
/** below this span a rate per hour says nothing: it is computed over at least one minute */
const MIN_RATE_SPAN_HOURS = 1 / 60

export interface HealthSample {
  readonly created_at: Date
  readonly outcome: Outcome
  readonly latency_ms: number
  readonly prompt_tokens: number | null
  readonly model: string
  /** text of the call's last trace step: its answer or tool call (its output) */
  readonly last_step: string | null
}

export interface HealthInput {
  /** the latest decisions, oldest first (at most HEALTH_WINDOW) */
  readonly window: ReadonlyArray<HealthSample>
  readonly started_at: Date
  readonly ended_at: Date
  readonly total_cost_usd: number
  readonly now: number
  readonly sessionGapMinutes: number
}

/**
 * Loop rule: a call repeats its predecessor when both succeeded in the same way (same model, same outcome) and
 * produced the same output once case, digits and whitespace are ignored — the same answer or the same tool call
 * with the same arguments. Failed calls are left to the error rate.
 */
const loopSignature = (sample: HealthSample): string | undefined =>
  sample.outcome === "error" || sample.last_step === null
    ? undefined
    : `${sample.model}\u0000${sample.outcome}\u0000${sample.last_step.toLowerCase().replace(/\d+/g, "#").replace(/\s+/g, " ").trim()}`

export const countLoops = (window: ReadonlyArray<HealthSample>): number => {
  let loops = 0
  for (let i = 1; i < window.length; i++) {
    const signature = loopSignature(window[i]!)
    if (signature !== undefined && signature === loopSignature(window[i - 1]!)) loops++
  }
  return loops
}

/** nearest-rank percentile */
const percentile = (values: ReadonlyArray<number>, p: number): number | null => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

const percent = (rate: number) => `${round(rate * 100, 1)}%`

const duration = (ms: number): string => {
  const minutes = Math.floor(ms / 60_000)
  if (minutes < 60) return `${minutes} min`
  const hours = Math.floor(minutes / 60)
  return hours < 48 ? `${hours} h ${minutes % 60} min` : `${Math.floor(hours / 24)} days`
}

export const sessionHealth = (input: HealthInput): SessionHealth => {
  const { window } = input
  const count = window.length
  const errors = window.filter((sample) => sample.outcome === "error").length
  const errorRate = count === 0 ? 0 : errors / count
  const loops = countLoops(window)
  const p95 = percentile(window.map((sample) => sample.latency_ms), 0.95)
  const withTokens = window.filter((sample) => sample.prompt_tokens !== null && sample.prompt_tokens > 0)
  const tokenGrowth = withTokens.length < 2
    ? null
    : round(withTokens.at(-1)!.prompt_tokens! / withTokens[0]!.prompt_tokens!, 2)
  const spanHours = Math.max((input.ended_at.getTime() - input.started_at.getTime()) / 3_600_000, MIN_RATE_SPAN_HOURS)
  const costPerHour = round(input.total_cost_usd / spanHours, 6)
  const trailingErrors = count - (window.findLastIndex((sample) => sample.outcome !== "error") + 1)
  const over = `over the last ${count} decision${count === 1 ? "" : "s"}`

  const failing: Array<string> = []
  const degraded: Array<string> = []
  if (errorRate >= FAILING_ERROR_RATE && count >= 2) {
    failing.push(`error rate ${percent(errorRate)} ${over} (failing at ≥ ${percent(FAILING_ERROR_RATE)})`)
  } else if (errorRate >= DEGRADED_ERROR_RATE) {
    degraded.push(`error rate ${percent(errorRate)} ${over} (degraded at ≥ ${percent(DEGRADED_ERROR_RATE)})`)
  }
  if (trailingErrors >= FAILING_ERROR_STREAK) failing.push(`the last ${trailingErrors} calls all failed`)
  if (loops >= FAILING_LOOPS) {
    failing.push(`${loops} calls repeated the previous call's output (loop; failing at ≥ ${FAILING_LOOPS})`)
  } else if (loops >= DEGRADED_LOOPS) {
    degraded.push(`${loops} calls repeated the previous call's output (possible loop; degraded at ≥ ${DEGRADED_LOOPS})`)
  }
  if (p95 !== null && p95 > DEGRADED_P95_MS) {
    degraded.push(`p95 latency ${round(p95 / 1000, 1)} s ${over} (degraded above ${DEGRADED_P95_MS / 1000} s)`)
  }
  if (tokenGrowth !== null && tokenGrowth >= DEGRADED_TOKEN_GROWTH) {
    degraded.push(`prompt tokens grew ${tokenGrowth}× across the last ${count} decisions (degraded at ≥ ${DEGRADED_TOKEN_GROWTH}×)`)
  }
  const quietMs = input.now - input.ended_at.getTime()
  const idle = quietMs > input.sessionGapMinutes * 60_000

  const status = failing.length > 0 ? "failing" : degraded.length > 0 ? "degraded" : idle ? "idle" : "healthy"
  const reasons = [...failing, ...degraded]
  if (idle) reasons.push(`no activity for ${duration(quietMs)} (a session ends after ${input.sessionGapMinutes} min without calls)`)
  if (reasons.length === 0) reasons.push(`no errors, loops, slow calls or token growth ${over}`)

  return {
    status,
    reasons,
    error_rate: round(errorRate, 4),
    loops,
    p95_latency_ms: p95,
    cost_per_hour_usd: count === 0 ? null : costPerHour,
    token_growth: tokenGrowth,
    last_activity_at: input.ended_at.toISOString()
  }
}
