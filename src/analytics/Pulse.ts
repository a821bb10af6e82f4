/**
 * The pulse report: a period (UTC day, Monday–Sunday week, calendar month, or a range) against the period just before
 * it (the previous month for a month, the same length for the others). Figures come from the hourly rollups (for
 * members) — with the decisions themselves for the part of an hour a range starts or ends inside — or, for a
 * restricted member, from the decisions that member may see, aggregated the same way, so no aggregate of other
 * users' calls leaks. Periods are half-open, [start, end). `partial` says when a figure cannot be complete: the period
 * is not over, analytics has not caught up, or the previous period starts before the first recorded decision.
 */
import { Effect } from "effect"
import type { Principal } from "../domain/principal.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import type { PulseReport, PulseTotals } from "./schema.ts"

export interface PulsePeriod {
  readonly kind: "day" | "week" | "month" | "range"
  readonly start: Date
  readonly end: Date
}

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
const TOP_AGENTS = 5
const COSTLY_SESSIONS = 5

/** The UTC day, Monday-based week or calendar month containing `at`. */
export const periodOf = (kind: "day" | "week" | "month", at: Date): PulsePeriod => {
  const day = Math.floor(at.getTime() / DAY_MS) * DAY_MS
  switch (kind) {
    case "day":
      return { kind, start: new Date(day), end: new Date(day + DAY_MS) }
    case "week": {
      const weekday = (new Date(day).getUTCDay() + 6) % 7
      const start = day - weekday * DAY_MS
      return { kind, start: new Date(start), end: new Date(start + 7 * DAY_MS) }
    }
    case "month":
      return {
        kind,
        start: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)),
        end: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1))
      }
  }
}

/** The period a report compares with: the month before a month, the same length just before anything else. */
export const previousOf = (period: PulsePeriod): { readonly start: Date; readonly end: Date } =>
  period.kind === "month"
    ? { start: periodOf("month", new Date(period.start.getTime() - 1)).start, end: period.start }
    : { start: new Date(period.start.getTime() - (period.end.getTime() - period.start.getTime())), end: period.start }

/**
 * Whether an insight's window, [window_start, window_end), overlaps the period [start, end): an insight belongs to
 * every period it overlaps (an error spike in the 23:00 hour ends at midnight, and is that day's).
 */
export const windowOverlaps = (sql: ScopedSql["Service"], start: string | undefined, end: string | undefined) =>
  sql.and([
    end === undefined ? sql`TRUE` : sql`window_start < ${end}::timestamptz`,
    // an empty window (a point in time) belongs where its instant is
    start === undefined ? sql`TRUE` : sql`(window_end > ${start}::timestamptz OR window_start >= ${start}::timestamptz)`
  ])

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

/**
 * Sessions that had activity in [start, end): [started_at, ended_at] overlaps it; one that ends the instant the period
 * starts (a last answer at midnight) is the previous period's, unless it is a single instant there.
 */
const sessionOverlaps = (sql: ScopedSql["Service"], start: Date, end: Date) =>
  sql`started_at < ${end.toISOString()}::timestamptz
    AND (ended_at > ${start.toISOString()}::timestamptz OR started_at >= ${start.toISOString()}::timestamptz)`

const ceilHour = (at: Date) => new Date(Math.ceil(at.getTime() / HOUR_MS) * HOUR_MS)
const floorHour = (at: Date) => new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS)

/** Visible decisions made in [start, end), as rollup rows. */
const decisionRows = (sql: ScopedSql["Service"], start: Date, end: Date) =>
  sql`SELECT agent_id, intent, outcome, 1 AS decisions, coalesce(cost_usd, 0) AS cost_usd,
      coalesce((usage->>'total_tokens')::bigint, 0) AS tokens, latency_ms AS latency_ms_sum, quality AS quality_sum
    FROM decisions WHERE created_at >= ${start.toISOString()}::timestamptz AND created_at < ${end.toISOString()}::timestamptz`

/**
 * The rows (agent, intent, outcome with sums) the report aggregates over [start, end): the stored hourly rollups for
 * the whole hours in it and the decisions themselves for the parts of an hour at either end (a range need not start
 * on the hour); for a restricted member, only the decisions it may see.
 */
