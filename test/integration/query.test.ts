/**
 * The read model (LedgerQuery) on real PostgreSQL and on embedded PGlite: rollups, session views with health, the full audit trail,
 * every list filter and order, keyset pages that stay correct while rows arrive, and isolation — another
 * tenant's ids are NotFound, and a restricted member's figures come from their own decisions only.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import * as Crypto from "node:crypto"
import { derive } from "../../src/derive/derive.ts"
import type { Capture } from "../../src/domain/capture.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { LedgerQuery } from "../../src/query/LedgerQuery.ts"
import { LedgerQueryLive } from "../../src/query/ReadModel.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import * as fixtures from "../fixtures/captures/index.ts"
import { insertDecisions, makeCapture, type SeedDecision, seedDecision, type SeedScope } from "../support/seed.ts"
import { type Backend, storeLayer } from "../support/stack.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE

interface Member {
  readonly principal: Principal
  readonly scope: SeedScope
}

/** What the suite seeded, for the assertions. */
class Ledger extends Context.Service<Ledger, {
  readonly ann: Member
  readonly rex: Member
  readonly bob: Member
  readonly rows: ReadonlyArray<SeedDecision>
  /** sessions by name */
  readonly sessions: Record<string, string>
  readonly now: number
}>()("test/query/Ledger") {}

const member = Effect.fnUntraced(function*(tenant: string, email: string, role: "member" | "restricted") {
  const credentials = yield* Credentials
  const boot = yield* credentials.bootstrap({ tenant, workspace: "ops", email, role })
  const principal: Principal = {
    tenant_id: boot.tenant_id,
    workspace_id: boot.workspace_id,
    user_id: boot.user_id,
    role,
    kind: "pat",
    token_id: Crypto.randomUUID()
  }
  return { principal, scope: { ...principal, key_id: Crypto.randomUUID() } } satisfies Member
})

const { anthropicCached, codingAgent, geminiCached, rateLimited, refusal, toolCallingAgent, unknownModel } = fixtures

const SeededLedger = Layer.effect(
  Ledger,
  Effect.gen(function*() {
    const ann = yield* member("acme", "ann@acme.test", "member")
    const rex = yield* member("acme", "rex@acme.test", "restricted")
    const bob = yield* member("globex", "bob@globex.test", "member")
    const now = Date.now()
    const sessions = {
      billingOld: Crypto.randomUUID(),
      billingLoop: Crypto.randomUUID(),
      coderMixed: Crypto.randomUUID(),
      coderFailing: Crypto.randomUUID(),
      globexBilling: Crypto.randomUUID()
    }
    const rows: Array<SeedDecision> = []
    const add = (who: Member, agent_id: string, session: string, at: number, template: Capture, ask?: string) =>
      rows.push(seedDecision(
        makeCapture({ scope: who.scope, agent_id, agent_name: `${agent_id} bot`, at, template, ask, latency_ms: 1_000 + rows.length }),
        session
      ))

    // acme/billing: a finished session two days ago, and a looping one now (same answer over and over)
    for (const [i, template] of [geminiCached(), anthropicCached(), toolCallingAgent()].entries()) {
      add(ann, "billing", sessions.billingOld, now - 48 * HOUR + i * MINUTE, template)
    }
    for (let i = 0; i < 6; i++) add(ann, "billing", sessions.billingLoop, now - 10 * MINUTE + i * 1_000, codingAgent())
    // acme/coder: ann and restricted rex share a session; rex alone in a failing one
    add(ann, "coder", sessions.coderMixed, now - 5 * HOUR, codingAgent())
    add(rex, "coder", sessions.coderMixed, now - 5 * HOUR + MINUTE, refusal())
    add(ann, "coder", sessions.coderMixed, now - 5 * HOUR + 2 * MINUTE, unknownModel())
    for (let i = 0; i < 4; i++) add(rex, "coder", sessions.coderFailing, now - 2 * MINUTE + i * 1_000, rateLimited())
    // globex: an agent with the same id as acme's
    for (let i = 0; i < 2; i++) add(bob, "billing", sessions.globexBilling, now - HOUR + i * MINUTE, toolCallingAgent())

    // in two batches, so rollups are also updated (not only created)
    assert.strictEqual(yield* insertDecisions(rows.slice(0, 7)), 7)
    assert.strictEqual(yield* insertDecisions(rows.slice(7)), rows.length - 7)
    // a redelivered batch changes nothing
    assert.strictEqual(yield* insertDecisions(rows.slice(0, 3)), 0)
    return { ann, rex, bob, rows, sessions, now }
  })
)

