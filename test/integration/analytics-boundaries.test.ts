/**
 * Analytics at period boundaries (UTC day, Monday–Sunday week, calendar month), planted through the real pipeline
 * (gateway → Redis → builder → materialiser → detectors, bench/workload) one tenant per case:
 *
 * - an error spike in the last hour of a day, a week and a month is in that period's pulse and not the next one's;
 *   `listInsights` since/until follow the same overlap rule (windows are half-open, [window_start, window_end));
 * - a loop across midnight is one insight on both days' pulses (found in one pass, grown by a second);
 * - a cost spike, low-quality streaks (ending on the last millisecond of a day, across midnight, starting at
 *   midnight) and an idle agent are on the pulse of every day their window overlaps and on no other;
 * - the same patterns mid-day are on that day only (control);
 * - sessions about one ticket on both sides of midnight are linked (shares_subject, one feature), a feature whose
 *   last activity is at 23:59 is delivered on that day's pulse, not the next, and only once it has been quiet
 *   for FEATURE_QUIET_HOURS by the Clock (TestClock);
 * - model right-sizing counts calls per UTC day (twenty up to 23:59:30 are a finding of that day only);
 * - periodOf / previousOf on the last and first millisecond of days, weeks and months.
 * - a feature's status is decided on its exact quiet time (a feature quiet for 23 h 59 min is in progress), and a
 *   session whose last answer ends exactly at midnight belongs to the day before only.
 *
 * Days used: D = Wednesday 2025-11-12; Sunday 2025-11-16 ends its week; 2025-12-31 ends a month and a year;
 * M = Wednesday 2025-11-19 for the mid-day control.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { type WorkloadPipeline, workloadPipeline } from "../../bench/workload/pipeline.ts"
import { type Pattern, planWorkload, type Workload, type WorkloadCall } from "../../bench/workload/scenario.ts"
import { RULES } from "../../src/analytics/detect/finding.ts"
import { periodOf, previousOf } from "../../src/analytics/Pulse.ts"
import { FEATURE_QUIET_HOURS } from "../../src/analytics/rules.ts"
import type { Insight, PulseReport } from "../../src/analytics/schema.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
const at = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()

// ---------------------------------------------------------------------------------------------------------
// Calls: the planted workload's calls (same agents, models, markers), renamed and moved in time

const PLANTED = planWorkload("planted").calls
const plantedOf = (pattern: Pattern) => PLANTED.filter((call) => call.pattern === pattern)
const TRIAGE = plantedOf("error-burst")[0]!
const LOOP = plantedOf("loop")[0]!
const REPORTER = plantedOf("low-quality")[0]!
const EXPORTS = plantedOf("cost-spike")
const SYNC = plantedOf("idle-agent")
const REVIEWER = PLANTED.find((call) => call.key.startsWith("base/reviewer/"))!

/** A planted call moved to `when` under a new key (its messages, model, tools kept); a fixed latency. */
const moved = (base: WorkloadCall, key: string, when: number, changes: Partial<WorkloadCall> = {}): WorkloadCall => ({
  ...base,
  key,
  at: when,
  latency_ms: 1_000,
  ...changes
})

/** A call like `base` (its agent, model, tools) asking `ask` as a new conversation. */
const asking = (base: WorkloadCall, key: string, when: number, ask: string, changes: Partial<WorkloadCall> = {}): WorkloadCall =>
  moved(base, key, when, { execution_id: null, messages: [{ role: "user", content: ask }], ...changes })

const workloadOf = (calls: ReadonlyArray<WorkloadCall>): Workload => {
  const sorted = [...calls].sort((a, b) => a.at - b.at || a.key.localeCompare(b.key))
  return { variant: "planted", start: sorted[0]!.at, end: sorted.at(-1)!.at + HOUR, calls: sorted }
}

const TICKETS = [
  "I was charged twice for my March subscription.", "The mobile app crashes when I open settings.",
  "I cannot change the email on my profile.", "Exports time out for our largest project.",
  "Our card was declined although it is valid.", "Two-factor codes never arrive by text.",
  "The calendar import skips recurring meetings.", "We need a refund for unused seats.",
  "Search returns nothing for accented names.", "Please close the account of a former employee.",
  "The receipt is missing our tax number.", "Dark mode makes tables unreadable."
]

/** The minutes past the hour of the failing calls: eight in the hour, the last half a minute before its end. */
const ERROR_MINUTES = [2, 10, 18, 26, 34, 42, 50, 59.5]

/**
 * The planted error burst moved to the hour starting at `hour`: eight provider failures of the triage agent in that
 * hour, after a quiet day (a successful call every two hours in the 24 h before).
 */
const errorSpike = (hour: number, prefix = "") => [
  ...TICKETS.map((ticket, n) =>
    asking(TRIAGE, `${prefix}baseline/${n}`, hour - 23.5 * HOUR + n * 2 * HOUR, `Classify this support ticket as billing, technical or account: "${ticket}"`)
  ),
  ...ERROR_MINUTES.map((minute, n) =>
    asking(TRIAGE, `${prefix}burst/${n}`, hour + minute * MINUTE, `Classify this escalated ticket as billing, technical or account: "${TICKETS[n]}" [[error:503]]`)
  )
]

const LOOP_ASK = "[[tool]] Check whether the nightly ledger export job has finished."
const loopCall = (key: string, when: number) => asking(LOOP, key, when, LOOP_ASK)

const TOPICS = ["pricing", "onboarding", "support", "billing", "security", "reporting", "exports"]
/** Low-quality answers (cut off at the token limit) of one agent, one per time, in different words. */
const streak = (prefix: string, agent: string, times: ReadonlyArray<number>) =>
  times.map((when, n) =>
    asking(REPORTER, `${prefix}/${n}`, when, `Summarize the churn interviews about ${TOPICS[n]}. [[truncate]]`, { agent_id: agent })
  )

