/**
 * render_ui as an MCP App, in headless Chromium, the way a host runs it: the resource HTML in a sandboxed iframe,
 * the ext-apps SDK's own `AppBridge` on the host side (connected to the server through the MCP SDK client, so the
 * view's drill-down `tools/call`s really reach /mcp), and the tool result fed to it as `ui/notifications/tool-result`.
 *
 * Each view is drawn from real tool output over a seeded ledger; key elements are asserted, interactions (sort,
 * filter, drill-down and back) exercised, a screenshot written to test/artifacts/render-ui-<view>.png, and every
 * request the page makes is recorded: there must be none.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import type { Browser } from "playwright-core"
import * as fixtures from "../fixtures/captures/index.ts"
import { ApiStack } from "../support/api-stack.ts"
import { count, mountApp, settle, text } from "../support/app-host.ts"
import { launchBrowser, screenshot } from "../support/browser.ts"
import { callTool, mcpClient, textOf } from "../support/mcp-client.ts"
import { insertDecisions, makeCapture, type SeedDecision, seedDecision } from "../support/seed.ts"

const HOUR = 3_600_000

class Ledger extends Context.Service<Ledger, {
  readonly client: Client
  readonly browser: Browser
  readonly html: string
  readonly resourceUri: string
  readonly rows: ReadonlyArray<SeedDecision>
}>()("test/render-ui/Ledger") {}

const AGENTS = [
  { id: "billing-agent", name: "Billing agent" },
  { id: "code-fixer", name: "Code fixer" },
  { id: "triage-bot", name: "Support triage" },
  { id: "planner", name: null }
] as const

const LedgerLive = Layer.effect(
  Ledger,
  Effect.gen(function*() {
    const stack = yield* ApiStack
    const scope = { ...stack.principal, key_id: Crypto.randomUUID() }
    const templates = [
      fixtures.toolCallingAgent(),
      fixtures.codingAgent(),
      fixtures.anthropicCached(),
      fixtures.geminiCached(),
      fixtures.withLogprobs(),
      fixtures.truncatedSummary(),
      fixtures.refusal(),
      fixtures.rateLimited(),
      fixtures.unknownModel()
    ]
    // four agents over the last 32 hours (the latest session 2.5 hours ago), sessions of 3–9 calls, every outcome
    const now = Date.now()
    const rows: Array<SeedDecision> = []
    let n = 0
    AGENTS.forEach((agent, a) => {
      for (let s = 0; s < 3 + a; s++) {
        const session = Crypto.randomUUID()
        const start = now - (32 - s * 5 - a * 1.5) * HOUR
        for (let i = 0; i < 3 + ((a + s) * 5) % 7; i++) {
          rows.push(seedDecision(
            makeCapture({
              scope,
              agent_id: agent.id,
              agent_name: agent.name,
              execution_id: s % 2 === 0 ? `run-${a}-${s}` : null,
              at: start + i * 95_000,
              template: templates[n++ % templates.length],
              latency_ms: 600 + ((i * 7919 + a * 104_729) % 4200)
            }),
            session
          ))
        }
      }
    })
    yield* insertDecisions(rows).pipe(Effect.provide(stack.context), Effect.orDie)
    const client = yield* mcpClient(stack.baseUrl, {
      token: stack.pat,
      capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } }
    })
    const { tools } = yield* Effect.promise(() => client.listTools())
    const resourceUri = (tools.find((t) => t.name === "render_ui")!._meta as any).ui.resourceUri as string
    const { contents } = yield* Effect.promise(() => client.readResource({ uri: resourceUri }))
    const browser = yield* launchBrowser
    return { client, browser, html: String((contents[0] as any).text), resourceUri, rows }
  })
).pipe(Layer.provideMerge(ApiStack.layer()))

/** Mounts the App for `result`, observing the `tools/call`s it makes through the host's bridge. */
const mount = (
  args: Record<string, unknown>,
  result: CallToolResult,
  options: { readonly hostContext?: Record<string, unknown>; readonly ready?: string } = {}
) =>
  Effect.gen(function*() {
    const { browser, client, html } = yield* Ledger
    const toolCalls: Array<Record<string, unknown>> = []
    const observed = new Proxy(client, {
      get: (target, key) =>
        key === "request"
          ? (request: { method: string; params?: { arguments?: Record<string, unknown> } }, ...rest: Array<unknown>) => {
            if (request.method === "tools/call") toolCalls.push(request.params?.arguments ?? {})
            return (target.request as any)(request, ...rest)
          }
          : Reflect.get(target, key, target)
    })
    const mounted = yield* mountApp({ browser, client: observed, html, args, result, ...options })
    return { ...mounted, toolCalls }
  })