const testLayer = (backend: Backend) => Layer.mergeAll(LedgerQueryLive, SeededLedger).pipe(Layer.provideMerge(storeLayer(backend)))

const failureTag = (exit: Exit.Exit<unknown, { readonly _tag: string }>) =>
  Exit.isFailure(exit) ? exit.cause.reasons.map((reason: any) => reason.error?._tag ?? reason._tag).join(",") : "Success"

const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)
const close = (actual: number, expected: number) => assert.closeTo(actual, expected, 1e-9)

const querySuite = (backend: Backend) =>
  layer(testLayer(backend), { timeout: 120_000, excludeTestServices: true })(`read model on ${backend}`, (it) => {
    it.effect("agents: rollups, orders, time filter; restricted figures come from own decisions only", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, rex, bob, rows } = yield* Ledger
        const acme = rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id)

        const page = yield* query.listAgents(ann.principal, {})
        assert.deepStrictEqual(page.data.map((agent) => agent.agent_id), ["coder", "billing"], "most recent first")
        assert.isNull(page.next_cursor)
        for (const agent of page.data) {
          const mine = acme.filter((row) => row.capture.agent_id === agent.agent_id)
          assert.strictEqual(agent.decision_count, mine.length)
          assert.strictEqual(agent.session_count, new Set(mine.map((row) => row.session_id)).size)
          assert.strictEqual(agent.error_count, mine.filter((row) => row.derivation.outcome === "error").length)
          close(agent.total_cost_usd, sum(mine.map((row) => row.derivation.cost.total_usd ?? 0)))
          close(agent.avg_confidence!, sum(mine.map((row) => row.derivation.confidence.value)) / mine.length)
          assert.strictEqual(agent.agent_name, `${agent.agent_id} bot`)
        }
        const byCost = yield* query.listAgents(ann.principal, { order: "cost" })
        assert.isTrue(byCost.data[0]!.total_cost_usd >= byCost.data[1]!.total_cost_usd)
        const byDecisions = yield* query.listAgents(ann.principal, { order: "decisions" })
        assert.deepStrictEqual(byDecisions.data.map((agent) => agent.agent_id), ["billing", "coder"])
        const recentOnly = yield* query.listAgents(ann.principal, { active_since: new Date(Date.now() - 30 * MINUTE).toISOString() })
        assert.deepStrictEqual(recentOnly.data.map((agent) => agent.agent_id).sort(), ["billing", "coder"])
        const old = yield* query.listAgents(ann.principal, { active_until: new Date(Date.now() - 24 * HOUR).toISOString() })
        assert.deepStrictEqual(old.data, [])

        // restricted: only the agent rex used, with rex's own figures
        const restricted = yield* query.listAgents(rex.principal, {})
        assert.deepStrictEqual(restricted.data.map((agent) => agent.agent_id), ["coder"])
        const rexRows = acme.filter((row) => row.capture.user_id === rex.principal.user_id)
        const coder = restricted.data[0]!
        assert.strictEqual(coder.decision_count, rexRows.length)
        assert.strictEqual(coder.session_count, 2)
        assert.strictEqual(coder.error_count, 4)
        close(coder.total_cost_usd, sum(rexRows.map((row) => row.derivation.cost.total_usd ?? 0)))
        assert.strictEqual(coder.agent_name, "coder bot")

        // the other tenant: its own "billing" only
        const globex = yield* query.listAgents(bob.principal, {})
        assert.deepStrictEqual(globex.data.map((agent) => [agent.agent_id, agent.decision_count]), [["billing", 2]])
      }))

    it.effect("sessions of an agent: stats, orders, time range; unknown or other tenant's agent is NotFound", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, rex, bob, sessions, rows } = yield* Ledger
        const page = yield* query.listAgentSessions(ann.principal, "billing", {})
        assert.deepStrictEqual(page.data.map((session) => session.session_id), [sessions.billingLoop, sessions.billingOld])
        const loop = page.data[0]!
        const loopRows = rows.filter((row) => row.session_id === sessions.billingLoop)
        assert.strictEqual(loop.decision_count, 6)
        assert.strictEqual(loop.total_tokens, sum(loopRows.map((row) => row.capture.usage?.total_tokens ?? 0)))
        assert.strictEqual(loop.started_at, new Date(loopRows[0]!.capture.started_at).toISOString())
        assert.strictEqual(loop.ended_at, new Date(loopRows.at(-1)!.capture.ended_at).toISOString())
        assert.include(loop.summary, "6 decisions")

        const byCost = yield* query.listAgentSessions(ann.principal, "billing", { order: "cost" })
        assert.isTrue(byCost.data[0]!.total_cost_usd >= byCost.data[1]!.total_cost_usd)
        const lastDay = yield* query.listAgentSessions(ann.principal, "billing", { since: new Date(Date.now() - 24 * HOUR).toISOString() })
        assert.deepStrictEqual(lastDay.data.map((session) => session.session_id), [sessions.billingLoop])

        // restricted rex: the shared session counts only rex's decision, and is summarised from it
        const rexSessions = yield* query.listAgentSessions(rex.principal, "coder", {})
        const mixed = rexSessions.data.find((session) => session.session_id === sessions.coderMixed)!
        assert.strictEqual(mixed.decision_count, 1)
        assert.include(mixed.summary, "1 decision")
        assert.notInclude(mixed.summary, "retry", "no title of ann's decisions")
        assert.strictEqual(failureTag(yield* Effect.exit(query.listAgentSessions(rex.principal, "billing", {}))), "NotFound")

        assert.strictEqual(failureTag(yield* Effect.exit(query.listAgentSessions(ann.principal, "nobody", {}))), "NotFound")
        // globex has its own "billing": acme's sessions never show
        const globex = yield* query.listAgentSessions(bob.principal, "billing", {})
        assert.deepStrictEqual(globex.data.map((session) => session.session_id), [sessions.globexBilling])
        assert.strictEqual(failureTag(yield* Effect.exit(query.listAgentSessions(ann.principal, "", {}))), "BadRequest")
      }))

    it.effect("one session: mix, latest decisions, health (loop, failing, idle); others' sessions are NotFound", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, rex, bob, sessions } = yield* Ledger

        const loop = yield* query.getSession(ann.principal, sessions.billingLoop)
        assert.strictEqual(loop.decisions.length, 6)
        assert.isFalse(loop.decisions_truncated)
        assert.isTrue(loop.decisions[0]!.created_at > loop.decisions[5]!.created_at, "latest first")
        assert.deepStrictEqual(loop.outcomes, { success: 6 })
        assert.strictEqual(loop.health.loops, 5)
        assert.strictEqual(loop.health.status, "failing")
        assert.isTrue(loop.health.reasons.some((reason) => reason.includes("loop")))
        assert.strictEqual(loop.health.error_rate, 0)
        assert.isNotNull(loop.health.p95_latency_ms)

        const failing = yield* query.getSession(rex.principal, sessions.coderFailing)
        assert.strictEqual(failing.health.status, "failing")
        assert.strictEqual(failing.health.error_rate, 1)
        assert.deepStrictEqual(failing.outcomes, { error: 4 })

        const old = yield* query.getSession(ann.principal, sessions.billingOld)
        assert.strictEqual(old.health.status, "idle", old.health.reasons.join("; "))
        assert.isTrue(old.health.reasons[0]!.startsWith("no activity for"))
        assert.strictEqual(sum(Object.values(old.intents)), 3)
        assert.strictEqual(old.intents.tool_use, 1)

        // restricted: the shared session shows rex's decision only
        const mixed = yield* query.getSession(rex.principal, sessions.coderMixed)
        assert.strictEqual(mixed.decision_count, 1)
        assert.deepStrictEqual(mixed.outcomes, { refusal: 1 })
        assert.deepStrictEqual(mixed.decisions.map((decision) => decision.outcome), ["refusal"])
        const mixedForAnn = yield* query.getSession(ann.principal, sessions.coderMixed)
        assert.strictEqual(mixedForAnn.decision_count, 3)

        assert.strictEqual(failureTag(yield* Effect.exit(query.getSession(bob.principal, sessions.billingLoop))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getSession(rex.principal, sessions.billingLoop))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getSession(ann.principal, Crypto.randomUUID()))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getSession(ann.principal, "not-a-uuid"))), "BadRequest")
      }))

    it.effect("one decision: the full audit trail; wrong session, other tenant or restricted is NotFound", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, rex, bob, rows, sessions } = yield* Ledger
        const row = rows.find((r) => r.session_id === sessions.billingOld && r.derivation.outcome === "tool_call")!
        const decision = yield* query.getDecision(ann.principal, row.capture.ledger_id, row.session_id)
        const expected = derive(row.capture)
        assert.strictEqual(decision.ledger_id, row.capture.ledger_id)
        assert.strictEqual(decision.created_at, new Date(row.capture.started_at).toISOString())
        assert.deepStrictEqual(decision.logic_trace, expected.logic_trace)
        assert.deepStrictEqual(decision.evidence, expected.evidence)
        assert.deepStrictEqual(decision.findings, expected.findings)
        assert.deepStrictEqual(decision.artifacts, expected.artifacts)
        assert.deepStrictEqual(decision.cost, expected.cost)
        assert.deepStrictEqual(decision.quality_detail, expected.quality)
        assert.deepStrictEqual(decision.confidence_detail, expected.confidence)
        assert.strictEqual(decision.intent_reason, expected.intent_reason)
        assert.deepStrictEqual(decision.usage, row.capture.usage)
        assert.strictEqual(decision.outcome, "tool_call")
        assert.isNull(decision.error)

        const failed = rows.find((r) => r.session_id === sessions.coderFailing)!
        const error = yield* query.getDecision(rex.principal, failed.capture.ledger_id)
        assert.deepStrictEqual(error.error, { type: "rate_limit_error", code: "rate_limit_exceeded", message: failed.capture.error!.message })

        const id = row.capture.ledger_id
        assert.strictEqual(failureTag(yield* Effect.exit(query.getDecision(ann.principal, id, sessions.billingLoop))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getDecision(bob.principal, id))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getDecision(rex.principal, id))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(query.getDecision(ann.principal, "123"))), "BadRequest")
      }))

    it.effect("decision lists: every filter and order", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, rex, rows, sessions } = yield* Ledger
        const acme = rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id)
        const ids = (page: { data: ReadonlyArray<{ ledger_id: string }> }) => page.data.map((d) => d.ledger_id)
        const expectIds = (page: { data: ReadonlyArray<{ ledger_id: string }> }, keep: (row: SeedDecision) => boolean, label: string) =>
          assert.deepStrictEqual(ids(page).sort(), acme.filter(keep).map((row) => row.capture.ledger_id).sort(), label)

        const all = yield* query.listDecisions(ann.principal, { limit: 100 })
        expectIds(all, () => true, "all of acme")
        const times = all.data.map((d) => d.created_at)
        assert.deepStrictEqual(times, [...times].sort().reverse(), "newest first")
        const oldest = yield* query.listDecisions(ann.principal, { limit: 100, order: "oldest" })
        assert.deepStrictEqual(ids(oldest), [...ids(all)].reverse())
        const byCost = yield* query.listDecisions(ann.principal, { limit: 100, order: "cost" })
        const costs = byCost.data.map((d) => d.cost_usd ?? -1)
        assert.deepStrictEqual(costs, [...costs].sort((a, b) => b - a), "most expensive first, unpriced last")
        assert.isNull(byCost.data.at(-1)!.cost_usd)
        const byQuality = yield* query.listDecisions(ann.principal, { limit: 100, order: "quality" })
        const qualities = byQuality.data.map((d) => d.quality)
        assert.deepStrictEqual(qualities, [...qualities].sort((a, b) => a - b), "lowest quality first")

        expectIds(yield* query.listDecisions(ann.principal, { outcomes: ["error", "refusal"], limit: 100 }), (r) => ["error", "refusal"].includes(r.derivation.outcome), "outcomes")
        expectIds(yield* query.listDecisions(ann.principal, { intents: ["tool_use"], limit: 100 }), (r) => r.derivation.intent === "tool_use", "intents")
        expectIds(yield* query.listDecisions(ann.principal, { agent_id: "coder", limit: 100 }), (r) => r.capture.agent_id === "coder", "agent")
        expectIds(yield* query.listDecisions(ann.principal, { session_id: sessions.coderMixed, limit: 100 }), (r) => r.session_id === sessions.coderMixed, "session")
        expectIds(yield* query.listDecisions(ann.principal, { model: "gpt-4.1", limit: 100 }), (r) => r.capture.model === "gpt-4.1", "model")
        const threshold = 0.001
        expectIds(yield* query.listDecisions(ann.principal, { min_cost_usd: threshold, limit: 100 }), (r) => (r.derivation.cost.total_usd ?? -1) >= threshold, "min cost")
        expectIds(yield* query.listDecisions(ann.principal, { max_cost_usd: threshold, limit: 100 }), (r) => r.derivation.cost.total_usd !== null && r.derivation.cost.total_usd <= threshold, "max cost")
        expectIds(yield* query.listDecisions(ann.principal, { min_quality: 0.5, max_quality: 0.9, limit: 100 }), (r) => r.derivation.quality.value >= 0.5 && r.derivation.quality.value <= 0.9, "quality range")
        const since = new Date(Date.now() - 6 * HOUR).toISOString()
        const until = new Date(Date.now() - 3 * MINUTE).toISOString()
        const inRange = (r: SeedDecision) => r.capture.started_at >= Date.parse(since) && r.capture.started_at < Date.parse(until)
        expectIds(yield* query.listDecisions(ann.principal, { since, until, limit: 100 }), inRange, "time range")
        // a time without an offset is UTC
        expectIds(yield* query.listDecisions(ann.principal, { since: since.slice(0, -1), until: until.slice(0, -1), limit: 100 }), inRange, "UTC")

        // restricted: own decisions only
        const rexAll = yield* query.listDecisions(rex.principal, { limit: 100 })
        assert.deepStrictEqual(ids(rexAll).sort(), acme.filter((r) => r.capture.user_id === rex.principal.user_id).map((r) => r.capture.ledger_id).sort())

        // a session's list: same filters, and the session must be visible
        const sessionList = yield* query.listSessionDecisions(ann.principal, sessions.coderMixed, { outcomes: ["success"] })
        assert.deepStrictEqual(sessionList.data.map((d) => d.outcome), ["success", "success"])
        assert.strictEqual(failureTag(yield* Effect.exit(query.listSessionDecisions(rex.principal, sessions.billingLoop, {}))), "NotFound")

        for (const bad of [{ limit: 0 }, { limit: 101 }, { limit: 2.5 }, { order: "random" as any }, { since: "yesterday" }, { outcomes: ["great" as any] }, { min_quality: 2 }, { session_id: "x" }, { cursor: "abc" }]) {
          assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(ann.principal, bad))), "BadRequest", JSON.stringify(bad))
        }
      }))

    it.effect("keyset pages: complete, no repeats while rows arrive; cursors are bound to caller and parameters", () =>
      Effect.gen(function*() {
        const query = yield* LedgerQuery
        const { ann, bob, rows } = yield* Ledger
        const acme = rows.filter((row) => row.capture.tenant_id === ann.principal.tenant_id)
        const before = new Set(acme.map((row) => row.capture.ledger_id))

        for (const order of ["newest", "oldest", "cost", "quality"] as const) {
          const seen: Array<string> = []
          let cursor: string | undefined
          let pages = 0
          do {
            const page = yield* query.listDecisions(ann.principal, { order, limit: 4, cursor })
            seen.push(...page.data.map((d) => d.ledger_id))
            // new decisions arrive between pages: newer than everything, and priced like the existing ones
            if (pages === 0) {
              yield* insertDecisions([seedDecision(
                makeCapture({ scope: ann.scope, agent_id: "late", at: Date.now(), template: fixtures.codingAgent() }),
                Crypto.randomUUID()
              )])
            }
            cursor = page.next_cursor ?? undefined
            pages++
          } while (cursor !== undefined)
          assert.strictEqual(new Set(seen).size, seen.length, `${order}: no repeats`)
          for (const id of before) assert.include(seen, id, `${order}: every row present before the walk is listed`)
        }

        // agents and sessions page too
        const agentIds: Array<string> = []
        let agentCursor: string | undefined
        do {
          const page = yield* query.listAgents(ann.principal, { limit: 1, cursor: agentCursor })
          agentIds.push(...page.data.map((a) => a.agent_id))
          agentCursor = page.next_cursor ?? undefined
        } while (agentCursor !== undefined)
        assert.deepStrictEqual(agentIds.sort(), ["billing", "coder", "late"])

        const first = yield* query.listDecisions(ann.principal, { limit: 2 })
        const cursor = first.next_cursor!
        assert.strictEqual((yield* query.listDecisions(ann.principal, { limit: 5, cursor })).data.length, 5, "page size may change")
        // the same cursor with another order, other filters, or by another principal is refused
        assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(ann.principal, { cursor, order: "oldest" }))), "BadRequest")
        assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(ann.principal, { cursor, agent_id: "coder" }))), "BadRequest")
        assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(bob.principal, { cursor }))), "BadRequest")
        // a tampered cursor is refused
        const [version, payload, mac] = cursor.split(".")
        const forged = Buffer.from(JSON.stringify(["2001-01-01T00:00:00.000000Z", Crypto.randomUUID()])).toString("base64url")
        assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(ann.principal, { cursor: `${version}.${forged}.${mac}` }))), "BadRequest")
        assert.strictEqual(failureTag(yield* Effect.exit(query.listDecisions(ann.principal, { cursor: `${version}.${payload}.${mac}x` }))), "BadRequest")
      }))
  })

describe("LedgerQuery", () => {
  querySuite("postgres")
  querySuite("pglite")
})
