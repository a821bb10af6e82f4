/**
 * The MCP tool server over streamable HTTP with the SDK's own client and a Personal Access Token, against real
 * PostgreSQL: tools/list (exact names, annotations, schemas), every tool with valid and invalid arguments,
 * structuredContent equal to the REST body for the same request, pagination, cross-tenant and restricted-member
 * probes, logging, the App resource, and the HTTP edges (401 challenges, DNS rebinding, methods, metadata).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, layer } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { request } from "undici"
import { ApiStack, type ApiStackInfo } from "../support/api-stack.ts"
import { buildDecisions, type Member, memberOf, MINUTE, seedTwoTenantLedger } from "../support/ledger-fixture.ts"
import { callTool, mcpClient, textOf } from "../support/mcp-client.ts"
import { grantByForms } from "../support/oauth-browser.ts"
import { insertDecisions, makeCapture, type SeedDecision, seedDecision, TEMPLATES } from "../support/seed.ts"

/** the tools' names are exact: clients rely on them */
const TOOL_NAMES = [
  "list_agents", "list_agent_sessions", "list_session_decisions", "get_decision", "list_decisions", "query_graph",
  "search_similar_decisions", "list_features", "get_feature", "list_feature_merge_suggestions", "list_insights",
  "get_pulse_report", "render_ui"
]
const VIEWS = ["agents", "agent", "session", "decision", "decisions", "pulse", "feature", "graph"]


class Fixture extends Context.Service<Fixture, {
  readonly stack: ApiStackInfo
  readonly ann: Member
  readonly rex: Member
  readonly bob: Member
  readonly rows: ReadonlyArray<SeedDecision>
  readonly sessions: ReadonlyArray<{ readonly id: string; readonly agent: string; readonly owner: Member }>
}>()("test/mcp/Fixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const stack = yield* ApiStack
    const { ann, rex, bob, sessions, rows } = yield* seedTwoTenantLedger(stack)
    return { stack, ann, rex, bob, rows, sessions }
  })
).pipe(Layer.provideMerge(ApiStack.layer()))

const clientOf = (who: Member) =>
  Effect.gen(function*() {
    const { stack } = yield* Fixture
    return yield* mcpClient(stack.baseUrl, { token: who.pat })
  })

/** The REST body of the same request, with the member's PAT. */
const rest = (who: Member, path: string) =>
  Effect.gen(function*() {
    const { stack } = yield* Fixture
    return yield* Effect.promise(async () => {
      const response = await fetch(`${stack.baseUrl}${path}`, { headers: { authorization: `Bearer ${who.pat}` } })
      assert.strictEqual(response.status, 200, path)
      return response.json()
    })
  })

/** Calls a tool that must succeed; returns its structuredContent. */
const ok = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  Effect.map(callTool(client, name, args), (result) => {
    assert.notStrictEqual(result.isError, true, `${name} ${JSON.stringify(args)} failed: ${textOf(result)}`)
    assert.isObject(result.structuredContent)
    assert.isAbove(textOf(result).length, 0, "a text rendering")
    return result.structuredContent as any
  })

/** Calls a tool that must answer isError; returns its text. */
const refused = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.map(callTool(client, name, args), (result) => {
    assert.strictEqual(result.isError, true, `${name} ${JSON.stringify(args)} should be refused: ${JSON.stringify(result).slice(0, 300)}`)
    assert.isUndefined(result.structuredContent)
    return textOf(result)
  })

/** Every item of a tool's list, following next_cursor. */
const walk = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.gen(function*() {
    const items: Array<any> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const page: any = yield* ok(client, name, cursor === null ? args : { ...args, cursor })
      items.push(...page.data)
      cursor = page.next_cursor
      pages++
    } while (cursor !== null)
    return { items, pages }
  })

const visibleTo = (who: Member, rows: ReadonlyArray<SeedDecision>) =>
  rows.filter((r) =>
    r.capture.tenant_id === who.principal.tenant_id && (who.principal.role !== "restricted" || r.capture.user_id === who.principal.user_id)
  )