const SUMMARIES = [
  "Summarize the sprint review: seven stories closed and two carried over.",
  "Summarize the hiring update: two engineers accepted offers.",
  "Summarize the vendor assessment: the new vendor is cheaper.",
  "Summarize the support week: ticket volume rose after the release.",
  "Summarize the partner update: the reseller in Brazil launched."
]
/** The planted cost spike at `hour` (twelve huge summaries in it), after ordinary summaries at `baseline` times. */
const costSpike = (hour: number, baseline: ReadonlyArray<number>, prefix = "") => [
  ...baseline.map((when, n) => asking(REPORTER, `${prefix}summary/${n}`, when, SUMMARIES[n]!)),
  ...EXPORTS.map((call, n) => moved(call, `${prefix}export/${n}`, hour + (3 + n * 4) * MINUTE))
]

// ---------------------------------------------------------------------------------------------------------
// Reading the answers

const ids = (insights: ReadonlyArray<Insight>) => insights.map((insight) => insight.insight_id)

class Fixture extends Context.Service<Fixture, { readonly pipeline: WorkloadPipeline }>()("test/AnalyticsBoundariesFixture") {}

const FixtureLive = Layer.effect(Fixture, Effect.map(workloadPipeline(), (pipeline) => ({ pipeline })))

/** Reads of one tenant. */
const reader = (pipeline: WorkloadPipeline, principal: Principal) => {
  const pulse = (period: "day" | "week" | "month", date: string) => pipeline.query.getPulseReport(principal, { period, date })
  return {
    pulse,
    range: (since: string, until: string) => pipeline.query.getPulseReport(principal, { period: "range", since, until }),
    insights: (params: { readonly since?: string; readonly until?: string; readonly types?: ReadonlyArray<Insight["type"]> } = {}) =>
      Effect.map(pipeline.query.listInsights(principal, { limit: 100, ...params }), (page) => page.data),
    /** whether the insight is on the pulse of the period containing `date` */
    onPulse: (period: "day" | "week" | "month", date: string, insight: Insight) =>
      Effect.map(pulse(period, date), (report) => ids(report.new_insights).includes(insight.insight_id))
  }
}

/** The days (UTC, `YYYY-MM-DD`) in [from, to] whose day pulse lists the insight. */
const daysListing = (read: ReturnType<typeof reader>, insight: Insight, from: string, to: string) =>
  Effect.gen(function*() {
    const days: Array<string> = []
    for (let day = at(from); day <= at(to); day += DAY) {
      if (yield* read.onPulse("day", iso(day), insight)) days.push(iso(day).slice(0, 10))
    }
    return days
  })

const one = (insights: ReadonlyArray<Insight>, type: Insight["type"]) => {
  const found = insights.filter((insight) => insight.type === type)
  assert.strictEqual(found.length, 1, `one ${type}: ${JSON.stringify(insights.map((i) => [i.type, i.window_start, i.window_end]))}`)
  return found[0]!
}

const notOver = (report: PulseReport) => report.partial.reasons.some((reason) => reason.startsWith("the period is not over"))

/** An error spike in the hour from `hour` (ISO), in its own tenant: the one insight, its window, its tenant. */
const plantErrorSpike = (pipeline: WorkloadPipeline, hour: string, tenantName: string) =>
  Effect.gen(function*() {
    const tenant = yield* pipeline.run(workloadOf(errorSpike(at(hour))), tenantName)
    const read = reader(pipeline, tenant.principal)
    const insights = yield* read.insights()
    assert.deepStrictEqual(insights.map((i) => i.type), ["error_rate_spike"], "nothing else in a quiet day and a burst")
    const spike = insights[0]!
    assert.strictEqual(spike.window_start, iso(at(hour)))
    assert.strictEqual(spike.window_end, iso(at(hour) + HOUR))
    assert.deepStrictEqual([...spike.ledger_ids].sort(), [...tenant.ledgerIds("burst/")].sort())
    assert.strictEqual(spike.evidence.hour_errors, ERROR_MINUTES.length)
    return { tenant, read, spike }
  })

// ---------------------------------------------------------------------------------------------------------

