import { run } from "./sql.ts"

/**
 * `sessions.summary` has two writers. The builder writes a short summary as it builds; analytics, where it runs,
 * writes its own (from the summary model when one is configured) in its session passes. Once analytics has written a
 * session's summary it owns it: the builder keeps updating the rollup and leaves the summary alone, so a model
 * summary is not replaced by the builder's at the session's next decision (it was, until the session had grown by
 * ten more and the model rewrote it). Analytics rewrites its summary after every pass that finds the session
 * changed.
 */
export const sessionSummaryOwner = run([`ALTER TABLE sessions ADD COLUMN summary_by_analytics boolean NOT NULL DEFAULT false`])