const rollupSource = (sql: ScopedSql["Service"], principal: Principal, start: Date, end: Date) => {
  if (principal.role === "restricted") return sql`(${decisionRows(sql, start, end)}) r`
  const wholeFrom = ceilHour(start)
  const wholeTo = floorHour(end)
  if (wholeFrom >= wholeTo) return sql`(${decisionRows(sql, start, end)}) r`
  const edges = [
    ...(start < wholeFrom ? [decisionRows(sql, start, wholeFrom)] : []),
    ...(wholeTo < end ? [decisionRows(sql, wholeTo, end)] : [])
  ]
  const hours = sql`SELECT agent_id, intent, outcome, decisions, cost_usd, tokens, latency_ms_sum, quality_sum FROM hourly_rollups
    WHERE hour >= ${wholeFrom.toISOString()}::timestamptz AND hour < ${wholeTo.toISOString()}::timestamptz`
  return sql`(${sql.join(" UNION ALL ", false)([hours, ...edges])}) r`
}

interface Grouped {
  readonly agent_id: string | null
  readonly outcome: string | null
  readonly intent: string | null
  readonly decisions: number
  readonly cost: number
  readonly errors: number
  readonly tokens: number
  readonly latency: number
  readonly quality: number
  readonly agents: number
}

/** One pass over a period's rollups: the totals, and the same figures per agent, per outcome and per intent. */
const grouped = (sql: ScopedSql["Service"], principal: Principal, start: Date, end: Date, detail: boolean) =>
  sql<Grouped>`
    SELECT ${detail ? sql`agent_id, outcome, intent` : sql`NULL::text AS agent_id, NULL::text AS outcome, NULL::text AS intent`},
      coalesce(sum(decisions), 0)::float8 AS decisions, coalesce(sum(cost_usd), 0)::float8 AS cost,
      coalesce(sum(decisions) FILTER (WHERE outcome = 'error'), 0)::float8 AS errors, coalesce(sum(tokens), 0)::float8 AS tokens,
      coalesce(sum(latency_ms_sum), 0)::float8 AS latency, coalesce(sum(quality_sum), 0)::float8 AS quality,
      count(DISTINCT agent_id)::int AS agents
    FROM ${rollupSource(sql, principal, start, end)}
    ${detail ? sql`GROUP BY GROUPING SETS ((), (agent_id), (outcome), (intent))` : sql``}`

const totalsOf = Effect.fnUntraced(function*(sql: ScopedSql["Service"], principal: Principal, rows: ReadonlyArray<Grouped>, start: Date, end: Date) {
  const row = rows.find((r) => r.agent_id === null && r.outcome === null && r.intent === null)!
  const [sessions] = yield* sql<{ n: number }>`
    SELECT count(DISTINCT session_id)::int AS n FROM ${
    principal.role === "restricted"
      ? sql`decisions WHERE created_at >= ${start.toISOString()}::timestamptz AND created_at < ${end.toISOString()}::timestamptz`
      : sql`sessions WHERE ${sessionOverlaps(sql, start, end)}`
  }`
  const decisions = row.decisions
  return {
    decisions,
    sessions: sessions!.n,
    agents: row.agents,
    cost_usd: round(row.cost, 6),
    errors: row.errors,
    error_rate: decisions === 0 ? 0 : round(row.errors / decisions, 4),
    avg_quality: decisions === 0 ? null : round(row.quality / decisions, 3),
    avg_latency_ms: decisions === 0 ? null : Math.round(row.latency / decisions),
    tokens: row.tokens
  } satisfies PulseTotals
})

const delta = (current: number, previous: number) => ({
  change: round(current - previous, 6),
  percent: previous === 0 ? null : round(((current - previous) / previous) * 100, 1)
})

