/**
 * The one-line summary of a session. The builder stores it with each session's rollup; the read model writes it
 * for a restricted member from the decisions they may see. Both must word it alike, so it lives here.
 */

/** What a session's rollup holds, in the builder's terms. */
export interface SessionRollup {
  readonly decision_count: number
  readonly error_count: number
  readonly total_cost_usd: number
  readonly total_tokens: number
  /** epoch ms */
  readonly started_at: number
  readonly ended_at: number
  /** the first decision (by time, then id): the summary opens with its title */
  readonly first: { readonly at: number; readonly ledger_id: string; readonly title: string }
}

const formatDuration = (ms: number): string => {
  const minutes = Math.round(ms / 60_000)
  if (minutes < 1) return "under a minute"
  if (minutes < 60) return `${minutes} min`
  const hours = Math.floor(minutes / 60)
  return `${hours} h ${String(minutes % 60).padStart(2, "0")} min`
}

const SUMMARY_TITLE_CHARS = 100

/** A short deterministic summary: what the session opened with, its size, errors, cost and time span. */
export const sessionSummary = (rollup: SessionRollup): string => {
  const title = rollup.first.title.length > SUMMARY_TITLE_CHARS
    ? `${rollup.first.title.slice(0, SUMMARY_TITLE_CHARS - 1).trimEnd()}…`
    : rollup.first.title
  const parts = [
    `${rollup.decision_count} decision${rollup.decision_count === 1 ? "" : "s"} over ${formatDuration(rollup.ended_at - rollup.started_at)}`,
    ...(rollup.error_count > 0 ? [`${rollup.error_count} error${rollup.error_count === 1 ? "" : "s"}`] : []),
    `$${rollup.total_cost_usd.toFixed(4)}`
  ]
  return `${title} (${parts.join(", ")})`
}
