/**
 * The REST read API over HTTP against real PostgreSQL: every endpoint, pagination while decisions arrive, every
 * error status with its JSON body, cross-tenant probes, the access log, and the OpenAPI document — which must
 * validate, and which every response body the tests receive is checked against.
 */
import SwaggerParser from "@apidevtools/swagger-parser"
import { assert, describe, it, layer } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormats from "ajv-formats"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import * as Crypto from "node:crypto"
import { Credentials } from "../../src/auth/Credentials.ts"
import * as fixtures from "../fixtures/captures/index.ts"
import { ApiStack, type ApiStackInfo, apiStack } from "../support/api-stack.ts"
import { ADMIN_URL } from "../support/db.ts"
import { buildDecisions, type Member, memberOf, MINUTE, seedTwoTenantLedger, withStack } from "../support/ledger-fixture.ts"
import { insertDecisions, makeCapture, type SeedDecision, seedDecision } from "../support/seed.ts"

// ---------------------------------------------------------------------------------------------------------
// The OpenAPI document, and every response checked against it

interface Spec {
  readonly document: Record<string, any>
  /** validates a body against the response schema of the matched operation and status; returns the errors */
  check(method: string, path: string, status: number, body: unknown): string | undefined
}

const loadSpec = (baseUrl: string) =>
  Effect.promise(async (): Promise<Spec> => {
    const document = await (await fetch(`${baseUrl}/v1/openapi.json`)).json()
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats.default(ajv)
    ajv.addSchema({ $id: "openapi", components: document.components })
    const routes = Object.keys(document.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`)
    }))
    const validators = new Map<string, ReturnType<typeof ajv.compile>>()
    return {
      document,
      check(method, path, status, body) {
        const route = routes.find((r) => r.pattern.test(path.split("?")[0]!))
        if (route === undefined) return `no operation documented for ${path}`
        const response = document.paths[route.template][method.toLowerCase()]?.responses?.[String(status)]
        const schema = response?.content?.["application/json"]?.schema
        if (schema === undefined) return `status ${status} is not documented for ${method} ${route.template}`
        const key = `${method} ${route.template} ${status}`
        let validate = validators.get(key)
        if (validate === undefined) {
          const rewritten = JSON.parse(JSON.stringify(schema).replaceAll("\"#/components/", "\"openapi#/components/"))
          validate = ajv.compile(rewritten)
          validators.set(key, validate)
        }
        return validate(body) ? undefined : ajv.errorsText(validate.errors)
      }
    }
  })

// ---------------------------------------------------------------------------------------------------------
// The seeded ledger


class Fixture extends Context.Service<Fixture, {
  readonly stack: ApiStackInfo
  readonly spec: Spec
  readonly ann: Member
  readonly rex: Member
  readonly bob: Member
  readonly rows: Array<SeedDecision>
  readonly sessions: ReadonlyArray<{ readonly id: string; readonly agent: string; readonly owner: Member }>
  readonly seed: (rows: ReadonlyArray<SeedDecision>) => Effect.Effect<number>
}>()("test/rest/Fixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const stack = yield* ApiStack
    const spec = yield* loadSpec(stack.baseUrl)
    const { ann, rex, bob, sessions, rows } = yield* seedTwoTenantLedger(stack)
    const seed = (more: ReadonlyArray<SeedDecision>) => withStack(stack)(insertDecisions(more))
    return { stack, spec, ann, rex, bob, rows, sessions, seed }
  })
).pipe(Layer.provideMerge(ApiStack.layer()))

// ---------------------------------------------------------------------------------------------------------
// HTTP

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

/** GET with a bearer token (or none); the JSON body must match what the OpenAPI document says for the status. */
const get = (path: string, token: string | null) =>
  Effect.gen(function*() {
    const { stack, spec } = yield* Fixture
    const reply = yield* Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(`${stack.baseUrl}${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } })
      return { status: response.status, headers: response.headers, body: await response.json() }
    })
    const problem = spec.check("GET", path, reply.status, reply.body)
    assert.isUndefined(problem, `${path} → ${reply.status}: ${problem} ${JSON.stringify(reply.body).slice(0, 300)}`)
    return reply
  })

const as = (who: Member) => (path: string) => get(path, who.pat)

