/**
 * Analytics as it runs in the builder role, and the cases the workload suite does not cover:
 * - the supervised fibers of AnalyticsLive pick up new decisions by themselves, and survive the database going
 *   away (a TCP proxy cut, never the shared server): they back off, then catch up;
 * - a late capture makes the builder merge two sessions: the sessions' analytics follow the surviving one;
 * - a restricted member sees no workspace aggregate (features, insights, graph links), only its own decisions in
 *   search and pulse; a workspace's ROI settings override the install defaults.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Metric, Option, Redacted } from "effect"
import { type WorkloadPipeline, workloadPipeline, type WorkloadTenant } from "../../bench/workload/pipeline.ts"
import { PARAPHRASE_QUERY, planWorkload, type Workload, WORKLOAD_START, type WorkloadCall } from "../../bench/workload/scenario.ts"
import { fiberFailures } from "../../src/supervision/supervise.ts"
import { defaultAnalyticsSettings } from "../../src/config/LedgerConfig.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { testDatabase } from "../support/db.ts"
import { pgProxy } from "../support/pg-proxy.ts"

const MINUTE = 60_000
const END = new Date(WORKLOAD_START + 48 * 3_600_000).toISOString()

/** A call of the planted workload, renamed and moved (the same content and model). */
const callLike = (base: WorkloadCall, key: string, at: number, ask: string, agent = base.agent_id): WorkloadCall => ({
  ...base,
  key,
  agent_id: agent,
  execution_id: null,
  at,
  messages: [{ role: "user", content: ask }]
})

const subset = (predicate: (call: WorkloadCall) => boolean): Workload => {
  const full = planWorkload("planted")
  return { ...full, calls: full.calls.filter(predicate) }
}

const until = (condition: Effect.Effect<boolean, unknown>, timeoutMs: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!(yield* condition)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`not reached within ${timeoutMs} ms`))
      yield* Effect.sleep(100)
    }
  })

// ---------------------------------------------------------------------------------------------------------

class Fibers extends Context.Service<Fibers, {
  readonly pipeline: WorkloadPipeline
  readonly proxy: Effect.Success<ReturnType<typeof pgProxy>>
}>()("test/AnalyticsFibers") {}

const FibersLive = Layer.effect(
  Fibers,
  Effect.gen(function*() {
    // the pipeline reaches its database through a proxy the test can cut
    const proxy = yield* pgProxy((yield* testDatabase).url)
    const pipeline = yield* workloadPipeline({
      backend: "pglite",
      fibers: true,
      settings: {
        databaseUrl: Option.some(Redacted.make(proxy.url)),
        analytics: { ...defaultAnalyticsSettings, intervalMs: 200 }
      }
    })
    return { pipeline, proxy }
  })
)

describe("analytics fibers", () => {
  layer(FibersLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("materialise and detect by themselves, back off while the database is away, then catch up", () =>
      Effect.gen(function*() {
        const { pipeline, proxy } = yield* Fibers
        const first = yield* pipeline.run(subset((c) => c.key.startsWith("base/reviewer/") || c.pattern === "latency-regression"), "fibers", {
          analyse: false
        })
        yield* until(pipeline.analysed(first.principal), 30_000)
        const insights = yield* pipeline.query.listInsights(first.principal, {})
        assert.deepStrictEqual(insights.data.map((i) => i.type), ["latency_regression"])

        const failures = Metric.withAttributes(fiberFailures, { fiber: "analytics-materializer" })
        const failedBefore = (yield* Metric.value(failures)).count
        yield* proxy.stop
        yield* Effect.sleep(1_500)
        yield* proxy.start
        assert.isAbove((yield* Metric.value(failures)).count, failedBefore, "steps failed while the database was away")

        const second = yield* pipeline.run(subset((c) => c.pattern === "loop"), "fibers", { analyse: false, into: first.tenant })
        yield* until(pipeline.analysed(second.principal), 30_000)
        const after = yield* pipeline.query.listInsights(second.principal, {})
        assert.deepStrictEqual(after.data.map((i) => i.type).sort(), ["latency_regression", "loop"])
      }))
  })
})

