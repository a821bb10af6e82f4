/**
 * Session health enriched by analytics: the query layer's health (src/query/health.ts, from the session's latest
 * decisions) plus what the detectors found in the session — loops (the same call repeated, by call signature, which
 * catches repeats the consecutive-output rule misses) and low-quality streaks. Each finding adds its title as a
 * reason and can only make the status worse, never better.
 */
import { Effect } from "effect"
import type { SessionHealth } from "../domain/ledger.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import type { Insight } from "./schema.ts"

const RANK = { healthy: 0, idle: 0, degraded: 1, failing: 2 } as const

/** Folds a session's insights into its base health. */
export const withInsights = (base: SessionHealth, insights: ReadonlyArray<Pick<Insight, "type" | "severity" | "title" | "evidence">>): SessionHealth => {
  const relevant = insights.filter((i) => i.type === "loop" || i.type === "low_quality_streak")
  if (relevant.length === 0) return base
  const worst = relevant.some((i) => i.severity === "critical") ? "failing" : "degraded"
  const loops = Math.max(base.loops, ...relevant.map((i) => i.type === "loop" ? Number(i.evidence.repeats ?? 0) - 1 : 0))
  return {
    ...base,
    status: RANK[worst] > RANK[base.status] ? worst : base.status,
    reasons: [...base.reasons.filter((r) => !r.startsWith("no errors, loops")), ...relevant.map((i) => i.title)],
    loops
  }
}

/** The detectors' findings about one session (inside the caller's scoped transaction). */
export const sessionInsights = (sessionId: string) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    return yield* sql<Pick<Insight, "type" | "severity" | "title" | "evidence">>`
      SELECT type, severity, title, evidence FROM insights
      WHERE ${sessionId.toLowerCase()} = ANY(session_ids) AND type IN ('loop', 'low_quality_streak')
      ORDER BY window_end DESC LIMIT 20`
  })
