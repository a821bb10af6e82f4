/**
 * Analytics against a realistic workload driven through the real pipeline (gateway → Redis → builder →
 * materialiser → detectors, bench/workload): the planted patterns are found exactly — every detector once, the
 * hand-off, the features and the one pair that should merge, the paraphrases — and a clean control workload in
 * another tenant raises nothing. Both share one PostgreSQL database.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type WorkloadPipeline, workloadPipeline, type WorkloadTenant } from "../../bench/workload/pipeline.ts"
import { PARAPHRASE_QUERY, planWorkload, WORKLOAD_START } from "../../bench/workload/scenario.ts"
import { Detectors } from "../../src/analytics/Detectors.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"

class Fixture extends Context.Service<Fixture, {
  readonly pipeline: WorkloadPipeline
  readonly planted: WorkloadTenant
  readonly control: WorkloadTenant
}>()("test/AnalyticsWorkloadFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const pipeline = yield* workloadPipeline()
    const planted = yield* pipeline.run(planWorkload("planted"), "planted")
    const control = yield* pipeline.run(planWorkload("control"), "control")
    return { pipeline, planted, control }
  })
)

const END = new Date(WORKLOAD_START + 48 * 3_600_000).toISOString()
const sorted = (items: ReadonlyArray<string>) => [...items].sort()

describe("analytics on a planted workload and a clean control", () => {
  layer(FixtureLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("detectors: each planted pattern exactly once, linked to its calls; nothing on the control", () =>
      Effect.gen(function*() {
        const { control, pipeline, planted } = yield* Fixture
        const insights = (yield* pipeline.query.listInsights(planted.principal, { limit: 100 })).data
        assert.deepStrictEqual(
          sorted(insights.map((i) => i.type)),
          sorted(["cost_spike", "error_rate_spike", "loop", "low_quality_streak", "latency_regression", "model_right_sizing", "idle_agent"])
        )
        const of = (type: string) => insights.find((i) => i.type === type)!

        const loop = of("loop")
        assert.deepStrictEqual(sorted(loop.ledger_ids), sorted(planted.ledgerIds("loop")))
        assert.strictEqual(loop.evidence.repeats, 6)
        assert.deepStrictEqual(loop.agent_ids, ["coder"])

        const spike = of("cost_spike")
        assert.deepStrictEqual(spike.agent_ids, ["reporter"])
        assert.strictEqual(spike.window_start, "2025-11-04T04:00:00.000Z")
        assert.includeMembers([...spike.ledger_ids], [...planted.ledgerIds("cost-spike")])

        const errors = of("error_rate_spike")
        assert.deepStrictEqual(errors.agent_ids, ["triage"])
        assert.deepStrictEqual(sorted(errors.ledger_ids), sorted(planted.ledgerIds("error-burst")))
        assert.strictEqual(errors.evidence.hour_errors, 8)

        const latency = of("latency_regression")
        assert.deepStrictEqual(latency.agent_ids, ["reviewer"])
        assert.includeMembers([...latency.ledger_ids], [...planted.ledgerIds("latency-regression")])

        const quality = of("low_quality_streak")
        assert.deepStrictEqual(sorted(quality.ledger_ids), sorted(planted.ledgerIds("low-quality")))

        const sizing = of("model_right_sizing")
        assert.deepStrictEqual(sizing.agent_ids, ["intake-router"])
        assert.strictEqual(sizing.evidence.suggested_model, "openai/gpt-4o-mini")
        assert.strictEqual(sizing.evidence.simple_calls, 24)

        const idle = of("idle_agent")
        assert.deepStrictEqual(idle.agent_ids, ["legacy-sync"])
        // linked to the agent's last decision
        const legacy = planted.results.filter((r) => r.call.agent_id === "legacy-sync").sort((a, b) => a.call.at - b.call.at)
        assert.deepStrictEqual(idle.ledger_ids, [legacy.at(-1)!.ledger_id])

        // every insight states the rule it applied
        for (const insight of insights) assert.isString(insight.evidence.rule, insight.type)

        // filters
        const critical = yield* pipeline.query.listInsights(planted.principal, { severities: ["critical"] })
        assert.isTrue(critical.data.every((i) => i.severity === "critical") && critical.data.length > 0)
        const forCoder = yield* pipeline.query.listInsights(planted.principal, { agent_id: "coder" })
        assert.deepStrictEqual(forCoder.data.map((i) => i.type), ["loop"])
        const page = yield* pipeline.query.listInsights(planted.principal, { limit: 3 })
        const rest = yield* pipeline.query.listInsights(planted.principal, { limit: 100, cursor: page.next_cursor! })
        assert.deepStrictEqual(sorted([...page.data, ...rest.data].map((i) => i.insight_id)), sorted(insights.map((i) => i.insight_id)))

        assert.deepStrictEqual((yield* pipeline.query.listInsights(control.principal, { limit: 100 })).data, [])
      }))

    it.effect("graph: the hand-off and the shared execution between planner and coder; none on the control", () =>
      Effect.gen(function*() {
        const { control, pipeline, planted } = yield* Fixture
        const network = yield* pipeline.query.queryGraph(planted.principal, { mode: "agent_network" })
        const links = (type: string) => network.edges.filter((e) => e.type === type).map((e) => `${e.source}>${e.target}:${e.weight}`)
        assert.deepStrictEqual(links("handed_off_to"), ["agent:planner>agent:coder:1"])
        assert.deepStrictEqual(links("shares_execution"), ["agent:coder>agent:planner:1"])
        assert.isTrue(links("shares_subject").length > 0)

        const controlNetwork = yield* pipeline.query.queryGraph(control.principal, { mode: "agent_network" })
        assert.deepStrictEqual(controlNetwork.edges.filter((e) => e.type !== "shares_subject"), [])

        // from the ticket: the decisions about it, their sessions, and the agents that ran them
        const walk = yield* pipeline.query.queryGraph(planted.principal, {
          subject: "ticket:PAY-245",
          edge_types: ["about", "contains", "ran"],
          direction: "in",
          depth: 3
        })
        const ids = (type: string) => sorted(walk.nodes.filter((n) => n.type === type).map((n) => n.id))
        assert.deepStrictEqual(ids("decision"), sorted(planted.ledgerIds("feature-y")))
        assert.deepStrictEqual(ids("agent"), ["coder", "planner", "reviewer"])
        assert.strictEqual(walk.nodes.find((n) => n.depth === 0)!.label, "ticket PAY-245")
        assert.isTrue(walk.edges.every((e) => ["about", "contains", "ran"].includes(e.type)))
        assert.isFalse(walk.truncated)

        // sessions linked by the work subjects they share, weighted by how many
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const sessionOf = (prefix: string) =>
          Effect.map(
            tenantSql.read(planted.principal, ScopedSql.use((sql) =>
              sql<{ id: string }>`SELECT session_id::text AS id FROM decisions WHERE ledger_id = ${planted.ledgerIds(prefix)[0]!}::uuid`
            )),
            (rows) => rows[0]!.id
          )
        const debug = yield* sessionOf("feature-x/debug")
        const shared = yield* pipeline.query.queryGraph(planted.principal, { session_id: debug, edge_types: ["shares_subject"], depth: 1 })
        assert.deepStrictEqual(
          sorted(shared.nodes.filter((n) => n.depth === 1).map((n) => n.id)),
          sorted([
            yield* sessionOf("feature-x/review"),
            yield* sessionOf("feature-x/follow-up"),
            yield* sessionOf("feature-y/plan"),
            yield* sessionOf("feature-y/review")
          ])
        )
        const review = yield* sessionOf("feature-x/review")
        const plan = yield* sessionOf("feature-y/plan")
        const weight = (other: string) =>
          shared.edges.find((e) => [e.source, e.target].sort().join() === [`session:${debug}`, `session:${other}`].sort().join())!.weight
        assert.strictEqual(weight(review), 3, "PAY-231, src/payments/retry.ts, payment-service")
        assert.strictEqual(weight(plan), 1, "payment-service")

        // the node limit keeps the nearest nodes and says so
        const small = yield* pipeline.query.queryGraph(planted.principal, { agent_id: "coder", depth: 3, limit: 5 })
        assert.strictEqual(small.nodes.length, 5)
        assert.isTrue(small.truncated)
        assert.strictEqual(small.nodes[0]!.key, "agent:coder")
      }))

    it.effect("features: four units of work with status, ROI and the rules; one merge suggestion; control: two, none", () =>
      Effect.gen(function*() {
        const { control, pipeline, planted } = yield* Fixture
        const page = yield* pipeline.query.listFeatures(planted.principal, { as_of: END, limit: 100 })
        const byTicket = new Map(page.data.map((f) => [f.title.split(" ")[0]!, f]))
        assert.deepStrictEqual(sorted([...byTicket.keys()]), ["AUTH-77", "BILL-142", "PAY-231", "PAY-245"])
        assert.strictEqual(byTicket.get("BILL-142")!.status, "delivered")
        assert.strictEqual(byTicket.get("AUTH-77")!.status, "in_progress")
        assert.strictEqual(byTicket.get("PAY-231")!.status, "stalled")
        assert.strictEqual(byTicket.get("PAY-245")!.status, "delivered")
        for (const feature of page.data) {
          assert.strictEqual(feature.session_count, 3)
          assert.isAbove(feature.roi.value_usd, 0)
          assert.strictEqual(feature.roi.hourly_rate_usd, 60)
        }
        const y = byTicket.get("PAY-245")!
        assert.deepStrictEqual(y.agents, ["coder", "planner", "reviewer"])
        // ROI is reproducible from what the payload shows
        const value = Object.entries(y.roi.successful_decisions_by_intent)
          .reduce((sum, [intent, n]) => sum + n * y.roi.minutes_saved_by_intent[intent]! / 60 * y.roi.hourly_rate_usd, 0)
        assert.closeTo(y.roi.value_usd, value, 0.001)
        assert.closeTo(y.roi.roi!, y.roi.value_usd / y.roi.cost_usd, 0.01)
        assert.include(page.rules.status_rule, "delivered")

        const stalled = yield* pipeline.query.listFeatures(planted.principal, { as_of: END, status: "stalled" })
        assert.deepStrictEqual(stalled.data.map((f) => f.feature_id), [byTicket.get("PAY-231")!.feature_id])

        const suggestions = yield* pipeline.query.listFeatureMergeSuggestions(planted.principal, {})
        assert.strictEqual(suggestions.data.length, 1)
        const [pair] = suggestions.data
        assert.deepStrictEqual(
          sorted([pair!.feature_a.feature_id, pair!.feature_b.feature_id]),
          sorted([byTicket.get("PAY-231")!.feature_id, y.feature_id])
        )
        assert.isAtLeast(pair!.score, 0.5)
        assert.include(pair!.reason, "retry")

        const detail = yield* pipeline.query.getFeature(planted.principal, { feature_id: y.feature_id, as_of: END })
        assert.strictEqual(detail.sessions.length, 3)
        assert.strictEqual(detail.merge_suggestions.length, 1)

        const controlFeatures = yield* pipeline.query.listFeatures(control.principal, { as_of: END })
        assert.deepStrictEqual(sorted(controlFeatures.data.map((f) => f.title.split(" ")[0]!)), ["AUTH-77", "BILL-142"])
        assert.deepStrictEqual((yield* pipeline.query.listFeatureMergeSuggestions(control.principal, {})).data, [])
      }))

    it.effect("similar decisions: the paraphrases find each other and nothing else; the control has none", () =>
      Effect.gen(function*() {
        const { control, pipeline, planted } = yield* Fixture
        const paraphrases = planted.ledgerIds("paraphrase")
        const near = (data: ReadonlyArray<{ ledger_id: string; score: number }>) => sorted(data.filter((d) => d.score >= 0.6).map((d) => d.ledger_id))

        const byText = yield* pipeline.query.searchSimilarDecisions(planted.principal, { text: PARAPHRASE_QUERY })
        assert.deepStrictEqual(near(byText.data), sorted(paraphrases))
        assert.strictEqual(byText.representation, "local")
        assert.strictEqual(byText.candidates, "full_text")
        assert.include(byText.data[0]!.shared_terms, "webhook")

        const byId = yield* pipeline.query.searchSimilarDecisions(planted.principal, { ledger_id: paraphrases[0]! })
        assert.deepStrictEqual(near(byId.data), sorted(paraphrases.slice(1)))
        for (const result of byId.data) assert.isTrue(result.score >= 0 && result.score <= 1)

        // filters apply to the candidates
        const byAgent = yield* pipeline.query.searchSimilarDecisions(planted.principal, { text: PARAPHRASE_QUERY, agent_id: "reviewer" })
        assert.deepStrictEqual(byAgent.data.map((d) => d.agent_id).filter((a) => a !== "reviewer"), [])

        assert.deepStrictEqual(near((yield* pipeline.query.searchSimilarDecisions(control.principal, { text: PARAPHRASE_QUERY })).data), [])
      }))

    it.effect("pulse: the workload's week against the empty week before, with flags; a day with its insights", () =>
      Effect.gen(function*() {
        const { pipeline, planted } = yield* Fixture
        const week = yield* pipeline.query.getPulseReport(planted.principal, { period: "week", date: "2025-11-05T12:00:00Z" })
        assert.strictEqual(week.period.start, "2025-11-03T00:00:00.000Z")
        assert.strictEqual(week.totals.decisions, planted.results.length)
        assert.strictEqual(week.previous_totals.decisions, 0)
        assert.strictEqual(week.deltas.decisions!.percent, null)
        assert.isTrue(week.partial.is_partial)
        assert.isTrue(week.partial.reasons.some((r) => r.includes("previous period")))
        assert.strictEqual(Object.values(week.outcomes).reduce((a, b) => a + b, 0), planted.results.length)
        assert.strictEqual(week.top_agents.length, 5)
        assert.strictEqual(week.new_insights.length, 7)
        assert.deepStrictEqual(sorted(week.features_delivered.map((f) => f.title.split(" ")[0]!)), ["AUTH-77", "BILL-142", "PAY-245"])
        assert.isAbove(week.costliest_sessions[0]!.total_cost_usd, week.costliest_sessions[1]!.total_cost_usd - 1e-12)

        const day = yield* pipeline.query.getPulseReport(planted.principal, { period: "day", date: "2025-11-04T08:00:00Z" })
        assert.strictEqual(day.previous_period.start, "2025-11-03T00:00:00.000Z")
        assert.isAbove(day.deltas.decisions!.change + day.previous_totals.decisions, 0)
        assert.includeMembers(day.new_insights.map((i) => i.type), ["cost_spike", "error_rate_spike", "loop", "idle_agent"])

        const range = yield* pipeline.query.getPulseReport(planted.principal, {
          period: "range",
          since: "2025-11-03T00:00:00Z",
          until: "2025-11-05T00:00:00Z"
        })
        assert.strictEqual(range.totals.decisions, planted.results.length)
      }))

    it.effect("sessions get deterministic summaries; materialising again changes nothing", () =>
      Effect.gen(function*() {
        const { pipeline, planted } = yield* Fixture
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const counts = tenantSql.read(planted.principal, ScopedSql.use((sql) =>
          sql<{ insights: number; edges: number; rollup: number; subjects: number }>`SELECT
            (SELECT count(*)::int FROM insights) AS insights, (SELECT count(*)::int FROM graph_edges) AS edges,
            (SELECT sum(decisions)::int FROM hourly_rollups) AS rollup, (SELECT sum(decision_count)::int FROM subjects) AS subjects`
        )).pipe(Effect.map((rows) => rows[0]!))
        const before = yield* counts
        assert.strictEqual(before.rollup, planted.results.length)
        assert.strictEqual(yield* Context.get(pipeline.stack.context, Materializer).catchUp, 0)
        yield* Context.get(pipeline.stack.context, Detectors).catchUp
        assert.deepStrictEqual(yield* counts, before)

        const [summary] = yield* tenantSql.read(planted.principal, ScopedSql.use((sql) =>
          sql<{ summary: string }>`SELECT s.summary FROM sessions s JOIN decisions d ON d.session_id = s.session_id
            WHERE d.ledger_id = ${planted.ledgerIds("feature-y/plan")[0]!}::uuid`
        ))
        assert.match(summary!.summary, /^Worked on PAY-245, .*Draft a plan for PAY-245.*\(1 decision \(1 success\), \$\d+\.\d{4}, under a minute\)$/)
      }))

    it.effect("tenants see only their own analytics; bad parameters are refused", () =>
      Effect.gen(function*() {
        const { control, pipeline, planted } = yield* Fixture
        const feature = (yield* pipeline.query.listFeatures(planted.principal, { as_of: END })).data[0]!
        const probe = yield* Effect.flip(pipeline.query.getFeature(control.principal, { feature_id: feature.feature_id }))
        assert.strictEqual(probe._tag, "NotFound")
        const graphProbe = yield* Effect.flip(pipeline.query.queryGraph(control.principal, { agent_id: "intake-router" }))
        assert.strictEqual(graphProbe._tag, "NotFound")
        const similarProbe = yield* Effect.flip(
          pipeline.query.searchSimilarDecisions(control.principal, { ledger_id: planted.ledgerIds("paraphrase")[0]! })
        )
        assert.strictEqual(similarProbe._tag, "NotFound")

        const both = yield* Effect.flip(pipeline.query.searchSimilarDecisions(planted.principal, { text: "x", ledger_id: feature.feature_id }))
        assert.strictEqual(both._tag, "BadRequest")
        const noStart = yield* Effect.flip(pipeline.query.queryGraph(planted.principal, {}))
        assert.strictEqual(noStart._tag, "BadRequest")
        const badRange = yield* Effect.flip(pipeline.query.getPulseReport(planted.principal, { period: "range", since: "2025-11-05T00:00:00Z", until: "2025-11-04T00:00:00Z" }))
        assert.strictEqual(badRange._tag, "BadRequest")
        const badDepth = yield* Effect.flip(pipeline.query.queryGraph(planted.principal, { mode: "traverse", agent_id: "coder", depth: 9 } as any))
        assert.strictEqual(badDepth._tag, "BadRequest")
        const badCursor = yield* Effect.flip(pipeline.query.listInsights(planted.principal, { cursor: "1.forged.cursor" }))
        assert.strictEqual(badCursor._tag, "BadRequest")
      }))
  })
})
