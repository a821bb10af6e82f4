/**
 * The seven analytics tools over MCP (the SDK client, streamable HTTP, a PAT), on the planted workload driven
 * through the whole pipeline: valid calls (structuredContent checked by the client against each outputSchema, text
 * in `content`), invalid arguments refused with what is allowed, and cross-tenant probes that find nothing.
 */
import { assert, describe, layer } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Context, Effect, Layer } from "effect"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { type WorkloadPipeline, workloadPipeline, type WorkloadTenant } from "../../bench/workload/pipeline.ts"
import { PARAPHRASE_QUERY, planWorkload, WORKLOAD_START } from "../../bench/workload/scenario.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import { callTool, mcpClient, textOf } from "../support/mcp-client.ts"
import { onFreePort } from "../support/ports.ts"

const ANALYTICS_TOOLS = [
  "query_graph",
  "search_similar_decisions",
  "list_features",
  "get_feature",
  "list_feature_merge_suggestions",
  "list_insights",
  "get_pulse_report"
]

class Fixture extends Context.Service<Fixture, {
  readonly pipeline: WorkloadPipeline
  readonly planted: WorkloadTenant
  readonly control: WorkloadTenant
  readonly owner: Client
  readonly stranger: Client
}>()("test/AnalyticsMcpFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const { baseUrl, pipeline } = yield* onFreePort((port) => {
      const baseUrl = `http://127.0.0.1:${port}`
      return workloadPipeline({ settings: { apiPort: port, publicUrl: baseUrl }, layer: serveApi(ApiRoutesLive) }).pipe(
        Effect.map((pipeline) => ({ baseUrl, pipeline }))
      )
    })
    const planted = yield* pipeline.run(planWorkload("planted"), "planted")
    const control = yield* pipeline.run(planWorkload("control"), "control")
    return {
      pipeline,
      planted,
      control,
      owner: yield* mcpClient(baseUrl, { token: planted.pat }),
      stranger: yield* mcpClient(baseUrl, { token: control.pat })
    }
  })
)

const END = new Date(WORKLOAD_START + 48 * 3_600_000).toISOString()

