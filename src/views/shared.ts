/**
 * What several views compute from read-model pages: following cursors up to a bound, and decision activity over time.
 */
import { Effect, Schema } from "effect"
import type { DecisionSummary } from "../domain/decision.ts"
import { MAX_PAGE_LIMIT } from "../query/params.ts"

/** Follows `next_cursor` until `max` items are loaded; `complete` is false when more remained. */
export const collect = <A, E, R>(
  fetch: (page: { readonly limit: number; readonly cursor?: string | undefined }) => Effect.Effect<{
    readonly data: ReadonlyArray<A>
    readonly next_cursor: string | null
  }, E, R>,
  max: number
): Effect.Effect<{ readonly items: ReadonlyArray<A>; readonly complete: boolean }, E, R> =>
  Effect.gen(function*() {
    const items: Array<A> = []
    let cursor: string | undefined
    while (items.length < max) {
      const page = yield* fetch({ limit: Math.min(MAX_PAGE_LIMIT, max - items.length), cursor })
      items.push(...page.data)
      if (page.next_cursor === null) return { items, complete: true }
      cursor = page.next_cursor
    }
    return { items, complete: false }
  })

export const ActivityBucket = Schema.Struct({
  /** ISO start of the hour or day */
  start: Schema.String,
  decisions: Schema.Number,
  errors: Schema.Number,
  cost_usd: Schema.Number
})
export type ActivityBucket = typeof ActivityBucket.Type

export const Activity = Schema.Struct({
  unit: Schema.Literals(["hour", "day"]),
  buckets: Schema.Array(ActivityBucket),
  /** decisions the buckets are computed from (the most recent ones) */
  sampled: Schema.Number,
  /** false when older decisions exist beyond the sample */
  complete: Schema.Boolean
})
export type Activity = typeof Activity.Type

const HOUR = 3_600_000
const DAY = 24 * HOUR
const MAX_BUCKETS = 60

/** Decisions per hour (spans up to two days) or per day, gaps filled with zeros, at most the last 60 buckets. */
export const activityOf = (decisions: ReadonlyArray<DecisionSummary>, complete: boolean): Activity => {
  if (decisions.length === 0) return { unit: "hour", buckets: [], sampled: 0, complete }
  const times = decisions.map((d) => Date.parse(d.created_at))
  const first = Math.min(...times)
  const last = Math.max(...times)
  const unit = last - first <= 2 * DAY ? "hour" : "day"
  const size = unit === "hour" ? HOUR : DAY
  const end = Math.floor(last / size) * size
  const start = Math.max(Math.floor(first / size) * size, end - (MAX_BUCKETS - 1) * size)
  const buckets = new Map<number, { decisions: number; errors: number; cost_usd: number }>()
  for (let t = start; t <= end; t += size) buckets.set(t, { decisions: 0, errors: 0, cost_usd: 0 })
  decisions.forEach((d, i) => {
    const bucket = buckets.get(Math.floor(times[i]! / size) * size)
    if (bucket === undefined) return
    bucket.decisions += 1
    if (d.outcome === "error") bucket.errors += 1
    bucket.cost_usd += d.cost_usd ?? 0
  })
  return {
    unit,
    buckets: [...buckets].map(([t, b]) => ({ start: new Date(t).toISOString(), ...b })),
    sampled: decisions.length,
    complete
  }
}

export const countBy = <A>(items: ReadonlyArray<A>, key: (item: A) => string): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1
  return counts
}