describe("analytics at period boundaries", () => {
  layer(FixtureLive, { timeout: 300_000, excludeTestServices: true })((it) => {
    it.effect("an error spike in the 23:00 hour is on that day's pulse, not the next day's; listInsights since/until agree", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const { read, spike, tenant } = yield* plantErrorSpike(pipeline, "2025-11-12T23:00:00.000Z", "day-edge")

        // anywhere in D (a date alone is its midnight), and nowhere else
        for (const date of ["2025-11-12", "2025-11-12T00:00:00.000Z", "2025-11-12T12:00:00Z", "2025-11-12T23:30:00Z", "2025-11-12T23:59:59.999Z"]) {
          const report = yield* read.pulse("day", date)
          assert.strictEqual(report.period.start, "2025-11-12T00:00:00.000Z", date)
          assert.deepStrictEqual(ids(report.new_insights), [spike.insight_id], date)
        }
        const next = yield* read.pulse("day", "2025-11-13T00:00:00.000Z")
        assert.strictEqual(next.period.start, "2025-11-13T00:00:00.000Z")
        assert.deepStrictEqual(next.new_insights, [], "not on D+1's pulse (before the fix it was there, and not on D's)")
        assert.deepStrictEqual(yield* daysListing(read, spike, "2025-11-10", "2025-11-15"), ["2025-11-12"])
        assert.isTrue(yield* read.onPulse("week", "2025-11-12T23:59:59.999Z", spike))

        // the figures follow the decisions' own day: D has the burst, D+1 nothing; D-1 holds the first baseline call
        const day = yield* read.pulse("day", "2025-11-12T18:00:00Z")
        const burstAndBaseline = tenant.results.filter((r) => r.call.at >= at("2025-11-12T00:00:00Z") && r.call.at < at("2025-11-13T00:00:00Z"))
        assert.strictEqual(day.totals.decisions, burstAndBaseline.length)
        assert.strictEqual(day.totals.errors, ERROR_MINUTES.length)
        assert.strictEqual(day.previous_totals.decisions, 1)
        assert.strictEqual(next.totals.decisions, 0)
        assert.strictEqual(next.previous_totals.errors, ERROR_MINUTES.length)

        // listInsights: the window [23:00, 00:00) overlaps [since, until)
        const listed = (params: { since?: string; until?: string }) => Effect.map(read.insights(params), ids)
        assert.deepStrictEqual(yield* listed({ since: "2025-11-13T00:00:00.000Z" }), [], "since D+1 00:00")
        assert.deepStrictEqual(yield* listed({ until: "2025-11-12T23:30:00Z" }), [spike.insight_id], "until D 23:30")
        assert.deepStrictEqual(yield* listed({ since: "2025-11-12T23:59:59.999Z" }), [spike.insight_id], "since its last millisecond")
        assert.deepStrictEqual(yield* listed({ until: "2025-11-12T23:00:00.000Z" }), [], "until its first instant")
        assert.deepStrictEqual(yield* listed({ until: "2025-11-12T23:00:00.001Z" }), [spike.insight_id])
        assert.deepStrictEqual(yield* listed({ since: "2025-11-12T00:00:00Z", until: "2025-11-13T00:00:00Z" }), [spike.insight_id])
        assert.deepStrictEqual(yield* listed({ since: "2025-11-13T00:00:00Z", until: "2025-11-14T00:00:00Z" }), [])

        // a range off the hour counts the decisions of its partial hours, and lists the insights its span overlaps
        for (const [since, until] of [
          ["2025-11-12T23:30:00Z", "2025-11-13T00:30:00Z"],
          ["2025-11-12T23:10:00Z", "2025-11-12T23:20:00Z"],
          ["2025-11-12T21:15:00Z", "2025-11-12T23:59:00Z"],
          ["2025-11-12T23:59:30.000Z", "2025-11-12T23:59:30.001Z"]
        ] as const) {
          const range = yield* read.range(since, until)
          const inside = tenant.results.filter((r) => r.call.at >= at(since) && r.call.at < at(until))
          assert.strictEqual(range.totals.decisions, inside.length, `${since}–${until}`)
          assert.strictEqual(range.totals.errors, inside.filter((r) => r.call.key.includes("burst/")).length, `${since}–${until}`)
          assert.deepStrictEqual(ids(range.new_insights), [spike.insight_id], `${since}–${until}`)
        }
        assert.deepStrictEqual((yield* read.range("2025-11-13T00:00:00Z", "2025-11-13T06:00:00Z")).new_insights, [])
      }))

    it.effect("an error spike in the last hour of a week (Sunday 23:xx) is that week's, not the next week's", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const { read, spike } = yield* plantErrorSpike(pipeline, "2025-11-16T23:00:00.000Z", "week-edge")
        for (const date of ["2025-11-10T00:00:00.000Z", "2025-11-12T12:00:00Z", "2025-11-16T23:59:59.999Z"]) {
          const week = yield* read.pulse("week", date)
          assert.deepStrictEqual([week.period.start, week.period.end], ["2025-11-10T00:00:00.000Z", "2025-11-17T00:00:00.000Z"], date)
          assert.deepStrictEqual(ids(week.new_insights), [spike.insight_id], date)
        }
        const nextWeek = yield* read.pulse("week", "2025-11-17T00:00:00.000Z")
        assert.strictEqual(nextWeek.period.start, "2025-11-17T00:00:00.000Z")
        assert.strictEqual(nextWeek.previous_period.start, "2025-11-10T00:00:00.000Z")
        assert.deepStrictEqual(nextWeek.new_insights, [])
        assert.strictEqual(nextWeek.previous_totals.errors, ERROR_MINUTES.length)
        assert.isTrue(yield* read.onPulse("day", "2025-11-16T12:00:00Z", spike))
        assert.isFalse(yield* read.onPulse("day", "2025-11-17T00:00:00Z", spike))
        // Sunday is in the month too, and a range across the weeks' edge holds it
        assert.isTrue(yield* read.onPulse("month", "2025-11-01T00:00:00Z", spike))
        assert.deepStrictEqual(ids((yield* read.range("2025-11-16T23:59:00Z", "2025-11-17T00:01:00Z")).new_insights), [spike.insight_id])
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-17T00:00:00Z" })), [])
      }))

    it.effect("an error spike in the last hour of a month (and year) is that month's, not the next month's", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const { read, spike } = yield* plantErrorSpike(pipeline, "2025-12-31T23:00:00.000Z", "month-edge")
        for (const date of ["2025-12-01T00:00:00.000Z", "2025-12-15T12:00:00Z", "2025-12-31T23:59:59.999Z"]) {
          const month = yield* read.pulse("month", date)
          assert.deepStrictEqual([month.period.kind, month.period.start, month.period.end], ["month", "2025-12-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"], date)
          assert.deepStrictEqual(month.previous_period, { start: "2025-11-01T00:00:00.000Z", end: "2025-12-01T00:00:00.000Z" })
          assert.deepStrictEqual(ids(month.new_insights), [spike.insight_id], date)
          assert.strictEqual(month.totals.errors, ERROR_MINUTES.length)
        }
        const january = yield* read.pulse("month", "2026-01-01T00:00:00.000Z")
        assert.deepStrictEqual([january.period.start, january.period.end], ["2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"])
        assert.deepStrictEqual(january.previous_period, { start: "2025-12-01T00:00:00.000Z", end: "2026-01-01T00:00:00.000Z" })
        assert.deepStrictEqual(january.new_insights, [])
        assert.strictEqual(january.totals.decisions, 0)
        assert.strictEqual(january.previous_totals.errors, ERROR_MINUTES.length)
        // the week from Monday 2025-12-29 spans the two months and the two years: it holds the spike
        const week = yield* read.pulse("week", "2026-01-01T00:00:00Z")
        assert.strictEqual(week.period.start, "2025-12-29T00:00:00.000Z")
        assert.deepStrictEqual(ids(week.new_insights), [spike.insight_id])
        assert.deepStrictEqual(yield* daysListing(read, spike, "2025-12-30", "2026-01-02"), ["2025-12-31"])
      }))

    it.effect("a loop across midnight is one insight on both days' pulses, found in one pass or grown by a later one", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const before = [53, 55, 57, 59].map((minute, n) => loopCall(`loop/${n}`, at("2025-11-12T23:00:00Z") + minute * MINUTE))
        const after = [1, 3].map((minute, n) => loopCall(`loop/${n + 4}`, at("2025-11-13T00:00:00Z") + minute * MINUTE))

        // one pass: 23:53 → 00:03, six repeats
        const whole = yield* pipeline.run(workloadOf([...before, ...after]), "loop-midnight")
        const read = reader(pipeline, whole.principal)
        const loop = one(yield* read.insights(), "loop")
        assert.strictEqual(loop.evidence.repeats, 6)
        assert.deepStrictEqual([...loop.ledger_ids].sort(), [...whole.ledgerIds("loop/")].sort())
        assert.strictEqual(loop.window_start, "2025-11-12T23:53:00.000Z")
        assert.strictEqual(loop.window_end, "2025-11-13T00:03:00.001Z", "just after its last repeat")
        assert.deepStrictEqual(yield* daysListing(read, loop, "2025-11-11", "2025-11-14"), ["2025-11-12", "2025-11-13"])
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-13T00:00:00Z" })), [loop.insight_id])
        assert.deepStrictEqual(ids(yield* read.insights({ until: "2025-11-13T00:00:00Z" })), [loop.insight_id])
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-13T00:03:00.001Z" })), [])

        // two passes, as the calls arrive: four repeats before midnight are a loop of D; two more after it grow
        // the same insight, which then belongs to both days
        const first = yield* pipeline.run(workloadOf(before), "loop-passes")
        const stepwise = reader(pipeline, first.principal)
        const early = one(yield* stepwise.insights(), "loop")
        assert.strictEqual(early.evidence.repeats, 4)
        assert.strictEqual(early.window_end, "2025-11-12T23:59:00.001Z")
        assert.deepStrictEqual(yield* daysListing(stepwise, early, "2025-11-11", "2025-11-14"), ["2025-11-12"])
        yield* pipeline.run(workloadOf(after), "loop-passes", { into: first.tenant })
        const grown = one(yield* stepwise.insights(), "loop")
        assert.strictEqual(grown.insight_id, early.insight_id)
        assert.strictEqual(grown.evidence.repeats, 6)
        assert.deepStrictEqual([grown.window_start, grown.window_end], [loop.window_start, loop.window_end])
        assert.deepStrictEqual(yield* daysListing(stepwise, grown, "2025-11-11", "2025-11-14"), ["2025-11-12", "2025-11-13"])
      }))

    it.effect("a cost spike in the 23:00 hour is on that day's pulse only", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const hour = at("2025-11-12T23:00:00Z")
        const baseline = [12, 14, 16, 18, 20].map((h) => at("2025-11-12T00:10:00Z") + h * HOUR)
        const tenant = yield* pipeline.run(workloadOf(costSpike(hour, baseline)), "cost-edge")
        const read = reader(pipeline, tenant.principal)
        const insights = yield* read.insights()
        const spike = one(insights, "cost_spike")
        assert.deepStrictEqual(insights.map((i) => i.type), ["cost_spike"])
        assert.deepStrictEqual([spike.window_start, spike.window_end], ["2025-11-12T23:00:00.000Z", "2025-11-13T00:00:00.000Z"])
        assert.strictEqual(spike.evidence.baseline_active_hours, baseline.length)
        assert.includeMembers([...spike.ledger_ids], [...tenant.ledgerIds("export/")])
        assert.deepStrictEqual(yield* daysListing(read, spike, "2025-11-10", "2025-11-15"), ["2025-11-12"])
        // the money is on D too
        const day = yield* read.pulse("day", "2025-11-12T23:59:59.999Z")
        const next = yield* read.pulse("day", "2025-11-13T00:00:00.000Z")
        assert.isAbove(day.totals.cost_usd, spike.evidence.hour_cost_usd as number - 1e-9)
        assert.strictEqual(next.totals.cost_usd, 0)
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-13T00:00:00Z" })), [])
      }))

    it.effect("low-quality streaks: ending on a day's last millisecond, across midnight, starting at midnight", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const midnight = at("2025-11-13T00:00:00.000Z")
        const tenant = yield* pipeline.run(workloadOf([
          // the last one at 23:59:59.999: the window ends at midnight, exclusive
          ...streak("late", "late-reporter", [-20, -15, -10, -5].map((m) => midnight + m * MINUTE).concat(midnight - 1)),
          ...streak("night", "night-reporter", [-8, -4, 0, 4, 8].map((m) => midnight + m * MINUTE)),
          // the first one at 00:00:00.000: the window starts at midnight, inclusive
          ...streak("dawn", "dawn-reporter", [0, 4, 8, 12, 16].map((m) => midnight + m * MINUTE))
        ]), "streak-edge")
        const read = reader(pipeline, tenant.principal)
        const insights = yield* read.insights()
        assert.deepStrictEqual(insights.map((i) => i.type), ["low_quality_streak", "low_quality_streak", "low_quality_streak"])
        const of = (agent: string) => insights.find((i) => i.agent_ids.includes(agent))!
        const late = of("late-reporter")
        const night = of("night-reporter")
        const dawn = of("dawn-reporter")
        for (const [insight, prefix] of [[late, "late/"], [night, "night/"], [dawn, "dawn/"]] as const) {
          assert.strictEqual(insight.evidence.streak_length, 5, prefix)
          assert.deepStrictEqual([...insight.ledger_ids].sort(), [...tenant.ledgerIds(prefix)].sort(), prefix)
        }
        assert.deepStrictEqual([late.window_start, late.window_end], ["2025-11-12T23:40:00.000Z", "2025-11-13T00:00:00.000Z"])
        assert.deepStrictEqual([night.window_start, night.window_end], ["2025-11-12T23:52:00.000Z", "2025-11-13T00:08:00.001Z"])
        assert.deepStrictEqual([dawn.window_start, dawn.window_end], ["2025-11-13T00:00:00.000Z", "2025-11-13T00:16:00.001Z"])

        assert.deepStrictEqual(yield* daysListing(read, late, "2025-11-11", "2025-11-14"), ["2025-11-12"])
        assert.deepStrictEqual(yield* daysListing(read, night, "2025-11-11", "2025-11-14"), ["2025-11-12", "2025-11-13"])
        assert.deepStrictEqual(yield* daysListing(read, dawn, "2025-11-11", "2025-11-14"), ["2025-11-13"])
        const listed = (params: { since?: string; until?: string }) => Effect.map(read.insights(params), (found) => ids(found).sort())
        assert.deepStrictEqual(yield* listed({ since: "2025-11-13T00:00:00.000Z" }), [night.insight_id, dawn.insight_id].sort())
        assert.deepStrictEqual(yield* listed({ until: "2025-11-13T00:00:00.000Z" }), [late.insight_id, night.insight_id].sort())
      }))

    it.effect("an idle agent's spell, from its last call's end to the workspace's newest decision, is on the days it overlaps", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        // ten calls of the sync agent, the last from 23:30:00 to 23:30:01 on D; the workspace's newest decision is at
        // midnight D+2, exactly: the spell is [D 23:30:01, D+2 00:00), on D and D+1 and not on D+2
        const sync = SYNC.slice(0, 10).map((call, n) => moved(call, `sync/${n}`, at("2025-11-12T22:45:00Z") + n * 5 * MINUTE))
        const work = ["2025-11-13T06:00:00Z", "2025-11-13T15:00:00Z", "2025-11-14T00:00:00.000Z"].map((when, n) =>
          asking(REVIEWER, `work/${n}`, at(when), `Review change ${["one", "two", "three"][n]} to the billing service.`, { agent_id: "worker" })
        )
        const tenant = yield* pipeline.run(workloadOf([...sync, ...work]), "idle-edge")
        const read = reader(pipeline, tenant.principal)
        const idle = one(yield* read.insights(), "idle_agent")
        assert.deepStrictEqual(idle.agent_ids, ["legacy-sync"])
        assert.deepStrictEqual(idle.ledger_ids, tenant.ledgerIds("sync/9"))
        assert.strictEqual(idle.window_start, "2025-11-12T23:30:01.000Z", "last_seen_at: the end of its last call")
        assert.strictEqual(idle.window_end, "2025-11-14T00:00:00.000Z", "the workspace's newest decision")
        assert.strictEqual(idle.evidence.idle_hours, 24.5)
        assert.isAtLeast((at(idle.window_end) - at(idle.window_start)) / HOUR, RULES.idle_agent.idle_hours)
        assert.deepStrictEqual(yield* daysListing(read, idle, "2025-11-11", "2025-11-15"), ["2025-11-12", "2025-11-13"])
        assert.isTrue(yield* read.onPulse("week", "2025-11-13T00:00:00Z", idle))
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-14T00:00:00.000Z" })), [])
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-13T23:59:59.999Z" })), [idle.insight_id])
        assert.deepStrictEqual(ids(yield* read.insights({ until: "2025-11-12T23:30:01.000Z" })), [])
        assert.deepStrictEqual(ids(yield* read.insights({ until: "2025-11-12T23:30:01.001Z" })), [idle.insight_id])
      }))

    it.effect("control: the same patterns inside a day are on that day's pulse only", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const day = at("2025-11-19T00:00:00Z")
        const tenant = yield* pipeline.run(workloadOf([
          ...errorSpike(day + 12 * HOUR, "triage/"),
          ...[10, 11, 12, 13, 14, 15].map((minute, n) => loopCall(`loop/${n}`, day + 13 * HOUR + minute * MINUTE)),
          ...streak("streak", "digest-reporter", [0, 4, 8, 12, 16].map((m) => day + 14 * HOUR + m * MINUTE)),
          ...costSpike(day + 16 * HOUR, [6, 8, 10].map((h) => day + h * HOUR + 10 * MINUTE), "reporter/")
        ]), "mid-day")
        const read = reader(pipeline, tenant.principal)
        const insights = yield* read.insights()
        assert.deepStrictEqual(insights.map((i) => i.type).sort(), ["cost_spike", "error_rate_spike", "loop", "low_quality_streak"])
        for (const insight of insights) {
          assert.isTrue(insight.window_start >= "2025-11-19T00:00:00.000Z" && insight.window_end <= "2025-11-20T00:00:00.000Z", insight.type)
        }
        const report = yield* read.pulse("day", "2025-11-19T12:00:00Z")
        assert.deepStrictEqual(ids(report.new_insights).sort(), ids(insights).sort())
        assert.deepStrictEqual((yield* read.pulse("day", "2025-11-18T23:59:59.999Z")).new_insights, [])
        assert.deepStrictEqual((yield* read.pulse("day", "2025-11-20T00:00:00.000Z")).new_insights, [])
        assert.deepStrictEqual(ids((yield* read.pulse("week", "2025-11-19T12:00:00Z")).new_insights).sort(), ids(insights).sort())
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-20T00:00:00Z" })), [])
        assert.deepStrictEqual(ids(yield* read.insights({ until: "2025-11-19T00:00:00Z" })), [])
      }))

    it.effect("features at midnight: sessions on both sides are linked; delivered on the day of the last activity, once quiet by the Clock", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const byKey = (key: string) => PLANTED.find((call) => call.key === key)!
        // PAY-231: debugged in the evening of D, reviewed at 23:59:00–23:59:01 (its last activity)
        // PAY-245: planned at 23:55 on D, implemented from the plan just after midnight, reviewed at 01:30 on D+1
        const calls = [
          moved(byKey("feature-x/debug/0"), "feature-x/debug/0", at("2025-11-12T21:00:00Z")),
          moved(byKey("feature-x/debug/1"), "feature-x/debug/1", at("2025-11-12T21:04:00Z")),
          moved(byKey("feature-x/review/0"), "feature-x/review/0", at("2025-11-12T23:59:00Z")),
          moved(byKey("feature-y/plan/0"), "feature-y/plan/0", at("2025-11-12T23:55:00Z")),
          moved(byKey("feature-y/implement/0"), "feature-y/implement/0", at("2025-11-13T00:05:00Z")),
          moved(byKey("feature-y/implement/1"), "feature-y/implement/1", at("2025-11-13T00:09:00Z")),
          moved(byKey("feature-y/review/0"), "feature-y/review/0", at("2025-11-13T01:30:00Z"))
        ]
        const tenant = yield* pipeline.run(workloadOf(calls), "features-edge")
        const read = reader(pipeline, tenant.principal)
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const sessionOf = (key: string) =>
          Effect.map(
            tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
              sql<{ id: string }>`SELECT session_id::text AS id FROM decisions WHERE ledger_id = ${tenant.ledgerIds(key)[0]!}::uuid`
            )),
            (rows) => rows[0]!.id
          )
        const plan = yield* sessionOf("feature-y/plan")
        const implement = yield* sessionOf("feature-y/implement")
        assert.notStrictEqual(plan, implement)

        // the sessions either side of midnight share the ticket, the file and the service
        const shared = yield* pipeline.query.queryGraph(tenant.principal, { session_id: plan, edge_types: ["shares_subject"], depth: 1 })
        const edge = shared.edges.find((e) => [e.source, e.target].sort().join() === [`session:${plan}`, `session:${implement}`].sort().join())
        assert.isDefined(edge, "plan (D 23:55) and implementation (D+1 00:05) share subjects")
        assert.isAtLeast(edge!.weight, 2)
        const network = yield* pipeline.query.queryGraph(tenant.principal, { mode: "agent_network" })
        assert.isTrue(network.edges.some((e) => e.type === "handed_off_to" && e.source === "agent:planner" && e.target === "agent:coder"))

        const features = (yield* pipeline.query.listFeatures(tenant.principal, { as_of: "2025-11-20T00:00:00Z", limit: 100 })).data
        const byTicket = new Map(features.map((f) => [f.title.split(" ")[0]!, f]))
        const x = byTicket.get("PAY-231")!
        const y = byTicket.get("PAY-245")!
        assert.isDefined(x)
        assert.isDefined(y)
        assert.strictEqual(x.last_activity_at, "2025-11-12T23:59:01.000Z")
        assert.deepStrictEqual([y.started_at, y.session_count], ["2025-11-12T23:55:00.000Z", 3])
        assert.deepStrictEqual([x.status, y.status], ["delivered", "delivered"])
        const ySessions = (yield* pipeline.query.getFeature(tenant.principal, { feature_id: y.feature_id })).sessions.map((s) => s.session_id)
        assert.includeMembers(ySessions, [plan, implement])
        // list filters by activity cross midnight too: Y is active on D+1 and started on D
        const activeSince = (since: string) =>
          Effect.map(pipeline.query.listFeatures(tenant.principal, { as_of: "2025-11-20T00:00:00Z", since }), (page) => page.data.map((f) => f.feature_id))
        assert.deepStrictEqual(yield* activeSince("2025-11-13T00:00:00Z"), [y.feature_id])
        assert.includeMembers(yield* activeSince("2025-11-12T23:59:01.000Z"), [x.feature_id, y.feature_id])

        // the two retry features look like the same work, now active on either side of midnight
        const suggestions = (yield* pipeline.query.listFeatureMergeSuggestions(tenant.principal, {})).data
        const pair = suggestions.find((s) => [s.feature_a.feature_id, s.feature_b.feature_id].sort().join() === [x.feature_id, y.feature_id].sort().join())
        assert.isDefined(pair, JSON.stringify(suggestions))
        assert.isAtLeast(pair!.signals.time_proximity, 0.95)

        // delivered on the pulse of the day of their last activity (live clock: long quiet since)
        const delivered = (date: string) => Effect.map(read.pulse("day", date), (report) => report.features_delivered.map((f) => f.feature_id))
        assert.deepStrictEqual(yield* delivered("2025-11-12T12:00:00Z"), [x.feature_id])
        assert.deepStrictEqual(yield* delivered("2025-11-13T00:00:00.000Z"), [y.feature_id])
        assert.deepStrictEqual(yield* delivered("2025-11-14T00:00:00Z"), [])
        assert.sameMembers(
          (yield* read.pulse("week", "2025-11-12T00:00:00Z")).features_delivered.map((f) => f.feature_id),
          [x.feature_id, y.feature_id]
        )

        // by the Clock: the pulse's `now` decides partial periods and delivery. AnalyticsQuery reads
        // Clock.currentTimeMillis on each call, from the caller's fiber; the layer excludes the test services (the
        // pipeline's polling needs the live clock), so a TestClock is provided around these reads only.
        yield* Effect.gen(function*() {
          // the last minute of D+1: its own pulse is partial, D is over; PAY-231 has been quiet 23 h 59 min
          yield* TestClock.setTime(at("2025-11-13T23:59:00.000Z"))
          const today = yield* pipeline.query.getPulseReport(tenant.principal, {})
          assert.deepStrictEqual([today.period.kind, today.period.start], ["day", "2025-11-13T00:00:00.000Z"])
          assert.isTrue(today.partial.is_partial)
          assert.isTrue(notOver(today))
          assert.isTrue(today.partial.reasons.some((r) => r.includes("2025-11-13T23:59:00.000Z")))
          assert.deepStrictEqual(today.features_delivered, [], "PAY-245 was last active at 01:30, 22.5 h ago")
          const yesterday = yield* read.pulse("day", "2025-11-12T12:00:00Z")
          assert.isFalse(notOver(yesterday))
          assert.deepStrictEqual(yesterday.features_delivered, [], "PAY-231 is quiet for less than 24 h")
          // the status filter agrees
          const inProgress = (yield* pipeline.query.listFeatures(tenant.principal, { status: "in_progress" })).data.map((f) => f.feature_id)
          assert.sameMembers(inProgress, [x.feature_id, y.feature_id])

          // FEATURE_QUIET_HOURS after its last activity, to the millisecond: delivered on D
          yield* TestClock.setTime(at(x.last_activity_at) + FEATURE_QUIET_HOURS * HOUR)
          assert.deepStrictEqual(
            (yield* read.pulse("day", "2025-11-12T12:00:00Z")).features_delivered.map((f) => f.feature_id),
            [x.feature_id]
          )
          assert.deepStrictEqual((yield* read.pulse("day", "2025-11-13T12:00:00Z")).features_delivered, [])
          const nowDelivered = yield* pipeline.query.listFeatures(tenant.principal, { status: "delivered" })
          assert.deepStrictEqual(nowDelivered.data.map((f) => [f.feature_id, f.status]), [[x.feature_id, "delivered"]])
          assert.strictEqual(nowDelivered.as_of, iso(at(x.last_activity_at) + FEATURE_QUIET_HOURS * HOUR))

          // midnight: D+1 is over (its end is now), the default period is D+2
          yield* TestClock.setTime(at("2025-11-14T00:00:00.000Z"))
          assert.isFalse(notOver(yield* read.pulse("day", "2025-11-13T12:00:00Z")))
          const fresh = yield* pipeline.query.getPulseReport(tenant.principal, { period: "day" })
          assert.strictEqual(fresh.period.start, "2025-11-14T00:00:00.000Z")
          assert.isTrue(notOver(fresh))
          // a complete, caught-up day after a recorded one: nothing partial
          yield* TestClock.setTime(at("2025-11-20T00:00:00.000Z"))
          const later = yield* read.pulse("day", "2025-11-14T12:00:00Z")
          assert.deepStrictEqual(later.partial, { is_partial: false, reasons: [] })
        }).pipe(Effect.provide(TestClock.layer()))
      }))

    it.effect("model right-sizing counts a UTC day: twenty calls up to 23:59:30 are that day's, ten after midnight are not enough", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const classifications = [...plantedOf("right-sizing").filter((call) => call.key.startsWith("right-sizing/")), ...PLANTED.filter((call) => call.key.startsWith("intake-day-two/"))]
        const day = at("2025-11-12T00:00:00Z")
        const times = [
          ...Array.from({ length: 19 }, (_, n) => day + 14 * HOUR + n * 30 * MINUTE),
          day + DAY - 30_000,
          ...Array.from({ length: 10 }, (_, n) => day + DAY + n * 3 * MINUTE)
        ]
        const tenant = yield* pipeline.run(workloadOf(times.map((when, n) => moved(classifications[n]!, `sizing/${n}`, when))), "sizing-edge")
        const read = reader(pipeline, tenant.principal)
        const insights = yield* read.insights()
        assert.deepStrictEqual(insights.map((i) => i.type), ["model_right_sizing"], "D+1's ten calls are not a finding")
        const sizing = insights[0]!
        assert.strictEqual(sizing.evidence.simple_calls, RULES.model_right_sizing.min_calls)
        assert.deepStrictEqual([sizing.window_start, sizing.window_end], ["2025-11-12T00:00:00.000Z", "2025-11-13T00:00:00.000Z"])
        assert.deepStrictEqual(yield* daysListing(read, sizing, "2025-11-11", "2025-11-14"), ["2025-11-12"])
        assert.deepStrictEqual(ids(yield* read.insights({ since: "2025-11-13T00:00:00.000Z" })), [])
      }))

    // the status was decided on the quiet time rounded to 0.1 h: from 23 h 57 min a feature was `delivered` in its
    // payload while the status filter and the pulse (exact: last_at <= as_of - 24 h) still had it in progress
    it.effect("a feature quiet for 23 h 59 min is in progress, in its status as in the status filter", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const byKey = (key: string) => PLANTED.find((call) => call.key === key)!
        const tenant = yield* pipeline.run(workloadOf([
          moved(byKey("feature-x/debug/0"), "feature-x/debug/0", at("2025-11-12T21:00:00Z")),
          moved(byKey("feature-x/debug/1"), "feature-x/debug/1", at("2025-11-12T21:04:00Z")),
          moved(byKey("feature-x/review/0"), "feature-x/review/0", at("2025-11-12T23:59:00Z"))
        ]), "status-edge")
        const asOf = iso(at("2025-11-12T23:59:01.000Z") + FEATURE_QUIET_HOURS * HOUR - MINUTE)
        const filtered = (yield* pipeline.query.listFeatures(tenant.principal, { as_of: asOf, status: "in_progress" })).data
        assert.strictEqual(filtered.length, 1, "the filter: in progress")
        assert.strictEqual(filtered[0]!.last_activity_at, "2025-11-12T23:59:01.000Z")
        assert.strictEqual(filtered[0]!.status, "in_progress", `${filtered[0]!.status}: ${filtered[0]!.status_reason}`)
        const detail = yield* pipeline.query.getFeature(tenant.principal, { feature_id: filtered[0]!.feature_id, as_of: asOf })
        assert.strictEqual(detail.status, "in_progress")
      }))

    // sessions were taken when `ended_at >= period start`: one whose last call ended exactly at midnight was a
    // session of the next day too (totals.sessions 1 with 0 decisions, and that day's costliest session)
    it.effect("a session that ended exactly at midnight is not a session of the next day", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const tenant = yield* pipeline.run(workloadOf([
          asking(REVIEWER, "late/0", at("2025-11-12T23:30:00Z"), "Review change alpha to the billing service."),
          // 23:59:59.000 + 1 s: the session ends at 2025-11-13T00:00:00.000Z
          asking(REVIEWER, "late/1", at("2025-11-12T23:59:59.000Z"), "Review change beta to the billing service.")
        ]), "session-edge")
        const read = reader(pipeline, tenant.principal)
        const day = yield* read.pulse("day", "2025-11-12T12:00:00Z")
        assert.deepInclude(day.totals, { decisions: 2, sessions: 1 })
        assert.strictEqual(day.costliest_sessions[0]!.ended_at, "2025-11-13T00:00:00.000Z")
        const next = yield* read.pulse("day", "2025-11-13T12:00:00Z")
        assert.strictEqual(next.totals.decisions, 0)
        assert.deepStrictEqual([next.totals.sessions, next.costliest_sessions.length], [0, 0], "no activity on D+1")
      }))
  })
})

