/**
 * Low-quality streaks: ≥ 5 consecutive answered (non-error) decisions of a session with quality < 0.4. Errors neither
 * count nor break a streak; its insight is keyed by its first decision.
 *
 * A pass reads a bounded window of each session that has new decisions — CONTEXT decisions before the earliest new
 * one, those from the earliest to the latest (at most SPAN), CONTEXT after the latest — so its cost does not grow
 * with the session (before, a streak was re-read from the decision that broke it: a session that is one long streak
 * cost a pass 60 ms at 10,000 decisions, bench/notes/analytics.md, "Detector passes against session length").
 * Only the streaks a new decision can change are reported:
 * those holding one, or next to one. A streak that reaches back past the window continues one reported already: its
 * insight gives what came before (first decision, length, quality, outcomes), and the window adds the rest. When that
 * cannot be known — no such insight (a streak never reported, say only errors in the context), or a streak that
 * reaches forward past the window (a late decision deep inside a long session) — the session is read as a whole from
 * the decision that broke the streak, as before.
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { type Finding, justAfter, LINKED_DECISIONS, type NewDecision, round, RULES } from "./finding.ts"

/** Decisions read before the earliest and after the latest new decision of a session. */
const CONTEXT = 100
/** Decisions read from the earliest to the latest new one, at most. */
const SPAN = 5_000

interface Row {
  readonly session_id: string
  readonly part: "before" | "within" | "after"
  readonly agent_id: string
  readonly ledger_id: string
  readonly created_at: Date
  readonly quality: number | null
  readonly outcome: string
}

/** One session's new decisions: the first and last in streak order (time, then id). */
interface Span {
  readonly session_id: string
  from: NewDecision
  to: NewDecision
}

/** What a reported streak says of itself, read back to continue it. */
interface Reported {
  readonly dedup_key: string
  readonly window_start: Date
  readonly ledger_ids: Array<string>
  readonly evidence: {
    readonly streak_length?: number
    readonly mean_quality?: number
    readonly outcomes?: Record<string, number>
    readonly last_at?: string
    readonly last_ledger_id?: string
  }
}

const rule = RULES.low_quality_streak
const before = (a: { created_at: Date; ledger_id: string }, b: { created_at: Date; ledger_id: string }) =>
  a.created_at < b.created_at || (a.created_at.getTime() === b.created_at.getTime() && a.ledger_id < b.ledger_id)
const isLow = (row: Row) => (row.quality ?? 1) < rule.max_quality
const count = (rows: ReadonlyArray<Row>) => {
  const outcomes: Record<string, number> = {}
  for (const row of rows) outcomes[row.outcome] = (outcomes[row.outcome] ?? 0) + 1
  return outcomes
}

const spansOf = (fresh: ReadonlyArray<NewDecision>) => {
  const spans = new Map<string, Span>()
  for (const d of fresh) {
    const span = spans.get(d.session_id)
    if (span === undefined) spans.set(d.session_id, { session_id: d.session_id, from: d, to: d })
    else {
      if (before(d, span.from)) span.from = d
      if (before(span.to, d)) span.to = d
    }
  }
  return [...spans.values()]
}

const columns = (spans: ReadonlyArray<Span>) => ({
  ids: spans.map((s) => s.session_id),
  fromAt: spans.map((s) => s.from.created_at.toISOString()),
  fromId: spans.map((s) => s.from.ledger_id),
  toAt: spans.map((s) => s.to.created_at.toISOString()),
  toId: spans.map((s) => s.to.ledger_id)
})

/** The bounded windows around each session's new decisions (the index on session and time, probed session by session). */
const readWindows = Effect.fnUntraced(function*(spans: ReadonlyArray<Span>) {
  const sql = yield* ScopedSql
  const c = columns(spans)
  const fields = sql`d.agent_id, d.ledger_id::text AS ledger_id, d.created_at, d.quality, d.outcome FROM decisions d`
  return yield* sql<Row>`
    SELECT f.session_id::text AS session_id, w.* FROM unnest(${c.ids}::uuid[], ${c.fromAt}::timestamptz[], ${c.fromId}::uuid[],
      ${c.toAt}::timestamptz[], ${c.toId}::uuid[]) AS f(session_id, from_at, from_id, to_at, to_id)
    CROSS JOIN LATERAL (
      (SELECT 'before' AS part, ${fields}
        WHERE d.session_id = f.session_id AND d.created_at <= f.from_at AND (d.created_at, d.ledger_id) < (f.from_at, f.from_id)
        ORDER BY d.created_at DESC, d.ledger_id DESC LIMIT ${CONTEXT})
      UNION ALL
      (SELECT 'within' AS part, ${fields}
        WHERE d.session_id = f.session_id AND d.created_at >= f.from_at AND d.created_at <= f.to_at
          AND (d.created_at, d.ledger_id) >= (f.from_at, f.from_id) AND (d.created_at, d.ledger_id) <= (f.to_at, f.to_id)
        ORDER BY d.created_at, d.ledger_id LIMIT ${SPAN})
      UNION ALL
      (SELECT 'after' AS part, ${fields}
        WHERE d.session_id = f.session_id AND d.created_at >= f.to_at AND (d.created_at, d.ledger_id) > (f.to_at, f.to_id)
        ORDER BY d.created_at, d.ledger_id LIMIT ${CONTEXT})) w`
})