const render = (args: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { client } = yield* Ledger
    const result = yield* callTool(client, "render_ui", args)
    assert.notStrictEqual(result.isError, true, textOf(result))
    return result
  })

describe("render_ui in a browser host", () => {
  layer(LedgerLive, { timeout: 180_000, excludeTestServices: true })("MCP App views", (it) => {
    it.effect("agents overview: charts and a sortable table; drill-down to an agent and back through the host", () =>
      Effect.gen(function*() {
        const result = yield* render({ view: "agents" })
        const data = (result.structuredContent as any).data
        const { deliver, page, frame, requests, toolCalls } = yield* mount({ view: "agents" }, result)
        yield* settle(page)
        yield* screenshot(page, "render-ui-agents")
        assert.strictEqual(yield* text(frame, "h1#title"), "4 agents")
        assert.include(yield* Effect.promise(() => frame.locator(".brand").textContent()), "Agent Decision Ledger")
        assert.strictEqual(yield* count(frame, "tbody tr"), 4)
        assert.strictEqual(yield* count(frame, ".bars .bar"), 8, "cost and decisions per agent")
        assert.isAbove(yield* count(frame, "svg.chart rect"), data.activity.buckets.length, "activity columns")
        // sort by cost: the costliest agent first
        yield* Effect.promise(() => frame.locator("th", { hasText: "Cost" }).click())
        const costliest = [...data.agents].sort((a: any, b: any) => b.total_cost_usd - a.total_cost_usd)[0]
        assert.include(yield* text(frame, "tbody tr"), costliest.agent_name ?? costliest.agent_id)
        yield* Effect.promise(() => frame.locator("input[type=search]").fill("triage"))
        assert.strictEqual(yield* count(frame, "tbody tr"), 1)

        // drill down: the App calls render_ui through the host's bridge
        yield* Effect.promise(() => frame.locator("tbody tr").first().click())
        yield* Effect.promise(() => frame.waitForSelector(`html[data-view="agent"]`))
        assert.deepStrictEqual(toolCalls, [{ view: "agent", agent_id: "triage-bot" }])
        assert.strictEqual(yield* text(frame, "h1#title"), "Support triage")
        assert.isTrue(yield* Effect.promise(() => frame.locator("#back").isVisible()))
        // the host delivers the first result again: the reader stays where they drilled to
        yield* deliver(result)
        assert.strictEqual(yield* text(frame, "h1#title"), "Support triage")
        yield* Effect.promise(() => frame.locator("#back").click())
        yield* Effect.promise(() => frame.waitForSelector(`html[data-view="agents"]`))
        assert.deepStrictEqual(requests.all, [], "the App made no network request")
      }))

    it.effect("agent: activity, outcome and intent mix, sessions and recent decisions", () =>
      Effect.gen(function*() {
        const { rows } = yield* Ledger
        const result = yield* render({ view: "agent", agent_id: "code-fixer" })
        const data = (result.structuredContent as any).data
        const { deliver, page, frame, requests } = yield* mount({ view: "agent", agent_id: "code-fixer" }, result)
        yield* settle(page)
        yield* screenshot(page, "render-ui-agent")
        assert.strictEqual(yield* text(frame, "h1#title"), "Code fixer")
        const sessions = new Set(rows.filter((r) => r.capture.agent_id === "code-fixer").map((r) => r.session_id))
        assert.strictEqual(data.sessions.length, sessions.size)
        assert.strictEqual(yield* count(frame, "section.card:has(h2:text-is('Sessions')) tbody tr"), sessions.size)
        assert.isAbove(yield* count(frame, ".mix > div"), 1, "outcome mix segments")
        assert.strictEqual(yield* text(frame, ".stat .v"), String(rows.filter((r) => r.capture.agent_id === "code-fixer").length))
        // filter the recent decisions by outcome chip
        const chip = frame.locator("button.chip").first()
        const outcome = yield* Effect.promise(() => chip.getAttribute("data-value"))
        const expected = data.recent.filter((d: any) => d.outcome === outcome).length
        // pressed until it holds: one CI run counted the rows before the filter showed (the cause not found; not a
        // second draw — a result delivered again is not redrawn, below)
        const shown = yield* Effect.promise(async () => {
          let rows = -1
          for (let i = 0; i < 20 && rows !== expected; i++) {
            if ((await chip.getAttribute("aria-pressed")) !== "true") await chip.click()
            rows = await frame.locator("section.card:has(h2:text-matches('Recent decisions')) tbody tr").count()
            if (rows !== expected) await frame.page().waitForTimeout(100)
          }
          return rows
        })
        assert.strictEqual(shown, expected)
        // the host delivers the same result again: the filter holds
        yield* deliver(result)
        assert.strictEqual(yield* Effect.promise(() => chip.getAttribute("aria-pressed")), "true")
        assert.strictEqual(yield* count(frame, "section.card:has(h2:text-matches('Recent decisions')) tbody tr"), expected)
        // a different result is drawn afresh
        const other = yield* render({ view: "agent", agent_id: "triage-bot" })
        yield* deliver(other)
        assert.strictEqual(yield* text(frame, "h1#title"), "Support triage")
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("session timeline with health", () =>
      Effect.gen(function*() {
        const { rows } = yield* Ledger
        const longest = [...Map.groupBy(rows, (r) => r.session_id).entries()].sort((a, b) => b[1].length - a[1].length)[0]!
        const args = { view: "session", session_id: longest[0] }
        const result = yield* render(args)
        const data = (result.structuredContent as any).data
        const { page, frame, requests, toolCalls } = yield* mount(args, result)
        assert.strictEqual(yield* count(frame, "ol.timeline > li"), longest[1].length)
        assert.strictEqual(yield* text(frame, "section.card:has(h2:text-is('Health')) .badge"), data.session.health.status)
        assert.include(yield* text(frame, "ol.timeline > li"), longest[1][0]!.derivation.title.slice(0, 20))
        yield* settle(page)
        yield* screenshot(page, "render-ui-session")
        // drill into the first step
        yield* Effect.promise(() => frame.locator("ol.timeline > li button.drill").first().click())
        yield* Effect.promise(() => frame.waitForSelector(`html[data-view="decision"]`))
        assert.deepStrictEqual(toolCalls, [{ view: "decision", ledger_id: longest[1][0]!.capture.ledger_id }])
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("decision audit trail: trace, evidence, findings, artifacts, scores, cost", () =>
      Effect.gen(function*() {
        const { rows } = yield* Ledger
        const row = rows.find((r) => r.derivation.artifacts.length > 2 && r.derivation.findings.length > 0)!
        const args = { view: "decision", ledger_id: row.capture.ledger_id }
        const result = yield* render(args)
        const { page, frame, requests } = yield* mount(args, result)
        assert.strictEqual(yield* text(frame, "h1#title"), row.derivation.title)
        const trace = frame.locator("section.card:has(h2:text-matches('Logic trace')) .step")
        assert.strictEqual(yield* Effect.promise(() => trace.count()), row.derivation.logic_trace.length)
        assert.strictEqual(yield* count(frame, "section.card:has(h2:text-matches('Artifacts')) .step"), row.derivation.artifacts.length)
        assert.strictEqual(yield* count(frame, "section.card:has(h2:text-matches('Findings')) li"), row.derivation.findings.length)
        assert.strictEqual(yield* count(frame, "section.card:has(h2:text-matches('Evidence')) .step"), row.derivation.evidence.length)
        assert.include(yield* text(frame, "section.card:has(h2:text-is('Quality'))"), row.derivation.quality.value.toFixed(2))
        yield* settle(page)
        yield* screenshot(page, "render-ui-decision")
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("decisions table: filters from the arguments, client-side sort and filter, next page through the host", () =>
      Effect.gen(function*() {
        const { rows } = yield* Ledger
        const args = { view: "decisions", limit: 25, order: "cost" }
        const result = yield* render(args)
        const data = (result.structuredContent as any).data
        assert.strictEqual(data.data.length, 25)
        assert.isString(data.next_cursor)
        const { page, frame, requests, toolCalls } = yield* mount(args, result)
        assert.strictEqual(yield* count(frame, "tbody tr"), 25)
        yield* settle(page)
        yield* screenshot(page, "render-ui-decisions")
        assert.strictEqual(yield* Effect.promise(() => frame.locator("th[aria-sort=descending]").innerText()), "Cost")
        yield* Effect.promise(() => frame.locator("th", { hasText: "Latency" }).click())
        const latencies = yield* Effect.promise(() => frame.locator("tbody tr td:nth-child(9)").allInnerTexts())
        const values = latencies.map((v) => Number(v.replace(/[^\d.]/g, "")) * (v.includes(" s") ? 1000 : 1))
        assert.deepStrictEqual(values, [...values].sort((a, b) => b - a))
        yield* Effect.promise(() => frame.locator("input[type=search]").fill("billing-agent"))
        assert.strictEqual(yield* count(frame, "tbody tr"), data.data.filter((d: any) => d.agent_id === "billing-agent").length)
        yield* Effect.promise(() => frame.locator("input[type=search]").fill(""))
        yield* Effect.promise(() => frame.locator("button", { hasText: "Next page" }).click())
        yield* Effect.promise(() => frame.locator("#back").waitFor())
        assert.deepStrictEqual(toolCalls, [{ ...args, view: "decisions", cursor: data.next_cursor }])
        assert.strictEqual(yield* count(frame, "tbody tr"), Math.min(25, rows.length - 25))
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("limit and cursor: every view render_ui advertises them for takes them and pages; the others say which views do", () =>
      Effect.gen(function*() {
        const { client, rows } = yield* Ledger
        const { tools } = yield* Effect.promise(() => client.listTools())
        const limit = (tools.find((t) => t.name === "render_ui")!.inputSchema.properties as any).limit
        const advertised = /Views: (.*)\.$/.exec(limit.description)![1]!.split(", ")
        assert.includeMembers(advertised, ["agents", "agent", "session", "decisions"])
        const session = rows[0]!.session_id
        const agent = AGENTS[0].id
        const pages: Record<string, { args: Record<string, unknown>; items: (data: any) => ReadonlyArray<unknown>; next: (data: any) => string | null }> = {
          agents: { args: {}, items: (d) => d.agents, next: (d) => d.next_cursor },
          agent: { args: { agent_id: agent }, items: (d) => d.sessions, next: (d) => d.sessions_next_cursor },
          session: { args: { session_id: session }, items: (d) => d.timeline, next: (d) => d.next_cursor },
          decisions: { args: {}, items: (d) => d.data, next: (d) => d.next_cursor }
        }
        for (const view of advertised) {
          const paging = pages[view]!
          const first = yield* callTool(client, "render_ui", { view, ...paging.args, limit: 1 })
          assert.notStrictEqual(first.isError, true, `${view}: ${textOf(first)}`)
          const data = (first.structuredContent as any).data
          assert.strictEqual(paging.items(data).length, 1, view)
          const cursor = paging.next(data)
          assert.isString(cursor, `${view} has a next page`)
          const second = yield* callTool(client, "render_ui", { view, ...paging.args, limit: 1, cursor })
          assert.notStrictEqual(second.isError, true, `${view} page 2: ${textOf(second)}`)
          assert.notDeepEqual(paging.items((second.structuredContent as any).data), paging.items(data), `${view}: another page`)
        }
        const refused = yield* callTool(client, "render_ui", { view: "pulse", limit: 5 })
        assert.isTrue(refused.isError)
        assert.include(textOf(refused), "this view takes")
      }))

    it.effect("CSP: the App's own script and styles by hash only; script injected into its document does not run", () =>
      Effect.gen(function*() {
        const { html } = yield* Ledger
        const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)![1]!
        const directives = new Map(csp.split(";").map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]))
        const sha256 = (text: string) => `'sha256-${Crypto.createHash("sha256").update(text).digest("base64")}'`
        assert.deepStrictEqual(directives.get("script-src"), [sha256(/<script>([^]*)<\/script>/.exec(html)![1]!)])
        assert.deepStrictEqual(directives.get("style-src"), [sha256(/<style>([^]*)<\/style>/.exec(html)![1]!)])
        assert.notInclude(csp, "unsafe-")

        const result = yield* render({ view: "agents" })
        const { frame, requests, violations } = yield* mount({ view: "agents" }, result)
        // the views style through the CSSOM, which the policy leaves alone: bars are drawn to their values
        const fills = yield* Effect.promise(() =>
          frame.locator(".bars .fill").evaluateAll((els) => els.map((el) => el.getBoundingClientRect().width / el.parentElement!.getBoundingClientRect().width))
        )
        assert.isTrue(fills.some((f) => f > 0 && f < 0.99), `bar widths ${fills}`)
        assert.strictEqual(yield* Effect.promise(() => frame.locator("header.app").evaluate((el) => getComputedStyle(el).display)), "flex", "the stylesheet applies")

        // what a view that let data reach markup would run: an inline script, an event handler attribute
        const ran = yield* Effect.promise(() =>
          frame.evaluate(async () => {
            const script = document.createElement("script")
            script.textContent = "window.ran = 'script'"
            document.body.append(script)
            const main = document.querySelector("main")!
            main.insertAdjacentHTML("beforeend", `<img id="probe" src="data:," onerror="window.ran = 'onerror'">`)
            await new Promise((resolve) => document.getElementById("probe")!.addEventListener("error", resolve))
            await new Promise((resolve) => setTimeout(resolve, 50))
            return (window as any).ran ?? null
          })
        )
        assert.isNull(ran)
        yield* Effect.promise(() => frame.page().waitForTimeout(100))
        assert.strictEqual(violations.filter((v) => v.includes("script")).length, 2, "Chromium refused both")
        assert.strictEqual(yield* text(frame, "h1#title"), "4 agents", "the view is still there")
        assert.deepStrictEqual(requests.all, [])
      }))

    it.effect("follows the host's dark theme; an isError result is shown as an error", () =>
      Effect.gen(function*() {
        const result = yield* render({ view: "agents" })
        const { page, frame } = yield* mount({ view: "agents" }, result, { hostContext: { theme: "dark" } })
        assert.strictEqual(yield* Effect.promise(() => frame.locator("html").getAttribute("data-theme")), "dark")
        yield* settle(page)
        yield* screenshot(page, "render-ui-agents-dark")
        const { client } = yield* Ledger
        const refused = yield* callTool(client, "render_ui", { view: "agent", agent_id: "nobody" })
        assert.isTrue(refused.isError)
        const failed = yield* mount({ view: "agent" }, refused, { ready: ".notice.bad" })
        assert.include(yield* text(failed.frame, ".notice.bad"), "not found")
        assert.isNull(yield* Effect.promise(() => failed.frame.locator("html").getAttribute("data-view")))
      }))
  })
})