describe("analytics tools over MCP", () => {
  layer(FixtureLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("tools/list: the seven analytics tools, read-only, described, with output schemas", () =>
      Effect.gen(function*() {
        const { owner } = yield* Fixture
        const { tools } = yield* Effect.promise(() => owner.listTools())
        const byName = new Map(tools.map((tool) => [tool.name, tool]))
        for (const name of ANALYTICS_TOOLS) {
          const tool = byName.get(name)
          assert.isDefined(tool, name)
          assert.deepInclude(tool!.annotations, { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false })
          assert.strictEqual(tool!.outputSchema?.type, "object", name)
          assert.strictEqual((tool!.inputSchema as any).additionalProperties, false, name)
          for (const [param, schema] of Object.entries<any>(tool!.inputSchema.properties ?? {})) {
            assert.isString(schema.description, `${name}.${param}`)
          }
        }
        assert.deepStrictEqual(byName.get("get_feature")!.inputSchema.required, ["feature_id"])
      }))

    it.effect("valid calls answer the read model's payload with a text rendering", () =>
      Effect.gen(function*() {
        const { owner, pipeline, planted } = yield* Fixture
        const call = (name: string, args: Record<string, unknown>) =>
          Effect.map(callTool(owner, name, args), (result) => {
            assert.notStrictEqual(result.isError, true, `${name}: ${textOf(result)}`)
            assert.isAbove(textOf(result).length, 20, name)
            return result
          })

        const insights = yield* call("list_insights", { limit: 100 })
        assert.deepStrictEqual(
          insights.structuredContent,
          (yield* pipeline.query.listInsights(planted.principal, { limit: 100 })) as unknown
        )
        assert.include(textOf(insights), "cost_spike")

        const features = yield* call("list_features", { as_of: END })
        const list = (features.structuredContent as any).data as Array<{ feature_id: string; title: string }>
        assert.strictEqual(list.length, 4)
        const y = list.find((f) => f.title.startsWith("PAY-245"))!
        const detail = yield* call("get_feature", { feature_id: y.feature_id, as_of: END })
        assert.strictEqual((detail.structuredContent as any).sessions.length, 3)
        assert.include(textOf(detail), "PAY-245")

        const merge = yield* call("list_feature_merge_suggestions", {})
        assert.strictEqual((merge.structuredContent as any).data.length, 1)

        const graph = yield* call("query_graph", { mode: "agent_network" })
        assert.isTrue((graph.structuredContent as any).edges.some((e: any) => e.type === "handed_off_to"))
        const walk = yield* call("query_graph", { subject: "ticket:PAY-245", direction: "in", depth: 1 })
        assert.strictEqual((walk.structuredContent as any).nodes.length, 1 + planted.ledgerIds("feature-y").length)

        const similar = yield* call("search_similar_decisions", { text: PARAPHRASE_QUERY, min_score: 0.6 })
        assert.deepStrictEqual(
          (similar.structuredContent as any).data.map((d: any) => d.ledger_id).sort(),
          [...planted.ledgerIds("paraphrase")].sort()
        )

        const pulse = yield* call("get_pulse_report", { period: "week", date: "2025-11-04T00:00:00Z" })
        assert.strictEqual((pulse.structuredContent as any).totals.decisions, planted.results.length)
        assert.include(textOf(pulse), "New insights (7)")
        // a time without an offset is UTC, whatever the server's time zone (Node reads TZ as it changes)
        const zone = process.env.TZ
        process.env.TZ = "Europe/Berlin"
        const day = yield* call("get_pulse_report", { date: "2025-11-05T00:30:00" }).pipe(
          Effect.ensuring(Effect.sync(() => zone === undefined ? delete process.env.TZ : (process.env.TZ = zone)))
        )
        assert.strictEqual((day.structuredContent as any).period.start, "2025-11-05T00:00:00.000Z")
      }))

    it.effect("invalid arguments are refused with an actionable message", () =>
      Effect.gen(function*() {
        const { owner } = yield* Fixture
        const refused = (name: string, args: Record<string, unknown>, pattern: RegExp) =>
          Effect.map(callTool(owner, name, args), (result) => {
            assert.strictEqual(result.isError, true, `${name} ${JSON.stringify(args)}`)
            assert.match(textOf(result), pattern, name)
          })
        yield* refused("query_graph", { depth: 9, agent_id: "coder" }, /depth/)
        yield* refused("query_graph", {}, /exactly one start node/)
        yield* refused("query_graph", { agent_id: "coder", subject: "ticket:PAY-1" }, /exactly one start node/)
        yield* refused("query_graph", { node: "agent:coder" }, /Accepted parameters/)
        yield* refused("search_similar_decisions", {}, /exactly one of `text` or `ledger_id`/)
        yield* refused("search_similar_decisions", { text: "x", min_score: 2 }, /min_score/)
        yield* refused("search_similar_decisions", { ledger_id: "not-a-uuid" }, /ledger_id/)
        yield* refused("list_features", { status: "done" }, /status/)
        yield* refused("list_features", { cursor: "1.abc.def" }, /cursor/)
        yield* refused("get_feature", {}, /feature_id/)
        yield* refused("get_feature", { feature_id: "00000000-0000-8000-8000-000000000000" }, /not found/)
        yield* refused("list_feature_merge_suggestions", { min_score: -1 }, /min_score/)
        yield* refused("list_insights", { types: ["meltdown"] }, /types/)
        yield* refused("get_pulse_report", { period: "year" }, /period/)
        yield* refused("get_pulse_report", { period: "range", since: "2025-11-04T00:00:00Z" }, /until/)
        yield* refused("get_pulse_report", { date: "yesterday" }, /date/)
      }))

    it.effect("another tenant's ids find nothing, and its lists are its own", () =>
      Effect.gen(function*() {
        const { owner, planted, stranger } = yield* Fixture
        const features = (yield* callTool(owner, "list_features", { as_of: END })).structuredContent as any
        const featureId = features.data[0].feature_id
        const probe = (name: string, args: Record<string, unknown>) =>
          Effect.map(callTool(stranger, name, args), (result) => {
            assert.strictEqual(result.isError, true, name)
            assert.match(textOf(result), /not found/, name)
          })
        yield* probe("get_feature", { feature_id: featureId })
        yield* probe("query_graph", { agent_id: "intake-router" })
        yield* probe("query_graph", { ledger_id: planted.ledgerIds("loop")[0]! })
        yield* probe("search_similar_decisions", { ledger_id: planted.ledgerIds("paraphrase")[0]! })

        const theirs = (name: string, args: Record<string, unknown>) => Effect.map(callTool(stranger, name, args), (r) => r.structuredContent as any)
        assert.deepStrictEqual((yield* theirs("list_insights", {})).data, [])
        assert.deepStrictEqual((yield* theirs("list_feature_merge_suggestions", { feature_id: featureId })).data, [])
        assert.isFalse((yield* theirs("list_features", { as_of: END })).data.some((f: any) => f.feature_id === featureId))
        const network = yield* theirs("query_graph", { mode: "agent_network" })
        assert.isFalse(network.nodes.some((n: any) => n.id === "intake-router" || n.id === "legacy-sync"))
        const pulse = yield* theirs("get_pulse_report", { period: "week", date: "2025-11-04T00:00:00Z" })
        assert.deepStrictEqual(pulse.new_insights, [])
      }))
  })
})
