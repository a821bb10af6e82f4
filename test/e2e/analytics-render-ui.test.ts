/**
 * The analytics views of render_ui (pulse, feature, graph) drawn in headless Chromium from real tool output over
 * the planted workload: the App resource in a sandboxed iframe behind the ext-apps `AppBridge` (as an MCP Apps host
 * runs it), the render_ui result delivered as a tool result. Key elements are asserted, a screenshot is written to
 * test/artifacts/analytics-<view>.png, and the page may make no request at all.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Browser } from "playwright-core"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { workloadPipeline, type WorkloadTenant } from "../../bench/workload/pipeline.ts"
import { planWorkload, WORKLOAD_START } from "../../bench/workload/scenario.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import { count, mountApp, settle, text } from "../support/app-host.ts"
import { launchBrowser, screenshot } from "../support/browser.ts"
import { callTool, mcpClient, textOf } from "../support/mcp-client.ts"
import { onFreePort } from "../support/ports.ts"

class Host extends Context.Service<Host, {
  readonly client: Client
  readonly browser: Browser
  readonly html: string
  readonly planted: WorkloadTenant
}>()("test/AnalyticsRenderUiHost") {}

const HostLive = Layer.effect(
  Host,
  Effect.gen(function*() {
    const { baseUrl, pipeline } = yield* onFreePort((port) => {
      const baseUrl = `http://127.0.0.1:${port}`
      return workloadPipeline({ settings: { apiPort: port, publicUrl: baseUrl }, layer: serveApi(ApiRoutesLive) }).pipe(
        Effect.map((pipeline) => ({ baseUrl, pipeline }))
      )
    })
    const planted = yield* pipeline.run(planWorkload("planted"), "render")
    const client = yield* mcpClient(baseUrl, {
      token: planted.pat,
      capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } }
    })
    const { tools } = yield* Effect.promise(() => client.listTools())
    const uri = (tools.find((t) => t.name === "render_ui")!._meta as any).ui.resourceUri as string
    const { contents } = yield* Effect.promise(() => client.readResource({ uri }))
    return { client, browser: yield* launchBrowser, html: String((contents[0] as any).text), planted }
  })
)

/** Draws `args` in the host page; yields the App's frame once the view is drawn, and the requests the page made. */
const draw = (args: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { browser, client, html } = yield* Host
    const result = yield* callTool(client, "render_ui", args)
    assert.notStrictEqual(result.isError, true, textOf(result))
    const { frame, page, requests } = yield* mountApp({ browser, client, html, args, result: result as CallToolResult })
    yield* settle(page)
    yield* screenshot(page, `analytics-${args.view}`)
    assert.strictEqual(yield* count(frame, ".notice.bad"), 0, "the view drew without an error")
    return { frame, requests, data: (result.structuredContent as any).data }
  })

describe("analytics views of render_ui in a browser host", () => {
  layer(HostLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("pulse: totals with changes, top agents, insights and delivered features", () =>
      Effect.gen(function*() {
        const { frame, requests, data } = yield* draw({ view: "pulse", period: "week", date: "2025-11-04T00:00:00Z" })
        assert.strictEqual(yield* text(frame, "h1#title"), "Week from 2025-11-03")
        assert.include(yield* text(frame, ".stats"), String(data.totals.decisions))
        assert.strictEqual(yield* count(frame, ".bars .bar"), data.top_agents.length)
        assert.include((yield* Effect.promise(() => frame.locator("main").innerText())).toLowerCase(), "new insights (7)")
        assert.strictEqual(yield* count(frame, "tbody tr"), data.costliest_sessions.length + data.features_delivered.length)
        assert.deepStrictEqual(requests.all, [], "the App made no network request")
      }))

    it.effect("feature: status, subjects, ROI inputs, sessions and the feature it may duplicate", () =>
      Effect.gen(function*() {
        const { client } = yield* Host
        const as_of = new Date(WORKLOAD_START + 48 * 3_600_000).toISOString()
        const features = (yield* callTool(client, "list_features", { as_of })).structuredContent as any
        const y = features.data.find((f: any) => f.title.startsWith("PAY-245"))
        const { frame, requests } = yield* draw({ view: "feature", feature_id: y.feature_id, as_of })
        assert.strictEqual(yield* text(frame, "h1#title"), y.title)
        assert.include(yield* text(frame, ".badge"), "delivered")
        assert.include(yield* Effect.promise(() => frame.locator("main").innerText()), "PAY-231")
        assert.isAtLeast(yield* count(frame, "tbody tr"), 3 + 1, "ROI inputs and three sessions")
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("graph: the agent network and the walk around a ticket", () =>
      Effect.gen(function*() {
        const network = yield* draw({ view: "graph", mode: "agent_network" })
        assert.strictEqual(yield* count(network.frame, "svg.chart circle"), network.data.nodes.length)
        assert.include(yield* Effect.promise(() => network.frame.locator("main").innerText()), "handed off to")
        assert.deepStrictEqual(network.requests.all, [])

        const walk = yield* draw({ view: "graph", subject: "ticket:PAY-245", direction: "in", depth: 3, edge_types: ["about", "contains", "ran"] })
        assert.strictEqual(yield* text(walk.frame, "h1#title"), "Around subject:ticket:PAY-245")
        assert.strictEqual(yield* count(walk.frame, "svg.chart line"), walk.data.edges.length)
        assert.deepStrictEqual(walk.requests.all, [])
      }))
  })
})