const expectError = (reply: Reply, status: number, code: string) => {
  assert.strictEqual(reply.status, status, JSON.stringify(reply.body))
  assert.strictEqual(reply.body.error.code, code)
  assert.isString(reply.body.error.message)
  assert.strictEqual(reply.headers.get("content-type"), "application/json")
}

/** Every item of a list, page by page; `between` runs after each page. */
const walk = (request: (path: string) => Effect.Effect<Reply, never, Fixture>, path: string, between: Effect.Effect<unknown, never, Fixture> = Effect.void) =>
  Effect.gen(function*() {
    const items: Array<any> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const separator = path.includes("?") ? "&" : "?"
      const reply: Reply = yield* request(cursor === null ? path : `${path}${separator}cursor=${encodeURIComponent(cursor)}`)
      assert.strictEqual(reply.status, 200, JSON.stringify(reply.body))
      items.push(...reply.body.data)
      cursor = reply.body.next_cursor
      pages++
      yield* between
    } while (cursor !== null)
    return { items, pages }
  })

const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)

describe("REST /v1", () => {
  layer(FixtureLive, { timeout: 120_000, excludeTestServices: true })("read API on postgres", (it) => {
    it.effect("the OpenAPI document is valid and documents every endpoint, parameter and error", () =>
      Effect.gen(function*() {
        const { spec } = yield* Fixture
        const document = structuredClone(spec.document)
        yield* Effect.promise(() => SwaggerParser.validate(document as any))
        assert.strictEqual(spec.document.openapi.slice(0, 3), "3.1")
        assert.includeMembers(Object.keys(spec.document.paths), [
          "/v1/agents",
          "/v1/agents/{agent_id}/sessions",
          "/v1/sessions/{session_id}",
          "/v1/sessions/{session_id}/decisions",
          "/v1/sessions/{session_id}/decisions/{ledger_id}",
          "/v1/decisions"
        ])
        const listAgents = spec.document.paths["/v1/agents"].get
        assert.includeMembers(listAgents.parameters.map((p: any) => p.name), ["limit", "cursor", "order", "active_since", "active_until"])
        const limit = listAgents.parameters.find((p: any) => p.name === "limit")
        assert.deepInclude(limit.schema, { minimum: 1, maximum: 100 })
        for (const [path, item] of Object.entries<any>(spec.document.paths)) {
          assert.includeMembers(Object.keys(item.get.responses), ["200", "400", "401", "503"], path)
          assert.property(item.get.responses["401"].headers, "WWW-Authenticate")
          assert.deepStrictEqual(item.get.security, [{ pat: [] }])
        }
        assert.strictEqual(spec.document.components.securitySchemes.pat.scheme, "Bearer")
      }))

    it.effect("GET /v1/agents: rollups and orders; restricted and other tenants see only their own", () =>
      Effect.gen(function*() {
        const { ann, rex, bob, rows } = yield* Fixture
        const acme = rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id)
        const reply = yield* as(ann)("/v1/agents")
        assert.deepStrictEqual(reply.body.data.map((a: any) => a.agent_id), ["coder", "planner", "reviewer"])
        for (const agent of reply.body.data) {
          const mine = acme.filter((row) => row.capture.agent_id === agent.agent_id)
          assert.strictEqual(agent.decision_count, mine.length)
          assert.strictEqual(agent.session_count, new Set(mine.map((row) => row.session_id)).size)
          assert.closeTo(agent.total_cost_usd, sum(mine.map((row) => row.derivation.cost.total_usd ?? 0)), 1e-9)
          assert.strictEqual(agent.agent_name, `${agent.agent_id} agent`)
          assert.match(agent.first_seen_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        }
        const byCost = (yield* as(ann)("/v1/agents?order=cost")).body.data.map((a: any) => a.total_cost_usd)
        assert.deepStrictEqual(byCost, [...byCost].sort((a, b) => b - a))
        const since = encodeURIComponent(new Date(Date.now() - 2 * 90 * MINUTE).toISOString())
        assert.deepStrictEqual((yield* as(ann)(`/v1/agents?active_since=${since}`)).body.data.map((a: any) => a.agent_id), ["coder", "planner"])

        const restricted = (yield* as(rex)("/v1/agents")).body.data
        assert.deepStrictEqual(restricted.map((a: any) => [a.agent_id, a.decision_count, a.session_count]), [["coder", 12, 2]])
        assert.deepStrictEqual((yield* as(bob)("/v1/agents")).body.data.map((a: any) => [a.agent_id, a.decision_count]), [["planner", 6]])
      }))

    it.effect("GET /v1/agents/{agent_id}/sessions: sessions with stats; other tenants' agents are 404", () =>
      Effect.gen(function*() {
        const { ann, rex, bob, sessions } = yield* Fixture
        const reply = yield* as(ann)("/v1/agents/coder/sessions")
        const expected = sessions.filter((s) => s.agent === "coder" && s.owner !== bob)
        assert.deepStrictEqual(reply.body.data.map((s: any) => s.session_id).sort(), expected.map((s) => s.id).sort())
        assert.isTrue(reply.body.data.every((s: any) => s.decision_count === 6 && s.agent_id === "coder" && s.summary.length > 0))
        const ends = reply.body.data.map((s: any) => s.ended_at)
        assert.deepStrictEqual(ends, [...ends].sort().reverse(), "latest activity first")

        const mine = (yield* as(rex)("/v1/agents/coder/sessions")).body.data.map((s: any) => s.session_id).sort()
        assert.deepStrictEqual(mine, sessions.filter((s) => s.owner === rex).map((s) => s.id).sort())
        expectError(yield* as(rex)("/v1/agents/planner/sessions"), 404, "not_found")
        expectError(yield* as(bob)("/v1/agents/coder/sessions"), 404, "not_found")
        expectError(yield* as(ann)("/v1/agents/ghost/sessions"), 404, "not_found")
      }))

    it.effect("GET /v1/sessions/{session_id}: stats, mix, latest decisions, health; invisible sessions are 404", () =>
      Effect.gen(function*() {
        const { ann, rex, bob, sessions, rows } = yield* Fixture
        const session = sessions[0]!
        const reply = yield* as(ann)(`/v1/sessions/${session.id}`)
        const body = reply.body
        const mine = rows.filter((row) => row.session_id === session.id)
        assert.strictEqual(body.session_id, session.id)
        assert.strictEqual(body.decision_count, 6)
        assert.strictEqual(body.decisions.length, 6)
        assert.strictEqual(sum(Object.values<number>(body.outcomes)), 6)
        assert.strictEqual(sum(Object.values<number>(body.intents)), 6)
        assert.strictEqual(body.outcomes.error ?? 0, mine.filter((row) => row.derivation.outcome === "error").length)
        assert.oneOf(body.health.status, ["healthy", "degraded", "failing", "idle"])
        assert.isAbove(body.health.reasons.length, 0)
        assert.strictEqual(body.health.last_activity_at, body.ended_at)

        expectError(yield* as(bob)(`/v1/sessions/${session.id}`), 404, "not_found")
        expectError(yield* as(rex)(`/v1/sessions/${session.id}`), 404, "not_found")
        expectError(yield* as(ann)(`/v1/sessions/${Crypto.randomUUID()}`), 404, "not_found")
        expectError(yield* as(ann)("/v1/sessions/not-a-uuid"), 400, "invalid_parameter")
        // another tenant's id is answered exactly like an id that does not exist
        const bobs = sessions.find((s) => s.owner === bob)!
        const unknownId = Crypto.randomUUID()
        assert.deepStrictEqual((yield* as(ann)(`/v1/sessions/${bobs.id}`)).body, { error: { code: "not_found", message: `session ${bobs.id} not found` } })
        assert.deepStrictEqual((yield* as(ann)(`/v1/sessions/${unknownId}`)).body, { error: { code: "not_found", message: `session ${unknownId} not found` } })
      }))

    it.effect("GET /v1/sessions/{session_id}/decisions[/{ledger_id}]: list with filters, full audit trail, 404s", () =>
      Effect.gen(function*() {
        const { ann, rex, bob, sessions, rows } = yield* Fixture
        const session = sessions[1]!
        const mine = rows.filter((row) => row.session_id === session.id)
        const list = (yield* as(ann)(`/v1/sessions/${session.id}/decisions`)).body
        assert.deepStrictEqual(list.data.map((d: any) => d.ledger_id), mine.map((row) => row.capture.ledger_id).reverse())
        const oldest = (yield* as(ann)(`/v1/sessions/${session.id}/decisions?order=oldest&limit=2`)).body
        assert.deepStrictEqual(oldest.data.map((d: any) => d.ledger_id), mine.slice(0, 2).map((row) => row.capture.ledger_id))
        assert.isString(oldest.next_cursor)
        const outcome = mine[0]!.derivation.outcome
        const filtered = (yield* as(ann)(`/v1/sessions/${session.id}/decisions?outcomes=${outcome}`)).body
        assert.deepStrictEqual(filtered.data.map((d: any) => d.ledger_id).sort(), mine.filter((r) => r.derivation.outcome === outcome).map((r) => r.capture.ledger_id).sort())

        const target = mine[2]!
        const decision = (yield* as(ann)(`/v1/sessions/${session.id}/decisions/${target.capture.ledger_id}`)).body
        assert.strictEqual(decision.ledger_id, target.capture.ledger_id)
        assert.deepStrictEqual(decision.logic_trace, target.derivation.logic_trace)
        assert.deepStrictEqual(decision.evidence, target.derivation.evidence)
        assert.deepStrictEqual(decision.findings, target.derivation.findings)
        assert.deepStrictEqual(decision.artifacts, target.derivation.artifacts)
        assert.deepStrictEqual(decision.cost, target.derivation.cost)
        assert.strictEqual(decision.quality, target.derivation.quality.value)
        assert.deepStrictEqual(decision.usage, target.capture.usage)

        const other = sessions[2]!.id
        expectError(yield* as(ann)(`/v1/sessions/${other}/decisions/${target.capture.ledger_id}`), 404, "not_found")
        expectError(yield* as(bob)(`/v1/sessions/${session.id}/decisions/${target.capture.ledger_id}`), 404, "not_found")
        expectError(yield* as(rex)(`/v1/sessions/${session.id}/decisions/${target.capture.ledger_id}`), 404, "not_found")
        expectError(yield* as(bob)(`/v1/sessions/${session.id}/decisions`), 404, "not_found")
        expectError(yield* as(ann)(`/v1/sessions/${session.id}/decisions/${Crypto.randomUUID()}`), 404, "not_found")
        expectError(yield* as(ann)(`/v1/sessions/${session.id}/decisions/xyz`), 400, "invalid_parameter")
      }))

    it.effect("GET /v1/sessions/{session_id}/decisions/{ledger_id}: integrity links a built decision to the one before; null until chained", () =>
      Effect.gen(function*() {
        const { stack, ann, rows } = yield* Fixture
        // a workspace of its own, so its chain starts at 1 whatever else the suite stores
        const ivy = yield* memberOf(stack, "initech", "ivy@initech.test", "member")
        const now = Date.now()
        // one batch each: the chain's head carries over from one transaction to the next
        for (const i of [0, 1]) {
          yield* buildDecisions(stack, [makeCapture({ scope: ivy.scope, agent_id: "auditor", at: now - (2 - i) * MINUTE, ask: `check ${i}` })])
        }
        const listed = (yield* as(ivy)("/v1/decisions?order=oldest")).body.data
        const [first, second] = yield* Effect.forEach(listed, (d: any) =>
          Effect.map(as(ivy)(`/v1/sessions/${d.session_id}/decisions/${d.ledger_id}`), (reply) => reply.body.integrity))
        assert.deepStrictEqual([first.seq, second.seq], [1, 2])
        for (const link of [first, second]) {
          assert.match(link.hash, /^[0-9a-f]{64}$/)
          assert.match(link.prev_hash, /^[0-9a-f]{64}$/)
          assert.isNumber(link.chain_key)
          assert.strictEqual(new Date(link.recorded_at).toISOString(), link.recorded_at)
        }
        assert.strictEqual(first.prev_hash, "0".repeat(64), "the first decision of a chain follows the zero hash")
        assert.strictEqual(second.prev_hash, first.hash)
        assert.isAtMost(Date.parse(first.recorded_at), Date.parse(second.recorded_at))

        const seeded = rows.find((row) => row.capture.tenant_id === ann.principal.tenant_id)!
        const unchained = (yield* as(ann)(`/v1/sessions/${seeded.session_id}/decisions/${seeded.capture.ledger_id}`)).body
        assert.isNull(unchained.integrity, "a row inserted past the builder is not chained")
      }))

    it.effect("GET /v1/decisions: filters and orders over the whole workspace; nothing of other tenants", () =>
      Effect.gen(function*() {
        const { ann, bob, rows } = yield* Fixture
        const acme = rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id)
        const ids = (body: any) => body.data.map((d: any) => d.ledger_id).sort()
        const expected = (keep: (row: SeedDecision) => boolean) => acme.filter(keep).map((row) => row.capture.ledger_id).sort()

        assert.deepStrictEqual(ids((yield* as(ann)("/v1/decisions?limit=100")).body), expected(() => true))
        assert.deepStrictEqual(ids((yield* as(ann)("/v1/decisions?limit=100&outcomes=error&outcomes=refusal")).body), expected((r) => ["error", "refusal"].includes(r.derivation.outcome)))
        assert.deepStrictEqual(ids((yield* as(ann)("/v1/decisions?limit=100&intents=tool_use")).body), expected((r) => r.derivation.intent === "tool_use"))
        assert.deepStrictEqual(ids((yield* as(ann)("/v1/decisions?limit=100&agent_id=reviewer&model=gpt-4.1")).body), expected((r) => r.capture.agent_id === "reviewer" && r.capture.model === "gpt-4.1"))
        assert.deepStrictEqual(ids((yield* as(ann)("/v1/decisions?limit=100&min_cost_usd=0.005&max_quality=0.95")).body), expected((r) => (r.derivation.cost.total_usd ?? -1) >= 0.005 && r.derivation.quality.value <= 0.95))
        const costs = (yield* as(ann)("/v1/decisions?limit=100&order=cost")).body.data.map((d: any) => d.cost_usd ?? -1)
        assert.deepStrictEqual(costs, [...costs].sort((a: number, b: number) => b - a))
        const qualities = (yield* as(ann)("/v1/decisions?limit=100&order=quality")).body.data.map((d: any) => d.quality)
        assert.deepStrictEqual(qualities, [...qualities].sort((a: number, b: number) => a - b))
        assert.strictEqual((yield* as(bob)("/v1/decisions?limit=100")).body.data.length, 6)
        const bobSession = rows.find((row) => row.capture.tenant_id === bob.principal.tenant_id)!.session_id
        assert.deepStrictEqual((yield* as(ann)(`/v1/decisions?session_id=${bobSession}`)).body.data, [], "a probe by filter finds nothing")
      }))

    it.effect("pages while decisions arrive: no repeats, nothing skipped; cursors are tamper-evident and bound", () =>
      Effect.gen(function*() {
        const { ann, bob, rows, seed, sessions } = yield* Fixture
        const acme = new Set(rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id).map((row) => row.capture.ledger_id))
        let arrivals = 0
        // between pages: a burst of new decisions lands (newer than everything; some in an existing session)
        const arrive = Effect.suspend(() =>
          seed(Array.from({ length: 3 }, (_, i) =>
            seedDecision(
              makeCapture({ scope: ann.scope, agent_id: "coder", at: Date.now() + i, template: fixtures.codingAgent(), ask: `late ${arrivals++}` }),
              sessions[2]!.id
            )
          ))
        )
        for (const order of ["newest", "oldest", "cost", "quality"]) {
          const { items, pages } = yield* walk(as(ann), `/v1/decisions?limit=7&order=${order}`, arrive)
          const seen = items.map((d) => d.ledger_id)
          assert.isAbove(pages, 3)
          assert.strictEqual(new Set(seen).size, seen.length, `${order}: no decision twice`)
          for (const id of acme) assert.include(seen, id, `${order}: ${id} listed`)
        }
        const sessionPages = yield* walk(as(ann), `/v1/sessions/${sessions[2]!.id}/decisions?limit=4`, arrive)
        const seenInSession = sessionPages.items.map((d) => d.ledger_id)
        assert.strictEqual(new Set(seenInSession).size, seenInSession.length)
        const agentPages = yield* walk(as(ann), "/v1/agents?limit=1", arrive)
        assert.deepStrictEqual(agentPages.items.map((a) => a.agent_id).sort(), ["coder", "planner", "reviewer"])
        const sessionList = yield* walk(as(ann), "/v1/agents/coder/sessions?limit=1&order=cost")
        assert.strictEqual(sessionList.items.length, 4)

        const first = (yield* as(ann)("/v1/decisions?limit=2&order=cost")).body
        const cursor = encodeURIComponent(first.next_cursor)
        assert.strictEqual((yield* as(ann)(`/v1/decisions?limit=3&order=cost&cursor=${cursor}`)).status, 200)
        expectError(yield* as(ann)(`/v1/decisions?limit=3&order=newest&cursor=${cursor}`), 400, "invalid_parameter")
        expectError(yield* as(ann)(`/v1/decisions?order=cost&agent_id=coder&cursor=${cursor}`), 400, "invalid_parameter")
        expectError(yield* as(bob)(`/v1/decisions?order=cost&cursor=${cursor}`), 400, "invalid_parameter")
        expectError(yield* as(ann)(`/v1/agents?order=cost&cursor=${cursor}`), 400, "invalid_parameter")
        const [version, payload, mac] = String(first.next_cursor).split(".")
        const forged = Buffer.from(JSON.stringify(["1", Crypto.randomUUID()])).toString("base64url")
        expectError(yield* as(ann)(`/v1/decisions?order=cost&cursor=${version}.${forged}.${mac}`), 400, "invalid_parameter")
        expectError(yield* as(ann)(`/v1/decisions?order=cost&cursor=${version}.${payload}.AAAA${mac!.slice(4)}`), 400, "invalid_parameter")
        expectError(yield* as(ann)("/v1/decisions?cursor=garbage"), 400, "invalid_parameter")
        expectError(yield* as(ann)(`/v1/decisions?cursor=${"x".repeat(5000)}`), 400, "invalid_parameter")
      }))

    it.effect("bad input is a 400 with a JSON body on every endpoint, never a 5xx", () =>
      Effect.gen(function*() {
        const { ann, sessions } = yield* Fixture
        const session = sessions[0]!.id
        const bad = [
          "/v1/agents?limit=0",
          "/v1/agents?limit=101",
          "/v1/agents?limit=-5",
          "/v1/agents?limit=1.5",
          "/v1/agents?limit=abc",
          "/v1/agents?limit=1&limit=2",
          "/v1/agents?order=alphabetical",
          "/v1/agents?active_since=yesterday",
          "/v1/agents?active_since=2025-13-45T99:99:99Z",
          "/v1/agents?unknown=1",
          `/v1/agents/${"a".repeat(300)}/sessions`,
          `/v1/agents/${"b".repeat(2000)}/sessions`,
          "/v1/agents/coder/sessions?since=now",
          "/v1/agents/coder/sessions?order=oldest",
          "/v1/sessions/1234",
          "/v1/sessions/' OR 1=1 --",
          `/v1/sessions/${session}/decisions?outcomes=great`,
          `/v1/sessions/${session}/decisions?min_cost_usd=-1`,
          `/v1/sessions/${session}/decisions?min_quality=1.5`,
          `/v1/sessions/${session}/decisions?max_cost_usd=NaN`,
          `/v1/sessions/${session}/decisions?order=best`,
          `/v1/sessions/${session}/decisions/not-a-uuid`,
          "/v1/decisions?session_id=nope",
          "/v1/decisions?intents=dancing",
          "/v1/decisions?until=2025-11-03T09:30:00%2B25:00",
          "/v1/decisions?agent_id=",
          "/v1/decisions?since=%00"
        ]
        for (const path of bad) {
          expectError(yield* as(ann)(path.replaceAll(" ", "%20").replaceAll("'", "%27")), 400, "invalid_parameter")
        }
        // odd but valid input is answered normally: agent ids with URL-special characters round-trip
        const { seed } = yield* Fixture
        for (const agent of ["team/alpha", "a b?c#d&e=f", "ünï-😀", "%41"]) {
          yield* seed([seedDecision(makeCapture({ scope: ann.scope, agent_id: agent, at: Date.now() - 1_000 }), Crypto.randomUUID())])
          const reply = yield* as(ann)(`/v1/agents/${encodeURIComponent(agent)}/sessions`)
          assert.strictEqual(reply.status, 200, agent)
          assert.strictEqual(reply.body.data[0].agent_id, agent)
        }
        assert.strictEqual((yield* as(ann)(`/v1/agents/${encodeURIComponent("' OR 1=1 --")}/sessions`)).status, 404)
        assert.strictEqual((yield* as(ann)(`/v1/decisions?agent_id=${encodeURIComponent("😀\u200b%")}`)).status, 200)
        assert.strictEqual((yield* as(ann)("/v1/decisions?since=2025-11-03&until=2099-01-01T00:00:00.123456789%2B02:00")).status, 200)
        // unknown routes and methods: JSON 404
        const { stack } = yield* Fixture
        const unknown = yield* Effect.promise(() => fetch(`${stack.baseUrl}/v1/nope`, { method: "DELETE" }))
        assert.strictEqual(unknown.status, 404)
        assert.deepStrictEqual(yield* Effect.promise(() => unknown.json()), { error: { code: "not_found", message: "no route for DELETE /v1/nope" } })
      }))

    it.effect("401 for a missing, unknown, revoked, expired or wrong-kind token, with WWW-Authenticate: Bearer", () =>
      Effect.gen(function*() {
        const { stack, ann } = yield* Fixture
        const expectChallenge = (reply: Reply, invalidToken: boolean) => {
          expectError(reply, 401, "unauthorized")
          assert.strictEqual(reply.headers.get("www-authenticate"), invalidToken ? `Bearer realm="ledger", error="invalid_token"` : `Bearer realm="ledger"`)
        }
        expectChallenge(yield* get("/v1/agents", null), false)
        expectChallenge(yield* get("/v1/agents", `ldg_pat_${"A".repeat(43)}`), true)
        expectChallenge(yield* get("/v1/agents", "not-even-a-token"), true)
        expectChallenge(yield* get("/v1/agents", stack.gatewayKey), true)
        // auth comes first: a bad token with bad parameters is still 401
        expectChallenge(yield* get("/v1/sessions/not-a-uuid", "nope"), true)

        const tokens = yield* Effect.provide(
          Effect.gen(function*() {
            const credentials = yield* Credentials
            const expired = yield* credentials.createToken({ email: "ann@acme.test", workspace: "ops", kind: "pat", expiresAt: new Date(Date.now() - 1_000) })
            const revoked = yield* credentials.createToken({ email: "ann@acme.test", workspace: "ops", kind: "pat" })
            return { expired, revoked, credentials }
          }),
          stack.context
        ).pipe(Effect.orDie)
        expectChallenge(yield* get("/v1/agents", tokens.expired.token), true)
        assert.strictEqual((yield* get("/v1/agents", tokens.revoked.token)).status, 200)
        yield* Effect.orDie(tokens.credentials.revoke(tokens.revoked.token_id))
        // the authenticator caches verdicts for 2 s: revocation takes effect within that (promised: < 5 s)
        yield* Effect.sleep("2100 millis")
        expectChallenge(yield* get("/v1/agents", tokens.revoked.token), true)
        assert.strictEqual((yield* as(ann)("/v1/agents")).status, 200)
      }))
  })

  describe("database unavailable", () => {
    /** Refuses new connections to the stack's own database and cuts the open ones (the server keeps running). */
    const setAvailable = (databaseUrl: string, available: boolean) =>
      Effect.gen(function*() {
        const sql = yield* PgClient.PgClient
        const name = new URL(databaseUrl).pathname.slice(1)
        yield* sql.unsafe(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${available}`)
        if (!available) yield* sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name} AND pid <> pg_backend_pid()`
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(ADMIN_URL), maxConnections: 1 })), Effect.orDie)

    it.live("503 with a JSON body while the database is down, 200 again once it is back", () =>
      Effect.gen(function*() {
        const stack = yield* apiStack({ logLevel: "Error" })
        const databaseUrl = Redacted.value(Option.getOrThrow(stack.settings.databaseUrl))
        const call = (path: string, token: string) =>
          Effect.promise(async () => {
            const response = await fetch(`${stack.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } })
            return { status: response.status, body: await response.json() as any }
          })
        const spec = yield* loadSpec(stack.baseUrl)
        assert.strictEqual((yield* call("/v1/agents", stack.pat)).status, 200)
        yield* setAvailable(databaseUrl, false)
        try {
          // the token is cached (the read fails) or not (authentication fails): 503 either way
          for (const [path, token] of [["/v1/agents", stack.pat], [`/v1/sessions/${Crypto.randomUUID()}`, stack.pat], ["/v1/agents", `ldg_pat_${"Z".repeat(43)}`]] as const) {
            const reply = yield* call(path, token)
            assert.strictEqual(reply.status, 503, `${path}: ${JSON.stringify(reply.body)}`)
            assert.deepStrictEqual(reply.body, { error: { code: "unavailable", message: "the database is unavailable; retry later" } })
            assert.isUndefined(spec.check("GET", path, 503, reply.body))
          }
          const ready = yield* Effect.promise(() => fetch(`${stack.baseUrl}/readyz`))
          assert.strictEqual(ready.status, 503)
        } finally {
          yield* setAvailable(databaseUrl, true)
        }
        assert.strictEqual((yield* call("/v1/agents", stack.pat)).status, 200)
      }).pipe(Effect.scoped), 60_000)
  })

  describe("access log", () => {
    it.live("one line per request: method, path, status, duration and the caller's ids, never a token", () =>
      Effect.gen(function*() {
        const entries: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
        const stack = yield* apiStack({ logLevel: "Info", onLog: (entry) => entries.push(entry) })
        const call = (path: string, token: string | null) =>
          Effect.promise(() => fetch(`${stack.baseUrl}${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } }))
        yield* call("/v1/agents?limit=5", stack.pat)
        yield* call("/v1/agents", "ldg_pat_not-a-real-token-but-secret-looking")
        yield* call("/nowhere", null)
        const lines = entries.filter((entry) => String(entry.message).includes("http request"))
        const find = (path: string) => lines.find((line) => line.annotations.path === path)?.annotations

        const ok = find("/v1/agents")
        assert.deepInclude(ok, {
          method: "GET",
          status: 200,
          tenant_id: stack.principal.tenant_id,
          workspace_id: stack.principal.workspace_id,
          user_id: stack.principal.user_id,
          token_id: stack.principal.token_id,
          credential_kind: "pat"
        })
        assert.isNumber(ok!.duration_ms)
        const refused = lines.filter((line) => line.annotations.path === "/v1/agents" && line.annotations.status === 401)
        assert.strictEqual(refused.length, 1)
        assert.notProperty(refused[0]!.annotations, "user_id")
        assert.strictEqual(find("/nowhere")?.status, 404)

        const everything = JSON.stringify(entries.map((entry) => [String(entry.message), entry.annotations]))
        assert.notInclude(everything, stack.pat)
        assert.notInclude(everything, "ldg_pat_", "no token, not even a refused one")
        assert.notInclude(everything, "limit=5", "paths are logged without their query")
      }).pipe(Effect.scoped), 60_000)
  })

  describe("rate limit", () => {
    it.live("429 with Retry-After once a token exceeds LEDGER_API_RATE_LIMIT; other tokens are unaffected", () =>
      Effect.gen(function*() {
        const stack = yield* apiStack({ settings: { apiRateLimit: 2 } })
        const call = (token: string) =>
          Effect.promise(async () => {
            const response = await fetch(`${stack.baseUrl}/v1/agents`, { headers: { authorization: `Bearer ${token}` } })
            return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() as any }
          })
        // a burst of twice the rate passes, the next request is refused
        const statuses = []
        for (let i = 0; i < 5; i++) statuses.push((yield* call(stack.pat)).status)
        assert.deepStrictEqual(statuses, [200, 200, 200, 200, 429])
        const limited = yield* call(stack.pat)
        assert.strictEqual(limited.status, 429)
        assert.isUndefined((yield* loadSpec(stack.baseUrl)).check("GET", "/v1/agents", 429, limited.body))
        assert.strictEqual(limited.retryAfter, "1")
        assert.strictEqual(limited.body.error.code, "rate_limited")
        const other = yield* Effect.orDie(Effect.provide(
          Credentials.use((credentials) => credentials.createToken({ email: "ann@acme.test", workspace: "ops", kind: "pat" })),
          stack.context
        ))
        assert.strictEqual((yield* call(other.token)).status, 200)
        yield* Effect.sleep("1100 millis")
        assert.strictEqual((yield* call(stack.pat)).status, 200, "tokens come back at the configured rate")
      }).pipe(Effect.scoped), 60_000)
  })
})