describe("MCP /mcp", () => {
  layer(FixtureLive, { timeout: 120_000, excludeTestServices: true })("tool server on postgres", (it) => {
    it.effect("initialize declares tools, resources, logging and the MCP Apps extension", () =>
      Effect.gen(function*() {
        const client = yield* clientOf((yield* Fixture).ann)
        const capabilities = client.getServerCapabilities()!
        assert.isObject(capabilities.tools)
        assert.isObject(capabilities.resources)
        assert.isObject(capabilities.logging)
        assert.isObject((capabilities as any).extensions["io.modelcontextprotocol/ui"])
        assert.strictEqual(client.getServerVersion()?.name, "agent-decision-ledger")
        assert.isString(client.getInstructions())
      }))

    it.effect("tools/list: exact names, read-only annotations, described parameters, schemas that compile", () =>
      Effect.gen(function*() {
        const client = yield* clientOf((yield* Fixture).ann)
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.deepStrictEqual(tools.map((t) => t.name), TOOL_NAMES)
        const ajv = new Ajv2020({ strict: false })
        for (const tool of tools) {
          assert.deepInclude(tool.annotations, { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }, tool.name)
          assert.isAbove(tool.description!.length, 120, `${tool.name} has a description a model can choose by`)
          assert.strictEqual(tool.inputSchema.type, "object")
          assert.strictEqual((tool.inputSchema as any).additionalProperties, false, `${tool.name} refuses unknown parameters`)
          for (const [name, property] of Object.entries<any>(tool.inputSchema.properties ?? {})) {
            assert.isString(property.description, `${tool.name}.${name} is described`)
            assert.notProperty(property, "anyOf", `${tool.name}.${name}: no null/NaN noise in parameters`)
          }
          assert.strictEqual(tool.outputSchema?.type, "object", `${tool.name} has an output schema`)
          ajv.compile(tool.inputSchema)
          ajv.compile(tool.outputSchema!)
        }
        const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
        assert.deepStrictEqual(byName.list_agent_sessions!.inputSchema.required, ["agent_id"])
        assert.deepStrictEqual(byName.list_session_decisions!.inputSchema.required, ["session_id"])
        assert.deepStrictEqual(byName.get_decision!.inputSchema.required, ["ledger_id"])
        assert.includeMembers(Object.keys(byName.list_decisions!.inputSchema.properties!), [
          "since", "until", "outcomes", "intents", "min_cost_usd", "max_cost_usd", "min_quality", "max_quality",
          "agent_id", "session_id", "model", "order", "limit", "cursor"
        ])
        const renderUi = byName.render_ui!
        assert.match(String((renderUi._meta as any).ui.resourceUri), /^ui:\/\/ledger\//)
        assert.deepStrictEqual((renderUi.inputSchema.properties as any).view.enum, VIEWS)
        assert.includeMembers(Object.keys(renderUi.inputSchema.properties!), ["agent_id", "session_id", "ledger_id"])
        for (const tool of tools) {
          for (const name of Object.keys(tool.inputSchema.properties ?? {})) {
            if (/(^|_)id$/.test(name)) assert.include(["agent_id", "session_id", "ledger_id", "feature_id"], name, `${tool.name}.${name}`)
          }
        }
      }))

    it.effect("the render_ui resource is a self-contained MCP App document", () =>
      Effect.gen(function*() {
        const client = yield* clientOf((yield* Fixture).ann)
        const { resources } = yield* Effect.promise(() => client.listResources())
        assert.strictEqual(resources.length, 1)
        const resource = resources[0]!
        assert.strictEqual(resource.mimeType, "text/html;profile=mcp-app")
        const { contents } = yield* Effect.promise(() => client.readResource({ uri: resource.uri }))
        const html = String((contents[0] as any).text)
        assert.strictEqual(contents[0]!.mimeType, "text/html;profile=mcp-app")
        assert.match(html, /^<!doctype html>/i)
        assert.include(html, "Agent Decision Ledger")
        assert.include(html, "default-src 'none'")
        assert.notMatch(html, /<(script|link|img|iframe)[^>]+(src|href)=/i, "nothing loaded from elsewhere")
        assert.notMatch(html, /\bfetch\(|XMLHttpRequest|WebSocket|EventSource|import\(/, "no network from the page")
        const missing = yield* Effect.exit(Effect.promise(() => client.readResource({ uri: "ui://ledger/nope.html" })))
        assert.strictEqual(missing._tag, "Failure")
      }))

    it.effect("list_agents: the REST body, paginated, with a text rendering", () =>
      Effect.gen(function*() {
        const { ann } = yield* Fixture
        const client = yield* clientOf(ann)
        const page = yield* ok(client, "list_agents", { limit: 2 })
        assert.deepStrictEqual(page, yield* rest(ann, "/v1/agents?limit=2"))
        const all = yield* walk(client, "list_agents", { limit: 1 })
        assert.deepStrictEqual(all.items.map((a) => a.agent_id).sort(), ["coder", "planner", "reviewer"])
        assert.strictEqual(all.pages, 3)
        const byCost = yield* ok(client, "list_agents", { order: "cost" })
        assert.deepStrictEqual(byCost, yield* rest(ann, "/v1/agents?order=cost"))
        const text = textOf(yield* callTool(client, "list_agents", {}))
        for (const agent of ["coder", "planner", "reviewer"]) assert.include(text, agent)
        assert.include(yield* refused(client, "list_agents", { limit: 0 }), "limit")
        assert.include(yield* refused(client, "list_agents", { order: "alphabetical" }), "order")
        assert.include(yield* refused(client, "list_agents", { cursor: "not-a-cursor" }), "cursor")
        assert.include(yield* refused(client, "list_agents", { active_since: "yesterday" }), "ISO 8601")
        const unknown = yield* refused(client, "list_agents", { agent: "coder" })
        assert.include(unknown, "agent")
        assert.include(unknown, "Accepted parameters")
      }))

    it.effect("list_agent_sessions and list_session_decisions: REST bodies, pages, unknown and malformed ids", () =>
      Effect.gen(function*() {
        const { ann, sessions, rows } = yield* Fixture
        const client = yield* clientOf(ann)
        const page = yield* ok(client, "list_agent_sessions", { agent_id: "planner" })
        assert.deepStrictEqual(page, yield* rest(ann, "/v1/agents/planner/sessions"))
        assert.sameMembers(page.data.map((s: any) => s.session_id), sessions.filter((s) => s.agent === "planner" && s.owner === ann).map((s) => s.id))
        const walked = yield* walk(client, "list_agent_sessions", { agent_id: "coder", limit: 1 })
        assert.strictEqual(walked.items.length, 4, "ann sees rex's coder sessions too (same workspace)")

        const session = sessions[0]!
        const decisions = yield* ok(client, "list_session_decisions", { session_id: session.id, order: "newest" })
        assert.deepStrictEqual(decisions, yield* rest(ann, `/v1/sessions/${session.id}/decisions?order=newest`))
        const timeline = yield* walk(client, "list_session_decisions", { session_id: session.id, limit: 4 })
        assert.strictEqual(timeline.pages, 2)
        assert.deepStrictEqual(
          timeline.items.map((d) => d.ledger_id),
          rows.filter((r) => r.session_id === session.id).map((r) => r.capture.ledger_id),
          "oldest first by default: the session in the order it happened"
        )

        assert.include(yield* refused(client, "list_agent_sessions", { agent_id: "nobody" }), "not found")
        assert.include(yield* refused(client, "list_agent_sessions", {}), "agent_id")
        assert.include(yield* refused(client, "list_session_decisions", { session_id: "12" }), "UUID")
        assert.include(yield* refused(client, "list_session_decisions", { session_id: Crypto.randomUUID() }), "not found")
      }))

    it.effect("get_decision: the full audit trail (the REST body); unknown ids refused", () =>
      Effect.gen(function*() {
        const { ann, rows } = yield* Fixture
        const client = yield* clientOf(ann)
        const row = rows.find((r) => r.derivation.logic_trace.length > 2 && r.capture.tenant_id === ann.principal.tenant_id)!
        const decision = yield* ok(client, "get_decision", { ledger_id: row.capture.ledger_id })
        assert.deepStrictEqual(decision, yield* rest(ann, `/v1/sessions/${row.session_id}/decisions/${row.capture.ledger_id}`))
        assert.strictEqual(decision.logic_trace.length, row.derivation.logic_trace.length)
        assert.isNull(decision.integrity, "a seeded row is not chained")
        const text = textOf(yield* callTool(client, "get_decision", { ledger_id: row.capture.ledger_id }))
        assert.include(text, row.derivation.title)
        assert.include(text, "Logic trace")
        assert.include(text, "not chained yet")
        assert.include(yield* refused(client, "get_decision", { ledger_id: Crypto.randomUUID() }), "not found")
        assert.include(yield* refused(client, "get_decision", { ledger_id: "not-a-uuid" }), "ledger_id")
        assert.include(yield* refused(client, "get_decision", {}), "ledger_id")
      }))

    it.effect("get_decision: a built decision's integrity (the REST body) links it to the one before", () =>
      Effect.gen(function*() {
        const { stack } = yield* Fixture
        // a workspace of its own, so its chain starts at 1 whatever else the suite stores
        const ivy = yield* memberOf(stack, "initech", "ivy@initech.test", "member")
        const now = Date.now()
        for (const i of [0, 1]) {
          yield* buildDecisions(stack, [makeCapture({ scope: ivy.scope, agent_id: "auditor", at: now - (2 - i) * MINUTE, ask: `check ${i}` })])
        }
        const client = yield* clientOf(ivy)
        const listed: Array<any> = (yield* ok(client, "list_decisions", { order: "oldest" })).data
        const decisions = yield* Effect.forEach(listed, (d) => ok(client, "get_decision", { ledger_id: d.ledger_id }))
        for (const [i, decision] of decisions.entries()) {
          assert.deepStrictEqual(decision, yield* rest(ivy, `/v1/sessions/${listed[i].session_id}/decisions/${listed[i].ledger_id}`))
          assert.strictEqual(decision.integrity.seq, i + 1)
          assert.match(decision.integrity.hash, /^[0-9a-f]{64}$/)
          assert.match(decision.integrity.prev_hash, /^[0-9a-f]{64}$/)
        }
        const [first, second] = decisions.map((decision) => decision.integrity)
        assert.strictEqual(second.prev_hash, first.hash)
        const text = textOf(yield* callTool(client, "get_decision", { ledger_id: listed[1].ledger_id }))
        assert.include(text, `chain seq 2, hash ${second.hash}, prev_hash ${first.hash}`)
      }))

    it.effect("list_decisions: every filter, every order, pages; bad filters refused with what is allowed", () =>
      Effect.gen(function*() {
        const { ann, rows } = yield* Fixture
        const client = yield* clientOf(ann)
        const mine = visibleTo(ann, rows)
        const all = yield* walk(client, "list_decisions", { limit: 7 })
        assert.strictEqual(all.items.length, mine.length)
        assert.deepStrictEqual(yield* ok(client, "list_decisions", { limit: 5 }), yield* rest(ann, "/v1/decisions?limit=5"))

        const errors = yield* walk(client, "list_decisions", { outcomes: ["error"] })
        assert.strictEqual(errors.items.length, mine.filter((r) => r.derivation.outcome === "error").length)
        assert.isAbove(errors.items.length, 0)
        const intents = [...new Set(mine.map((r) => r.derivation.intent))].slice(0, 2)
        const byIntent = yield* walk(client, "list_decisions", { intents })
        assert.strictEqual(byIntent.items.length, mine.filter((r) => intents.includes(r.derivation.intent)).length)
        const costly = yield* walk(client, "list_decisions", { min_cost_usd: 0.001, max_cost_usd: 10 })
        assert.isTrue(costly.items.every((d) => d.cost_usd >= 0.001 && d.cost_usd <= 10))
        const quality = yield* walk(client, "list_decisions", { min_quality: 0.5, max_quality: 1 })
        assert.isTrue(quality.items.every((d) => d.quality >= 0.5))
        const planner = yield* walk(client, "list_decisions", { agent_id: "planner", model: mine[0]!.capture.model })
        assert.isTrue(planner.items.every((d) => d.agent_id === "planner" && d.model === mine[0]!.capture.model))
        const session = yield* walk(client, "list_decisions", { session_id: mine[0]!.session_id })
        assert.strictEqual(session.items.length, 6)
        const times = mine.map((r) => r.capture.started_at).sort((a, b) => a - b)
        const since = new Date(times[10]!).toISOString()
        const until = new Date(times[20]!).toISOString()
        const range = yield* walk(client, "list_decisions", { since, until })
        assert.strictEqual(range.items.length, 10)

        const oldest = yield* ok(client, "list_decisions", { order: "oldest", limit: 3 })
        assert.deepStrictEqual(oldest.data.map((d: any) => d.created_at), [...oldest.data.map((d: any) => d.created_at)].sort())
        const byCost = yield* walk(client, "list_decisions", { order: "cost", limit: 9 })
        const costs = byCost.items.map((d) => d.cost_usd).filter((c) => c !== null)
        assert.deepStrictEqual(costs, [...costs].sort((a, b) => b - a))
        const byQuality = yield* ok(client, "list_decisions", { order: "quality" })
        const qualities = byQuality.data.map((d: any) => d.quality)
        assert.deepStrictEqual(qualities, [...qualities].sort((a, b) => a - b))

        const badOutcome = yield* refused(client, "list_decisions", { outcomes: ["broken"] })
        assert.include(badOutcome, "outcomes")
        assert.include(badOutcome, "\"error\"", "lists the allowed outcomes")
        assert.include(yield* refused(client, "list_decisions", { min_quality: 2 }), "min_quality")
        assert.include(yield* refused(client, "list_decisions", { min_cost_usd: -1 }), "min_cost_usd")
        assert.include(yield* refused(client, "list_decisions", { since: "last week" }), "since")
        assert.include(yield* refused(client, "list_decisions", { order: "random" }), "order")
        // a cursor is bound to its parameters
        const first = yield* ok(client, "list_decisions", { limit: 2, order: "cost" })
        assert.include(yield* refused(client, "list_decisions", { limit: 2, order: "newest", cursor: first.next_cursor }), "cursor")
      }))

    it.effect("render_ui: every view loads its data with a text fallback; wrong parameters refused per view", () =>
      Effect.gen(function*() {
        const { ann, rows, sessions } = yield* Fixture
        const client = yield* clientOf(ann)
        const row = visibleTo(ann, rows)[0]!
        const cases: ReadonlyArray<[Record<string, unknown>, (data: any) => void]> = [
          [{ view: "agents" }, (data) => assert.sameMembers(data.agents.map((a: any) => a.agent_id), ["coder", "planner", "reviewer"])],
          [{ view: "agent", agent_id: "coder" }, (data) => {
            assert.strictEqual(data.agent.agent_id, "coder")
            assert.strictEqual(data.sessions.length, 4)
            assert.isAbove(data.activity.buckets.length, 0)
          }],
          [{ view: "session", session_id: sessions[0]!.id }, (data) => {
            assert.strictEqual(data.session.session_id, sessions[0]!.id)
            assert.isString(data.session.health.status)
            assert.strictEqual(data.timeline.length, 6)
          }],
          [{ view: "decision", ledger_id: row.capture.ledger_id }, (data) => assert.strictEqual(data.decision.ledger_id, row.capture.ledger_id)],
          [{ view: "decisions", outcomes: ["error"], order: "cost" }, (data) => assert.isTrue(data.data.every((d: any) => d.outcome === "error"))]
        ]
        for (const [args, check] of cases) {
          const result = yield* callTool(client, "render_ui", args)
          assert.notStrictEqual(result.isError, true, textOf(result))
          const content = result.structuredContent as any
          assert.strictEqual(content.view, args.view)
          assert.isString(content.title)
          assert.isString(content.view_title)
          check(content.data)
          assert.isAbove(textOf(result).length, 20, `${args.view} has a readable text fallback`)
        }
        assert.include(yield* refused(client, "render_ui", { view: "agent" }), "agent_id")
        assert.include(yield* refused(client, "render_ui", { view: "session", session_id: Crypto.randomUUID() }), "not found")
        assert.include(yield* refused(client, "render_ui", { view: "agents", ledger_id: row.capture.ledger_id }), "ledger_id")
        assert.include(yield* refused(client, "render_ui", { view: "pie" }), "view")
        assert.include(yield* refused(client, "render_ui", {}), "view")
      }))

    it.effect("another tenant sees nothing of acme; a restricted member sees only their own decisions", () =>
      Effect.gen(function*() {
        const { ann, bob, rex, rows, sessions } = yield* Fixture
        const bobClient = yield* clientOf(bob)
        const acmeRow = visibleTo(ann, rows)[0]!
        const acmeSession = sessions.find((s) => s.owner === ann && s.agent === "reviewer")!
        assert.deepStrictEqual((yield* ok(bobClient, "list_agents")).data.map((a: any) => a.agent_id), ["planner"])
        const bobAll = yield* walk(bobClient, "list_decisions", {})
        assert.strictEqual(bobAll.items.length, visibleTo(bob, rows).length)
        assert.isTrue(bobAll.items.every((d) => visibleTo(bob, rows).some((r) => r.capture.ledger_id === d.ledger_id)))
        // acme's ids look exactly like ids that do not exist
        const probes: ReadonlyArray<[string, Record<string, unknown>]> = [
          ["get_decision", { ledger_id: acmeRow.capture.ledger_id }],
          ["list_session_decisions", { session_id: acmeSession.id }],
          ["list_agent_sessions", { agent_id: "reviewer" }],
          ["render_ui", { view: "session", session_id: acmeSession.id }],
          ["render_ui", { view: "decision", ledger_id: acmeRow.capture.ledger_id }],
          ["render_ui", { view: "agent", agent_id: "reviewer" }]
        ]
        for (const [tool, args] of probes) {
          const text = yield* refused(bobClient, tool, args)
          assert.include(text, "not found", `${tool} ${JSON.stringify(args)}`)
          assert.notInclude(text, "acme")
        }
        assert.deepStrictEqual((yield* ok(bobClient, "list_decisions", { session_id: acmeSession.id })).data, [])
        assert.deepStrictEqual((yield* ok(bobClient, "list_decisions", { agent_id: "reviewer" })).data, [])
        const bobPlanner = yield* ok(bobClient, "list_agent_sessions", { agent_id: "planner" })
        assert.deepStrictEqual(bobPlanner.data.map((s: any) => s.session_id), sessions.filter((s) => s.owner === bob).map((s) => s.id))

        const rexClient = yield* clientOf(rex)
        const rexAll = yield* walk(rexClient, "list_decisions", {})
        assert.sameMembers(rexAll.items.map((d) => d.ledger_id), visibleTo(rex, rows).map((r) => r.capture.ledger_id))
        assert.deepStrictEqual((yield* ok(rexClient, "list_agents")).data.map((a: any) => a.agent_id), ["coder"])
        assert.include(yield* refused(rexClient, "get_decision", { ledger_id: acmeRow.capture.ledger_id }), "not found")
      }))

    it.effect("logging/setLevel is remembered per credential and filters the server's log notifications", () =>
      Effect.gen(function*() {
        const { ann } = yield* Fixture
        const client = yield* clientOf(ann)
        const messages: Array<any> = []
        client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
          messages.push(notification.params)
        })
        yield* Effect.promise(() => client.setLoggingLevel("debug"))
        yield* ok(client, "list_agents")
        assert.strictEqual(messages.length, 1)
        assert.deepInclude(messages[0], { level: "debug", logger: "ledger" })
        assert.strictEqual(messages[0].data.tool, "list_agents")
        yield* Effect.promise(() => client.setLoggingLevel("warning"))
        yield* ok(client, "list_agents")
        assert.strictEqual(messages.length, 1, "debug messages are filtered out at warning")
      }))

    it.effect("HTTP edges: 401 challenges, wrong-kind tokens, DNS rebinding, methods, resource metadata", () =>
      Effect.gen(function*() {
        const { stack } = yield* Fixture
        const url = `${stack.baseUrl}/mcp`
        const initialize = JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "probe", version: "1" } }
        })
        // undici's request, not fetch: fetch may not set Host
        const post = (headers: Record<string, string>) =>
          Effect.promise(async () => {
            const response = await request(url, {
              method: "POST",
              headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
              body: initialize
            })
            const text = await response.body.text()
            return { status: response.statusCode, header: (name: string) => response.headers[name] as string | undefined, text }
          })
        const metadataUrl = `${stack.baseUrl}/.well-known/oauth-protected-resource/mcp`

        const anonymous = yield* post({})
        assert.strictEqual(anonymous.status, 401)
        assert.strictEqual(anonymous.header("www-authenticate"), `Bearer resource_metadata="${metadataUrl}", scope="ledger:read"`)
        assert.deepInclude(JSON.parse(anonymous.text), { jsonrpc: "2.0", id: null })
        for (const token of ["ldg_pat_" + "x".repeat(43), stack.gatewayKey, "ldg_oat_" + "y".repeat(43)]) {
          const bad = yield* post({ authorization: `Bearer ${token}` })
          assert.strictEqual(bad.status, 401)
          const challenge = bad.header("www-authenticate")!
          assert.include(challenge, `resource_metadata="${metadataUrl}"`)
          assert.include(challenge, "error=\"invalid_token\"")
        }
        const evil = yield* post({ authorization: `Bearer ${stack.pat}`, host: "evil.example.com" })
        assert.strictEqual(evil.status, 403)
        const evilOrigin = yield* post({ authorization: `Bearer ${stack.pat}`, origin: "http://evil.example.com" })
        assert.strictEqual(evilOrigin.status, 403)
        const good = yield* post({ authorization: `Bearer ${stack.pat}`, origin: "http://localhost:6274" })
        assert.strictEqual(good.status, 200)
        assert.strictEqual(good.header("access-control-allow-origin"), "http://localhost:6274")
        assert.include(good.text, "agent-decision-ledger")

        const get = yield* Effect.promise(() => fetch(url, { headers: { authorization: `Bearer ${stack.pat}`, accept: "text/event-stream" } }))
        assert.strictEqual(get.status, 405)
        const remove = yield* Effect.promise(() => fetch(url, { method: "DELETE", headers: { authorization: `Bearer ${stack.pat}` } }))
        assert.strictEqual(remove.status, 405)

        for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
          const metadata = yield* Effect.promise(async () => (await fetch(`${stack.baseUrl}${path}`)).json())
          assert.deepInclude(metadata, {
            resource: `${stack.baseUrl}/mcp`,
            authorization_servers: [stack.baseUrl],
            scopes_supported: ["ledger:read"]
          })
        }
        const server = yield* Effect.promise(async () => (await fetch(`${stack.baseUrl}/.well-known/oauth-authorization-server`)).json())
        assert.deepInclude(server, { issuer: stack.baseUrl, registration_endpoint: `${stack.baseUrl}/oauth/register` })
        assert.deepStrictEqual(server.code_challenge_methods_supported, ["S256"])
      }))
  })

  layer(ApiStack.layer({ backend: "pglite" }), { timeout: 120_000, excludeTestServices: true })("embedded PGlite", (it) => {
    it.effect("tools, the App and an OAuth grant work on the embedded database", () =>
      Effect.gen(function*() {
        const stack = yield* ApiStack
        const scope = { ...stack.principal, key_id: Crypto.randomUUID() }
        const session = Crypto.randomUUID()
        yield* insertDecisions(TEMPLATES.slice(0, 3).map((template, i) =>
          seedDecision(makeCapture({ scope, agent_id: "solo", at: Date.now() - (3 - i) * MINUTE, template }), session)
        )).pipe(Effect.provide(stack.context), Effect.orDie)
        const client = yield* mcpClient(stack.baseUrl, { token: stack.pat })
        const agents = yield* ok(client, "list_agents")
        assert.deepStrictEqual(agents.data.map((a: any) => a.agent_id), ["solo"])
        assert.strictEqual((yield* ok(client, "render_ui", { view: "session", session_id: session })).data.timeline.length, 3)
        const { tokens } = yield* Effect.promise(() =>
          grantByForms(stack.baseUrl, { pat: stack.pat, workspaceId: stack.principal.workspace_id, redirect: "http://127.0.0.1:9/cb" })
        )
        const viaOAuth = yield* mcpClient(stack.baseUrl, { token: tokens.access_token })
        assert.deepStrictEqual(yield* ok(viaOAuth, "list_agents"), agents)
      }))

    // last in this stack: it spends the registrations this address may make for a minute
    it.effect("client registration is limited per address: 30 a minute, then 429 with Retry-After", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const attempt = () =>
          fetch(`${baseUrl}/oauth/register`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ client_name: "flood", redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" })
          }).then(async (response) => ({ status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() as any }))
        const answers = yield* Effect.promise(async () => {
          const seen = []
          for (let i = 0; i < 40; i++) {
            const answer = await attempt()
            seen.push(answer)
            if (answer.status === 429) break
          }
          return seen
        })
        const refused = answers.at(-1)!
        assert.strictEqual(refused.status, 429)
        // the grant above registered once: 29 more at most before the limit
        assert.isAtMost(answers.length - 1, 29)
        assert.isAtLeast(answers.length - 1, 28)
        assert.isTrue(answers.slice(0, -1).every((answer) => answer.status === 201))
        assert.strictEqual(refused.body.error, "rate_limited")
        assert.include(refused.body.error_description, "30 client registrations a minute")
        assert.isAtLeast(Number(refused.retryAfter), 1)
        assert.isAtMost(Number(refused.retryAfter), 2)
      }))
  })
})