// ---------------------------------------------------------------------------------------------------------

describe("periodOf and previousOf at the edges", () => {
  const span = (kind: "day" | "week" | "month", date: string) => {
    const period = periodOf(kind, new Date(date))
    return [period.start.toISOString(), period.end.toISOString()]
  }

  it("a day holds its last millisecond, not the next day's first", () => {
    assert.deepStrictEqual(span("day", "2025-11-12T23:59:59.999Z"), ["2025-11-12T00:00:00.000Z", "2025-11-13T00:00:00.000Z"])
    assert.deepStrictEqual(span("day", "2025-11-13T00:00:00.000Z"), ["2025-11-13T00:00:00.000Z", "2025-11-14T00:00:00.000Z"])
    assert.deepStrictEqual(span("day", "2028-02-29T12:00:00Z"), ["2028-02-29T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(span("day", "2025-12-31T23:59:59.999Z"), ["2025-12-31T00:00:00.000Z", "2026-01-01T00:00:00.000Z"])
    // every day of a leap year: its first and last millisecond are in it, the next millisecond is not
    for (let day = at("2028-01-01T00:00:00Z"); day < at("2029-01-01T00:00:00Z"); day += DAY) {
      const period = periodOf("day", new Date(day + DAY - 1))
      assert.strictEqual(period.start.getTime(), day)
      assert.strictEqual(periodOf("day", new Date(day)).end.getTime(), day + DAY)
      assert.strictEqual(periodOf("day", new Date(day + DAY)).start.getTime(), day + DAY)
    }
  })

  it("a week runs Monday to Sunday: Sunday's last millisecond is in it, Monday's first is the next one's", () => {
    assert.deepStrictEqual(span("week", "2025-11-16T23:59:59.999Z"), ["2025-11-10T00:00:00.000Z", "2025-11-17T00:00:00.000Z"])
    assert.deepStrictEqual(span("week", "2025-11-17T00:00:00.000Z"), ["2025-11-17T00:00:00.000Z", "2025-11-24T00:00:00.000Z"])
    assert.deepStrictEqual(span("week", "2025-11-10T00:00:00.000Z"), ["2025-11-10T00:00:00.000Z", "2025-11-17T00:00:00.000Z"])
    // across a month and a year
    assert.deepStrictEqual(span("week", "2026-01-01T00:00:00.000Z"), ["2025-12-29T00:00:00.000Z", "2026-01-05T00:00:00.000Z"])
    assert.deepStrictEqual(span("week", "2028-03-01T00:00:00Z"), ["2028-02-28T00:00:00.000Z", "2028-03-06T00:00:00.000Z"])
    for (let day = at("2025-11-10T00:00:00Z"); day < at("2025-11-17T00:00:00Z"); day += DAY) {
      assert.deepStrictEqual(span("week", iso(day + 12 * HOUR)), ["2025-11-10T00:00:00.000Z", "2025-11-17T00:00:00.000Z"], iso(day))
    }
  })

  it("a month is its calendar month, February of a leap year and December into January included", () => {
    assert.deepStrictEqual(span("month", "2025-12-31T23:59:59.999Z"), ["2025-12-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"])
    assert.deepStrictEqual(span("month", "2026-01-01T00:00:00.000Z"), ["2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"])
    assert.deepStrictEqual(span("month", "2028-02-29T23:59:59.999Z"), ["2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(span("month", "2028-03-01T00:00:00.000Z"), ["2028-03-01T00:00:00.000Z", "2028-04-01T00:00:00.000Z"])
    assert.deepStrictEqual(span("month", "2027-02-28T23:59:59.999Z"), ["2027-02-01T00:00:00.000Z", "2027-03-01T00:00:00.000Z"])
    const days = (year: number) =>
      Array.from({ length: 12 }, (_, month) => {
        const first = periodOf("month", new Date(Date.UTC(year, month, 1)))
        const last = periodOf("month", new Date(first.end.getTime() - 1))
        assert.strictEqual(last.start.getTime(), first.start.getTime(), `${year}-${month + 1}: its last millisecond`)
        assert.strictEqual(periodOf("month", first.end).start.getTime(), first.end.getTime())
        return (first.end.getTime() - first.start.getTime()) / DAY
      })
    assert.deepStrictEqual(days(2028), [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    assert.deepStrictEqual(days(2027), [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    assert.strictEqual(days(2100)[1], 28, "a century that is not a leap year")
    assert.strictEqual(days(2000)[1], 29)
  })

  it("the previous period: the calendar month before a month, the same length before anything else", () => {
    const previous = (kind: "day" | "week" | "month", date: string) => {
      const p = previousOf(periodOf(kind, new Date(date)))
      return [p.start.toISOString(), p.end.toISOString()]
    }
    assert.deepStrictEqual(previous("month", "2028-03-31T23:59:59.999Z"), ["2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("month", "2028-03-01T00:00:00.000Z"), ["2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("month", "2026-01-01T00:00:00.000Z"), ["2025-12-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("month", "2025-12-31T23:59:59.999Z"), ["2025-11-01T00:00:00.000Z", "2025-12-01T00:00:00.000Z"])
    // a 31-day month after a 30-day one: the whole calendar month, not 31 days back
    assert.deepStrictEqual(previous("month", "2025-05-15T00:00:00Z"), ["2025-04-01T00:00:00.000Z", "2025-05-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("month", "2028-03-15T00:00:00Z"), ["2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("day", "2028-03-01T00:00:00.000Z"), ["2028-02-29T00:00:00.000Z", "2028-03-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("day", "2026-01-01T00:00:00.000Z"), ["2025-12-31T00:00:00.000Z", "2026-01-01T00:00:00.000Z"])
    assert.deepStrictEqual(previous("week", "2025-11-17T00:00:00.000Z"), ["2025-11-10T00:00:00.000Z", "2025-11-17T00:00:00.000Z"])
    assert.deepStrictEqual(previous("week", "2026-01-04T23:59:59.999Z"), ["2025-12-22T00:00:00.000Z", "2025-12-29T00:00:00.000Z"])
    // every month of a year: the previous one ends where it starts and is one calendar month
    for (let month = 0; month < 12; month++) {
      const period = periodOf("month", new Date(Date.UTC(2028, month, 10)))
      const before = previousOf(period)
      assert.strictEqual(before.end.getTime(), period.start.getTime())
      assert.strictEqual(before.start.getTime(), Date.UTC(2028, month - 1, 1))
    }
    const range = previousOf({ kind: "range", start: new Date("2025-11-12T23:30:00Z"), end: new Date("2025-11-13T00:30:00Z") })
    assert.deepStrictEqual([range.start.toISOString(), range.end.toISOString()], ["2025-11-12T22:30:00.000Z", "2025-11-12T23:30:00.000Z"])
  })
})