/** Sessions read whole from the answered decision that broke the streak before their earliest new decision. */
const readFromBreakers = Effect.fnUntraced(function*(spans: ReadonlyArray<Span>) {
  const sql = yield* ScopedSql
  const c = columns(spans)
  return yield* sql<Row>`
    SELECT f.session_id::text AS session_id,
      CASE WHEN (d.created_at, d.ledger_id) < (f.from_at, f.from_id) THEN 'before'
        WHEN (d.created_at, d.ledger_id) <= (f.to_at, f.to_id) THEN 'within' ELSE 'after' END AS part,
      d.agent_id, d.ledger_id::text AS ledger_id, d.created_at, d.quality, d.outcome
    FROM unnest(${c.ids}::uuid[], ${c.fromAt}::timestamptz[], ${c.fromId}::uuid[], ${c.toAt}::timestamptz[], ${c.toId}::uuid[])
      AS f(session_id, from_at, from_id, to_at, to_id)
    LEFT JOIN LATERAL (
      SELECT b.created_at, b.ledger_id FROM decisions b
      WHERE b.session_id = f.session_id AND b.created_at <= f.from_at AND (b.created_at, b.ledger_id) < (f.from_at, f.from_id)
        AND b.outcome <> 'error' AND b.quality >= ${rule.max_quality}
      ORDER BY b.created_at DESC, b.ledger_id DESC LIMIT 1) breaker ON true
    CROSS JOIN LATERAL (
      SELECT d.* FROM decisions d
      -- the plain bound is what the index can use; the row comparison orders decisions of the same instant by id
      WHERE d.session_id = f.session_id AND d.created_at >= coalesce(breaker.created_at, '-infinity')
        AND (d.created_at, d.ledger_id) >= (coalesce(breaker.created_at, '-infinity'), coalesce(breaker.ledger_id, '00000000-0000-0000-0000-000000000000'))
      ORDER BY d.created_at, d.ledger_id) d`
})

/** The reported streak of a session whose window holds `at`. */
const reportedAt = Effect.fnUntraced(function*(sessionId: string, at: Date) {
  const sql = yield* ScopedSql
  const [row] = yield* sql<Reported>`
    SELECT dedup_key, window_start, ledger_ids, evidence FROM insights
    WHERE type = 'low_quality_streak' AND ${sessionId} = ANY(session_ids)
      AND window_end > ${at.toISOString()}::timestamptz AND window_start <= ${at.toISOString()}::timestamptz
    ORDER BY window_start DESC LIMIT 1`
  return row
})

/** A streak as reported: its first decision and what it holds, the last `rows` of it read in this pass. */
interface Streak {
  readonly firstLedgerId: string
  readonly firstAt: Date
  readonly length: number
  readonly qualitySum: number
  readonly outcomes: Record<string, number>
  readonly ledgerIds: ReadonlyArray<string>
  readonly rows: ReadonlyArray<Row>
}

const whole = (rows: ReadonlyArray<Row>): Streak => ({
  firstLedgerId: rows[0]!.ledger_id,
  firstAt: rows[0]!.created_at,
  length: rows.length,
  qualitySum: rows.reduce((sum, row) => sum + (row.quality ?? 0), 0),
  outcomes: count(rows),
  ledgerIds: rows.map((row) => row.ledger_id),
  rows
})

/** `rows` continuing the reported streak: what it held up to its last decision, and the rows after it. */
const continued = (reported: Reported, rows: ReadonlyArray<Row>): Streak | undefined => {
  const { last_at, last_ledger_id, mean_quality, outcomes, streak_length } = reported.evidence
  if (last_at === undefined || last_ledger_id === undefined || streak_length === undefined || mean_quality === undefined) return undefined
  const last = { created_at: new Date(last_at), ledger_id: last_ledger_id }
  const added = rows.filter((row) => before(last, row))
  // the rows up to its last decision must be the end of it: fewer than it held, none missing
  if (rows.length - added.length > streak_length || !rows.some((row) => row.ledger_id === last_ledger_id)) return undefined
  const addedOutcomes = count(added)
  const sum = { ...outcomes }
  for (const [outcome, n] of Object.entries(addedOutcomes)) sum[outcome] = (sum[outcome] ?? 0) + n
  return {
    firstLedgerId: reported.dedup_key.slice(reported.dedup_key.lastIndexOf(":") + 1),
    firstAt: reported.window_start,
    length: streak_length + added.length,
    qualitySum: mean_quality * streak_length + added.reduce((total, row) => total + (row.quality ?? 0), 0),
    outcomes: sum,
    ledgerIds: [...reported.ledger_ids, ...added.map((row) => row.ledger_id)],
    rows
  }
}

