/**
 * Loops: one session repeating the same call (same newest input and same answer, ids and numbers aside) ≥ 4 times
 * within 15 minutes. One insight per session and call signature, however many passes the loop runs across.
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { type Finding, justAfter, LINKED_DECISIONS, type NewDecision, round, RULES } from "./finding.ts"

/** Most repeats of one call a loop pass reads (the newest); a loop past it is reported at this many repeats. */
const LOOP_READ_LIMIT = 200

/**
 * Only what a new decision can change is read, so a pass costs the same on the thousandth decision of a session as on
 * the fifth: the session's repeats of each new decision's call signature within the loop window around the new ones
 * — only a window holding a new decision can hold a longer run than the one reported already (writeFindings keeps the
 * longer) — and at most LOOP_READ_LIMIT of them, the newest (a loop at hundreds of calls a second re-read in full
 * made every pass cost more than the last: 0.1–1 s a pass at 500 calls/s, bench/notes/analytics.md, "The loop detector
 * and the late-commit sweep"). Probed session by
 * session (LATERAL with ORDER BY, which Postgres does not flatten into a join over the workspace).
 */
export const loopRule = Effect.fnUntraced(function*(fresh: ReadonlyArray<NewDecision>) {
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
      windowEnd: justAfter(last),
      agentIds: [group.agent_id],
      sessionIds: [group.session_id],
      ledgerIds: ledgerIds.slice(0, LINKED_DECISIONS)
    })
  }
  return findings
})