// ---------------------------------------------------------------------------------------------------------

class Pipeline extends Context.Service<Pipeline, {
  readonly pipeline: WorkloadPipeline
  readonly planted: WorkloadTenant
}>()("test/AnalyticsLifecyclePipeline") {}

const PipelineLive = Layer.effect(
  Pipeline,
  Effect.gen(function*() {
    const pipeline = yield* workloadPipeline()
    const planted = yield* pipeline.run(planWorkload("planted"), "lifecycle")
    return { pipeline, planted }
  })
)

describe("analytics lifecycle", () => {
  layer(PipelineLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("sessions the builder merges: analytics follows the surviving session", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Pipeline
        const template = planWorkload("planted").calls.find((c) => c.key.startsWith("base/reviewer/"))!
        const t0 = WORKLOAD_START + 60 * 3_600_000
        const ask = (n: number) => `OPS-9: review the rollout checklist, step ${n}, for the scheduler-service.`
        const calls = [
          callLike(template, "merge/0", t0, ask(1)),
          callLike(template, "merge/1", t0 + MINUTE, ask(2)),
          callLike(template, "merge/2", t0 + 50 * MINUTE, ask(3)),
          callLike(template, "merge/3", t0 + 51 * MINUTE, ask(4))
        ]
        const workload: Workload = { variant: "planted", start: t0, end: t0 + 3_600_000, calls }
        const tenant = yield* pipeline.run(workload, "merge")
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const state = tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ sessions: number; analytics_sessions: number; stale: number; subject_sessions: number; subject_decisions: number }>`SELECT
            (SELECT count(*)::int FROM sessions) AS sessions,
            (SELECT count(*)::int FROM analytics_sessions) AS analytics_sessions,
            (SELECT count(*)::int FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
              WHERE s.session_id <> d.session_id) AS stale,
            (SELECT count(*)::int FROM session_subjects WHERE subject_id = 'ticket:OPS-9') AS subject_sessions,
            (SELECT sum(decision_count)::int FROM session_subjects WHERE subject_id = 'ticket:OPS-9') AS subject_decisions`
        )).pipe(Effect.map((rows) => rows[0]!))
        assert.deepInclude(yield* state, { sessions: 2, analytics_sessions: 2, subject_sessions: 2, subject_decisions: 4 })
        const ids = (yield* tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ session_id: string }>`SELECT session_id::text FROM sessions ORDER BY started_at`
        ))).map((row) => row.session_id)

        // a late call between the two, within the inactivity gap of both: the builder folds them into one
        const late: Workload = { ...workload, calls: [callLike(template, "merge/late", t0 + 25 * MINUTE, ask(5))] }
        yield* pipeline.run(late, "merge", { into: tenant.tenant })
        assert.deepStrictEqual(yield* state, { sessions: 1, analytics_sessions: 1, stale: 0, subject_sessions: 1, subject_decisions: 5 })
        // a walk from the folded session's id starts at the survivor
        const walk = yield* pipeline.query.queryGraph(tenant.principal, { session_id: ids[1]!, depth: 1 })
        assert.strictEqual(walk.start, `session:${ids[0]}`)
        assert.isAbove(walk.edges.length, 0)
        // an insight recorded under the folded id is found by either id
        const scope = { tenant_id: tenant.principal.tenant_id, workspace_id: tenant.principal.workspace_id }
        yield* tenantSql.write(scope, ScopedSql.use((sql) =>
          sql`INSERT INTO insights (insight_id, tenant_id, workspace_id, dedup_key, type, severity, title, evidence, window_start,
              window_end, agent_ids, session_ids, ledger_ids)
            VALUES (gen_random_uuid(), ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, 'merge-test', 'loop', 'info', 'before the merge',
              '{}'::jsonb, now(), now(), ARRAY['reviewer'], ARRAY[${ids[1]!}], ARRAY[]::text[])`
        ))
        for (const id of ids) {
          const found = yield* pipeline.query.listInsights(tenant.principal, { session_id: id })
          assert.deepStrictEqual(found.data.map((i) => i.title), ["before the merge"], id)
        }
      }))

    it.effect("loops and low-quality streaks that grow over several detector passes (ties, merged sessions) are the ones one pass finds", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Pipeline
        const planted = planWorkload("planted").calls
        const reporter = planted.find((c) => c.pattern === "low-quality")!
        const coder = planted.find((c) => c.pattern === "loop")!
        const t0 = WORKLOAD_START + 70 * 3_600_000
        // different words per call: numbers alone would make the same call signature (a loop)
        const topics = ["pricing", "onboarding", "support", "billing", "security", "reporting", "exports", "mobile", "search", "alerts", "integrations"]
        const bad = (n: number, minute: number) =>
          callLike(reporter, `streak/b${n}`, t0 + minute * MINUTE, `Summarize the churn interviews about ${topics[n - 1]}. [[truncate]]`)
        const good = (n: number, minute: number) => callLike(reporter, `streak/g${n}`, t0 + minute * MINUTE, `List the ${["three", "five"][n - 1]} largest churn reasons.`)
        const repeat = (n: number) => callLike(coder, `loop/${n}`, t0 + n * MINUTE, "[[tool]] Check whether the nightly ledger export job has finished.")
        // another agent: five low-quality answers at the very instant of the answer that ends their streak (ordered
        // before it by id), then one more later: the streak is six long and starts before that instant
        const colours = ["red", "green", "blue", "amber", "violet", "silver"]
        const tie = (key: string, minute: number, ask: string) => callLike(reporter, `tie/${key}`, t0 + 3 * 60 * MINUTE + minute * MINUTE, ask, "tie-reporter")
        const tied = (n: number, minute: number) => tie(`b${n}`, minute, `Summarize the ${colours[n]} team's retro notes. [[truncate]]`)
        // and one whose two sessions (40 min apart) a late call bridges: the builder merges them into one streak of seven
        const fruits = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date"]
        const merging = (n: number, minute: number) =>
          callLike(reporter, `merge/b${n}`, t0 + 5 * 60 * MINUTE + minute * MINUTE, `Summarize the ${fruits[n]} orchard report. [[truncate]]`, "merge-reporter")
        // four passes: the streak b1–b6 ends at g2 and b7–b11 follows it; the loop grows to five repeats, then, in the
        // same session but past its window, repeats four times more: a shorter run, which leaves the five reported
        const passes = [
          [good(1, 0), bad(1, 5), bad(2, 10), bad(3, 15), repeat(0), repeat(1)],
          [bad(4, 20), bad(5, 25), bad(6, 30), good(2, 35), bad(7, 40), repeat(2), repeat(3)],
          [bad(8, 45), bad(9, 50), bad(10, 55), bad(11, 60), repeat(4)],
          [repeat(20), repeat(22), repeat(24), repeat(26)]
        ]
        passes[0]!.push(tied(0, -5), tied(1, 0), tied(2, 0), tied(3, 0), tied(4, 0), tied(5, 0), tie("good", 0, "Name the team that shipped most this sprint."))
        passes[1]!.push(tie("later", 5, "Summarize the quarter's retro themes. [[truncate]]"))
        passes[0]!.push(merging(0, 0), merging(1, 5), merging(2, 10), merging(3, 50), merging(4, 55), merging(5, 60))
        passes[1]!.push(merging(6, 30))
        const workload = (calls: Array<WorkloadCall>): Workload => ({ variant: "planted", start: t0, end: t0 + 2 * 3_600_000, calls })
        const findings = (tenant: WorkloadTenant) =>
          pipeline.query.listInsights(tenant.principal, { types: ["loop", "low_quality_streak"] }).pipe(Effect.map((page) =>
            page.data
              .map((i) => ({
                type: i.type,
                window_start: i.window_start,
                window_end: i.window_end,
                size: i.evidence.streak_length ?? i.evidence.repeats,
                decisions: i.ledger_ids.map((id) => tenant.results.find((r) => r.ledger_id === id)?.call.key)
              }))
              .sort((a, b) => a.type.localeCompare(b.type) || a.window_start.localeCompare(b.window_start))
          ))

        const stepwise = yield* pipeline.run(workload(passes[0]!), "passes")
        let last = stepwise
        for (const calls of passes.slice(1)) {
          const next = yield* pipeline.run(workload(calls), "passes", { into: stepwise.tenant })
          last = { ...next, results: [...last.results, ...next.results] }
        }
        const whole = yield* pipeline.run(workload(passes.flat()), "one-pass")
        const found = yield* findings(last)
        assert.deepStrictEqual(found.map((f) => [f.type, f.size, f.decisions[0]]), [
          ["loop", 5, "loop/0"],
          ["low_quality_streak", 6, "streak/b1"],
          ["low_quality_streak", 5, "streak/b7"],
          ["low_quality_streak", 6, "tie/b0"],
          ["low_quality_streak", 7, "merge/b0"]
        ])
        assert.deepStrictEqual(found[1]!.decisions, ["streak/b1", "streak/b2", "streak/b3", "streak/b4", "streak/b5", "streak/b6"])
        assert.deepStrictEqual(found, yield* findings(whole))
      }))

    it.effect("a streak longer than the window a pass reads, grown over passes or split by a late decision deep inside its session, is the one one pass finds", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Pipeline
        const reporter = planWorkload("planted").calls.find((c) => c.pattern === "low-quality")!
        const t0 = WORKLOAD_START + 90 * 3_600_000
        // letters, not digits: call signatures ignore numbers, and these must not be one repeated call (a loop)
        const name = (n: number): string => (n < 26 ? "" : name(Math.floor(n / 26) - 1)) + String.fromCharCode(97 + (n % 26))
        const bad = (n: number, seconds: number) =>
          callLike(reporter, `long/b${n}`, t0 + seconds * 1_000, `Summarize the churn interview of customer ${name(n)}. [[truncate]]`)
        const good = (key: string, seconds: number) => callLike(reporter, `long/${key}`, t0 + seconds * 1_000, "List the three largest churn reasons.")
        // 130 low answers over three passes (the window reads 100 decisions before the new ones), then a good one and
        // six more; then a good answer arriving late, 60 decisions into the streak: it splits the streak in two
        const passes = [
          Array.from({ length: 110 }, (_, n) => bad(n, n * 30)),
          Array.from({ length: 20 }, (_, n) => bad(110 + n, (110 + n) * 30)),
          [good("g1", 130 * 30), ...Array.from({ length: 6 }, (_, n) => bad(131 + n, (131 + n) * 30))],
          [good("late", 60 * 30 - 10)]
        ]
        const workload = (calls: Array<WorkloadCall>): Workload => ({ variant: "planted", start: t0, end: t0 + 3 * 3_600_000, calls })
        const findings = (tenant: WorkloadTenant) =>
          pipeline.query.listInsights(tenant.principal, { types: ["low_quality_streak"] }).pipe(Effect.map((page) =>
            page.data
              .map((i) => ({
                window_start: i.window_start,
                window_end: i.window_end,
                length: i.evidence.streak_length,
                mean: Math.round((i.evidence.mean_quality as number) * 1000) / 1000,
                outcomes: i.evidence.outcomes,
                first: tenant.results.find((r) => r.ledger_id === i.ledger_ids[0])?.call.key
              }))
              .sort((a, b) => a.window_start.localeCompare(b.window_start))
          ))
        let stepwise = yield* pipeline.run(workload(passes[0]!), "long-streak")
        let last = stepwise
        for (const calls of passes.slice(1)) {
          const next = yield* pipeline.run(workload(calls), "long-streak", { into: stepwise.tenant })
          last = { ...next, results: [...last.results, ...next.results] }
          if (calls === passes[1]) {
            // one streak of 130, continued from its insight
            assert.deepStrictEqual((yield* findings(last)).map((f) => [f.first, f.length]), [["long/b0", 130]])
          }
        }
        const whole = yield* pipeline.run(workload(passes.flat()), "long-streak-one-pass")
        const found = yield* findings(last)
        assert.deepStrictEqual(found.map((f) => [f.first, f.length]), [["long/b0", 60], ["long/b60", 70], ["long/b131", 6]])
        assert.deepStrictEqual(found, yield* findings(whole))
      }))

    it.effect("an idle agent is reported once per silent spell, its idle time brought up to date at most hourly", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Pipeline
        const template = planWorkload("planted").calls.find((c) => c.key.startsWith("base/reviewer/"))!
        const t0 = WORKLOAD_START + 80 * 3_600_000
        const HOUR = 60 * MINUTE
        const call = (key: string, agent: string, at: number) => callLike(template, key, at, `Review change ${key} for the billing service.`, agent)
        const workload = (calls: Array<WorkloadCall>): Workload => ({ variant: "planted", start: t0, end: t0 + 40 * HOUR, calls })
        // a nightly job busy for an hour, and an agent with too few calls to count; the workspace keeps working
        const busy = Array.from({ length: 10 }, (_, n) => call(`nightly/${n}`, "nightly-sync", t0 + n * 5 * MINUTE))
        const few = Array.from({ length: 3 }, (_, n) => call(`oneoff/${n}`, "one-off", t0 + n * MINUTE))
        const tenant = yield* pipeline.run(workload([...busy, ...few, call("work/0", "worker", t0 + 30 * HOUR)]), "idle")
        const idle = pipeline.query.listInsights(tenant.principal, { types: ["idle_agent"] }).pipe(Effect.map((page) => page.data))
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const updatedAt = tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ updated_at: Date }>`SELECT updated_at FROM insights WHERE type = 'idle_agent'`
        )).pipe(Effect.map((rows) => rows.map((row) => row.updated_at.getTime())))

        const [first] = yield* idle
        assert.strictEqual((yield* idle).length, 1)
        assert.deepStrictEqual(first!.agent_ids, ["nightly-sync"])
        assert.strictEqual(first!.evidence.decisions_in_week_before, 10)
        const lastNightly = tenant.results.find((r) => r.call.key === "nightly/9")!
        assert.deepStrictEqual(first!.ledger_ids, [lastNightly.ledger_id])
        const reported = yield* updatedAt

        // twenty minutes later in the workspace: the spell is not reported again
        yield* pipeline.run(workload([call("work/1", "worker", t0 + 30 * HOUR + 20 * MINUTE)]), "idle", { into: tenant.tenant })
        assert.deepStrictEqual(yield* updatedAt, reported)
        assert.deepStrictEqual(yield* idle, [first!])

        // two hours later: the same insight, its idle time brought up to date
        yield* pipeline.run(workload([call("work/2", "worker", t0 + 32 * HOUR)]), "idle", { into: tenant.tenant })
        const [refreshed] = yield* idle
        assert.strictEqual((yield* idle).length, 1)
        assert.strictEqual(refreshed!.insight_id, first!.insight_id)
        assert.closeTo(Number(refreshed!.evidence.idle_hours) - Number(first!.evidence.idle_hours), 2, 0.01)
        assert.strictEqual(refreshed!.evidence.decisions_in_week_before, 10)
        assert.deepStrictEqual(refreshed!.ledger_ids, first!.ledger_ids)
        assert.notDeepEqual(yield* updatedAt, reported)

        // the job runs again, then falls silent: a new spell, a second insight
        yield* pipeline.run(workload([call("nightly/again", "nightly-sync", t0 + 33 * HOUR), call("work/3", "worker", t0 + 60 * HOUR)]), "idle", {
          into: tenant.tenant
        })
        const spells = yield* idle
        assert.strictEqual(spells.length, 2)
        assert.deepStrictEqual(spells.map((i) => i.evidence.decisions_in_week_before).sort(), [10, 11])
      }))

    it.effect("a restricted member sees no workspace aggregate, only its own decisions", () =>
      Effect.gen(function*() {
        const { pipeline, planted } = yield* Pipeline
        const auditor = { email: "auditor@lifecycle.test", role: "restricted" as const }
        const own = yield* pipeline.run(subset((c) => c.pattern === "paraphrase"), "lifecycle", { into: planted.tenant, member: auditor })
        const credentials = Context.get(pipeline.stack.context, Credentials)
        const boot = yield* credentials.bootstrap({ tenant: planted.tenant, workspace: "main", ...auditor })
        const restricted = yield* Context.get(pipeline.stack.context, Authenticator).authenticate(boot.pat, "pat")
        assert.strictEqual(restricted.role, "restricted")

        assert.deepStrictEqual((yield* pipeline.query.listInsights(restricted, {})).data, [])
        assert.deepStrictEqual((yield* pipeline.query.listFeatures(restricted, { as_of: END })).data, [])
        assert.deepStrictEqual((yield* pipeline.query.listFeatureMergeSuggestions(restricted, {})).data, [])
        assert.deepStrictEqual((yield* pipeline.query.queryGraph(restricted, { mode: "agent_network" })).edges, [])

        const similar = yield* pipeline.query.searchSimilarDecisions(restricted, { text: PARAPHRASE_QUERY })
        const mine = new Set(own.results.map((r) => r.ledger_id))
        assert.isAbove(similar.data.length, 0)
        assert.isTrue(similar.data.every((d) => mine.has(d.ledger_id)), "only the member's own decisions")
        // the member (not restricted) finds the workspace's paraphrases too
        const member = yield* pipeline.query.searchSimilarDecisions(planted.principal, { text: PARAPHRASE_QUERY, min_score: 0.6 })
        assert.strictEqual(member.data.length, 6)

        const pulse = yield* pipeline.query.getPulseReport(restricted, { period: "week", date: "2025-11-04T00:00:00Z" })
        assert.strictEqual(pulse.totals.decisions, own.results.length)
        assert.strictEqual(pulse.new_insights.length, 0)
      }))

    it.effect("a workspace's ROI settings override the defaults, and the payload shows them", () =>
      Effect.gen(function*() {
        const { pipeline, planted } = yield* Pipeline
        const before = (yield* pipeline.query.listFeatures(planted.principal, { as_of: END })).data
        // a workspace's overrides, as an operator writes them (intents not named keep the defaults)
        yield* Context.get(pipeline.stack.context, TenantSql).write(planted.principal, ScopedSql.use((sql) =>
          sql`INSERT INTO analytics_settings (tenant_id, workspace_id, hourly_rate_usd, minutes_saved, updated_at)
            VALUES (${planted.principal.tenant_id}::uuid, ${planted.principal.workspace_id}::uuid, 120, '{"planning":0}'::jsonb, now())`
        ))
        const after = (yield* pipeline.query.listFeatures(planted.principal, { as_of: END })).data
        for (const feature of after) {
          const old = before.find((f) => f.feature_id === feature.feature_id)!
          assert.strictEqual(feature.roi.hourly_rate_usd, 120)
          assert.strictEqual(feature.roi.minutes_saved_by_intent.planning ?? 0, 0)
          const planningValue = (old.roi.successful_decisions_by_intent.planning ?? 0) * (old.roi.minutes_saved_by_intent.planning ?? 0) / 60 * 60
          assert.closeTo(feature.roi.value_usd, (old.roi.value_usd - planningValue) * 2, 0.001)
        }
        // other workspaces keep the defaults
        const other = yield* pipeline.run(subset((c) => c.pattern === "feature-a"), "other-roi")
        const otherFeatures = (yield* pipeline.query.listFeatures(other.principal, { as_of: END })).data
        assert.isTrue(otherFeatures.length > 0 && otherFeatures.every((f) => f.roi.hourly_rate_usd === 60))
      }))
  })
})