const findingOf = (streak: Streak): Finding => {
  const first = streak.rows[0]!
  const last = streak.rows.at(-1)!
  const mean = streak.qualitySum / streak.length
  return {
    type: "low_quality_streak",
    dedupKey: `low_quality_streak:${first.session_id}:${streak.firstLedgerId}`,
    severity: "warning",
    title: `Low quality: ${streak.length} answers of ${first.agent_id} in a row scored below ${rule.max_quality} (mean ${round(mean, 2)})`,
    evidence: {
      streak_length: streak.length,
      mean_quality: round(mean, 6),
      outcomes: streak.outcomes,
      last_at: last.created_at.toISOString(),
      last_ledger_id: last.ledger_id,
      rule: `≥ ${rule.min_length} consecutive answered decisions of one session with quality < ${rule.max_quality}`
    },
    windowStart: streak.firstAt,
    windowEnd: justAfter(last.created_at),
    agentIds: [first.agent_id],
    sessionIds: [first.session_id],
    ledgerIds: streak.ledgerIds.slice(0, LINKED_DECISIONS)
  }
}

/**
 * The runs of low answers in one session's rows (time order) that a new decision can change: holding one, or next to
 * one. `openStart`/`openEnd`: the rows may not reach the streak's start or end.
 */
const changedRuns = (rows: ReadonlyArray<Row>) => {
  const answered = rows.filter((row) => row.outcome !== "error")
  const firstNew = answered.findIndex((row) => row.part === "within")
  if (firstNew < 0) return []
  const lastNew = answered.findLastIndex((row) => row.part === "within")
  const runs: Array<{ readonly from: number; readonly to: number; readonly rows: Array<Row> }> = []
  for (let i = 0; i < answered.length; i++) {
    if (!isLow(answered[i]!)) continue
    let j = i
    while (j + 1 < answered.length && isLow(answered[j + 1]!)) j++
    // next to a new decision: it ends just before the first or starts just after the last
    if (j >= firstNew - 1 && i <= lastNew + 1) runs.push({ from: i, to: j, rows: answered.slice(i, j + 1) })
    i = j
  }
  return runs.map((run) => ({ ...run, atStart: run.from === 0, atEnd: run.to === answered.length - 1 }))
}

export const streakRule = Effect.fnUntraced(function*(fresh: ReadonlyArray<NewDecision>) {
  if (fresh.length === 0) return []
  const spans = spansOf(fresh)
  const bySession = (rows: ReadonlyArray<Row>) => {
    const grouped = new Map<string, Array<Row>>()
    for (const row of rows) {
      const group = grouped.get(row.session_id)
      if (group === undefined) grouped.set(row.session_id, [row])
      else group.push(row)
    }
    for (const group of grouped.values()) group.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0))
    return grouped
  }
  const windows = bySession(yield* readWindows(spans))
  const streaks: Array<Streak> = []
  const unknown: Array<Span> = []
  for (const span of spans) {
    const rows = windows.get(span.session_id) ?? []
    const full = (part: Row["part"]) => rows.filter((row) => row.part === part).length >= (part === "within" ? SPAN : CONTEXT)
    const found: Array<Streak> = []
    let known = !full("within")
    for (const run of known ? changedRuns(rows) : []) {
      if (run.atEnd && full("after")) known = false
      else if (run.atStart && full("before")) {
        const reported = yield* reportedAt(span.session_id, run.rows[0]!.created_at)
        const streak = reported === undefined ? undefined : continued(reported, run.rows)
        if (streak === undefined) known = false
        else found.push(streak)
      } else if (run.rows.length >= rule.min_length) found.push(whole(run.rows))
      if (!known) break
    }
    if (known) streaks.push(...found)
    else unknown.push(span)
  }
  if (unknown.length > 0) {
    for (const rows of bySession(yield* readFromBreakers(unknown)).values()) {
      for (const run of changedRuns(rows)) if (run.rows.length >= rule.min_length) streaks.push(whole(run.rows))
    }
  }
  return streaks.filter((streak) => streak.length >= rule.min_length).map(findingOf)
})