/** The report's figures (insights and features are added by the caller, which owns their shapes). */
export const pulseFigures = Effect.fnUntraced(function*(principal: Principal, period: PulsePeriod, now: Date) {
  const sql = yield* ScopedSql
  const previous = previousOf(period)
  const current = yield* grouped(sql, principal, period.start, period.end, true)
  const totals = yield* totalsOf(sql, principal, current, period.start, period.end)
  const previousTotals = yield* totalsOf(sql, principal, yield* grouped(sql, principal, previous.start, previous.end, false), previous.start, previous.end)
  const byAgent = current.filter((r) => r.agent_id !== null)
    .sort((a, b) => b.decisions - a.decisions || b.cost - a.cost || a.agent_id!.localeCompare(b.agent_id!)).slice(0, TOP_AGENTS)
  const names = byAgent.length === 0 ? [] : yield* sql<{ agent_id: string; agent_name: string | null }>`
    SELECT agent_id, agent_name FROM agents WHERE agent_id = ANY(${byAgent.map((r) => r.agent_id!)}::text[])`
  const topAgents = byAgent.map((r) => ({
    agent_id: r.agent_id!,
    agent_name: names.find((n) => n.agent_id === r.agent_id)?.agent_name ?? null,
    decisions: r.decisions,
    cost_usd: round(r.cost, 6),
    errors: r.errors
  }))
  const mix = (key: "outcome" | "intent") =>
    Object.fromEntries(current.filter((r) => r[key] !== null).sort((a, b) => b.decisions - a.decisions || a[key]!.localeCompare(b[key]!))
      .map((r) => [r[key]!, r.decisions]))
  const costliest = yield* sql<{ session_id: string; agent_id: string; started_at: Date; ended_at: Date; decision_count: number; total_cost_usd: number; summary: string }>`${
    principal.role === "restricted"
      ? sql`SELECT session_id::text AS session_id, min(agent_id) AS agent_id, min(created_at) AS started_at,
          max(created_at + latency_ms * interval '1 millisecond') AS ended_at, count(*)::int AS decision_count,
          coalesce(sum(cost_usd), 0)::float8 AS total_cost_usd, min(title) AS summary
        FROM decisions WHERE created_at >= ${period.start.toISOString()}::timestamptz AND created_at < ${period.end.toISOString()}::timestamptz
        GROUP BY session_id`
      : sql`SELECT session_id::text AS session_id, agent_id, started_at, ended_at, decision_count::int AS decision_count,
          total_cost_usd, summary FROM sessions
        WHERE ${sessionOverlaps(sql, period.start, period.end)}`
  } ORDER BY total_cost_usd DESC, session_id LIMIT ${COSTLY_SESSIONS}`

  const reasons: Array<string> = []
  if (period.end > now) reasons.push(`the period is not over: figures cover it until ${now.toISOString()}`)
  const [progress] = yield* sql<{ behind: boolean; cursor: Date | null }>`
    SELECT (SELECT max(built_at) FROM decisions) > coalesce(p.built_cursor, '-infinity') AS behind, p.built_cursor AS cursor
    FROM (SELECT 1) one LEFT JOIN analytics_progress p ON true`
  if (principal.role !== "restricted" && progress?.behind === true) {
    reasons.push("analytics is catching up: decisions built in the last moments are not counted yet")
  }
  const [first] = yield* sql<{ at: Date | null }>`SELECT min(created_at) AS at FROM decisions`
  if (first?.at != null && first.at > previous.start) {
    reasons.push(`the previous period starts before the first recorded decision (${first.at.toISOString()}): deltas compare with partial data`)
  }

  const deltas = Object.fromEntries(
    (["decisions", "sessions", "agents", "cost_usd", "errors", "error_rate", "tokens"] as const).map((field) => [
      field,
      delta(totals[field], previousTotals[field])
    ])
  )
  return {
    period: { kind: period.kind, start: period.start.toISOString(), end: period.end.toISOString() },
    previous_period: { start: previous.start.toISOString(), end: previous.end.toISOString() },
    totals,
    previous_totals: previousTotals,
    deltas,
    top_agents: topAgents,
    outcomes: mix("outcome"),
    intents: mix("intent"),
    costliest_sessions: costliest.map((s) => ({
      ...s,
      started_at: s.started_at.toISOString(),
      ended_at: s.ended_at.toISOString()
    })),
    partial: { is_partial: reasons.length > 0, reasons }
  } satisfies Omit<PulseReport, "new_insights" | "features_delivered">
})
