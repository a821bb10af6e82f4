/**
 * Session assignment with explicit timestamps (docs/ARCHITECTURE.md, "Deriving a decision"): execution ids, the
 * inactivity gap, late and out-of-order captures (extension, bridging merges), arrival order not mattering, and
 * several builders at once. Against real PostgreSQL; the expected sessions are computed independently from the
 * timeline.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import type { CaptureIdentity } from "../../bench/ingest/captures.ts"
import { planSessions } from "../../src/builder/sessions.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { deterministicSummary, writeDeterministicSummaries, writeModelSummaries } from "../../src/analytics/Summaries.ts"
import { LedgerQuery } from "../../src/query/LedgerQuery.ts"
import { LedgerQueryLive } from "../../src/query/ReadModel.ts"
import { TenantSql } from "../../src/store/TenantSql.ts"
import { builderStack, captureJson, MINUTE, newWorkspace, publishAndBuild, recount, sessionPartition, T0 } from "./builder-harness.ts"

const GAP = 30 * MINUTE

interface Call {
  readonly ledger_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly start: number
  readonly duration: number
}

const call = (agent_id: string, startMinute: number, options: { execution?: string; durationMs?: number } = {}): Call => ({
  ledger_id: Crypto.randomUUID(),
  agent_id,
  execution_id: options.execution ?? null,
  start: T0 + startMinute * MINUTE,
  duration: options.durationMs ?? 2_000
})

const payload = (identity: CaptureIdentity, c: Call, variant = 0) =>
  captureJson(identity, {
    ledger_id: c.ledger_id,
    agent_id: c.agent_id,
    execution_id: c.execution_id,
    started_at: c.start,
    duration_ms: c.duration,
    variant
  })

const build = (identity: CaptureIdentity, calls: ReadonlyArray<Call>) => publishAndBuild(calls.map((c, i) => payload(identity, c, i)))

/** Expected sessions of gap-grouped calls: sorted by start, a new session when a call starts beyond the gap. */
const expectedPartition = (calls: ReadonlyArray<Call>) => {
  const sorted = [...calls].sort((a, b) => a.start - b.start || (a.ledger_id < b.ledger_id ? -1 : 1))
  const sessions: Array<Array<Call>> = []
  let reach = -Infinity
  for (const c of sorted) {
    if (c.start > reach + GAP) sessions.push([])
    sessions.at(-1)!.push(c)
    reach = Math.max(reach, c.start + c.duration)
  }
  return sessions.map((members) => members.map((m) => m.ledger_id).join(",")).sort()
}

const sessionsOf = (agentId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ session_id: string; execution_id: string | null; started_at: Date; ended_at: Date; decision_count: number }>`
      SELECT session_id, execution_id, started_at, ended_at, decision_count::int FROM sessions WHERE agent_id = ${agentId} ORDER BY started_at`
  })

/** A deterministic pseudo-random generator, so a failing timeline can be replayed from its seed. */
const rng = (seed: number) => () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
  return seed / 2 ** 31
}

const randomTimeline = (agent: string, random: () => number, count: number): Array<Call> => {
  let minute = 0
  return Array.from({ length: count }, () => {
    const r = random()
    minute += r < 0.6 ? 1 + Math.floor(random() * 5) : r < 0.85 ? 20 + Math.floor(random() * 20) : 60 + Math.floor(random() * 120)
    return call(agent, minute, { durationMs: 500 + Math.floor(random() * 120_000) })
  })
}

const shuffle = <A>(items: ReadonlyArray<A>, random: () => number): Array<A> => {
  const copy = [...items]
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[copy[i], copy[j]] = [copy[j]!, copy[i]!]
  }
  return copy
}

/** Splits items into consecutive batches of random sizes. */
const batches = <A>(items: ReadonlyArray<A>, random: () => number): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  for (let i = 0; i < items.length;) {
    const size = 1 + Math.floor(random() * 6)
    out.push(items.slice(i, i + size))
    i += size
  }
  return out
}

describe("session planning (pure)", () => {
  const stored = [
    { session_id: "s-early", agent_id: "a", execution_id: null, start: 0, end: 10 },
    { session_id: "s-late", agent_id: "a", execution_id: null, start: 100, end: 110 }
  ]
  const at = (ledger_id: string, start: number) => ({ ledger_id, agent_id: "a", execution_id: null, start, end: start + 1 })
  const plan = (calls: Parameters<typeof planSessions>[0]) => {
    let n = 0
    return planSessions(calls, stored, { gapMs: 35, newId: () => `new-${++n}` })
  }

  it("folds a session opened earlier in the batch into the stored one a later call reaches", () => {
    // c1 opens a new session (too far from both), c2 extends it, c3 reaches it and s-late
    const result = plan([at("c3", 70), at("c1", 50), at("c2", 60)])
    assert.deepStrictEqual([...result.merged], [])
    assert.deepStrictEqual([...result.created.keys()], [])
    assert.deepStrictEqual(Object.fromEntries(result.assignment), { c1: "s-late", c2: "s-late", c3: "s-late" })
  })

  it("merges stored sessions a call bridges into the earliest", () => {
    const result = plan([at("c1", 44), at("c2", 70)])
    assert.deepStrictEqual([...result.merged], [["s-late", "s-early"]])
    assert.deepStrictEqual(Object.fromEntries(result.assignment), { c1: "s-early", c2: "s-early" })
  })

  it("keeps executions apart from gap sessions and from other agents", () => {
    const result = plan([
      { ledger_id: "e1", agent_id: "a", execution_id: "run", start: 5, end: 6 },
      { ledger_id: "e2", agent_id: "b", execution_id: "run", start: 5, end: 6 },
      { ledger_id: "e3", agent_id: "a", execution_id: "run", start: 900, end: 901 }
    ])
    assert.deepStrictEqual(Object.fromEntries(result.assignment), { e1: "new-1", e2: "new-2", e3: "new-1" })
    assert.deepStrictEqual([...result.created], [["new-1", { agent_id: "a", execution_id: "run" }], ["new-2", { agent_id: "b", execution_id: "run" }]])
  })
})

layer(builderStack("postgres"), { timeout: 120_000, excludeTestServices: true })("session assignment", (it) => {
  it.effect("an execution id makes one session per agent, whatever the gaps; other calls are grouped by the gap", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const run = [call("planner", 0, { execution: "run-1" }), call("planner", 90, { execution: "run-1" }), call("planner", 400, { execution: "run-1" })]
      const otherAgentSameRun = call("coder", 5, { execution: "run-1" })
      const otherRun = call("planner", 10, { execution: "run-2" })
      const loose = [call("planner", 1), call("planner", 20), call("planner", 100)]
      yield* build(identity, [...run.slice(0, 2), otherAgentSameRun, otherRun, ...loose])
      // the execution's last call arrives in a later batch
      yield* build(identity, [run[2]!])

      const planner = yield* sessionsOf("planner")
      assert.deepStrictEqual(
        planner.map((s) => [s.execution_id, s.decision_count, s.started_at.getTime() - T0, s.ended_at.getTime() - T0]),
        [
          ["run-1", 3, 0, 400 * MINUTE + 2_000],
          [null, 2, 1 * MINUTE, 20 * MINUTE + 2_000],
          ["run-2", 1, 10 * MINUTE, 10 * MINUTE + 2_000],
          [null, 1, 100 * MINUTE, 100 * MINUTE + 2_000]
        ]
      )
      const coder = yield* sessionsOf("coder")
      assert.deepStrictEqual(coder.map((s) => [s.execution_id, s.decision_count]), [["run-1", 1]])
      assert.deepStrictEqual(yield* recount, [])
    }))

  it.effect("a late capture between two sessions within the gap of both merges them; one before a session's start extends it", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const early = [call("ops", 0), call("ops", 10)]
      const later = [call("ops", 50), call("ops", 60)]
      yield* build(identity, [...early, ...later])
      const before = yield* sessionsOf("ops")
      assert.strictEqual(before.length, 2, "40 minutes apart: two sessions")

      // lands 20 minutes after the first session's end and 20 before the second's start
      yield* build(identity, [call("ops", 30)])
      const merged = yield* sessionsOf("ops")
      assert.strictEqual(merged.length, 1)
      assert.strictEqual(merged[0]!.session_id, before[0]!.session_id, "the earlier stored session survives the merge")
      assert.strictEqual(merged[0]!.decision_count, 5)

      // 25 minutes before the session's start: extends it backwards
      yield* build(identity, [call("ops", -25)])
      const extended = yield* sessionsOf("ops")
      assert.strictEqual(extended.length, 1)
      assert.strictEqual(extended[0]!.started_at.getTime(), T0 - 25 * MINUTE)
      // 31 minutes before that: a session of its own
      yield* build(identity, [call("ops", -56 - 1)])
      assert.strictEqual((yield* sessionsOf("ops")).length, 2)

      const sql = yield* SqlClient.SqlClient
      const [agent] = yield* sql<{ session_count: number }>`SELECT session_count::int FROM agents WHERE agent_id = 'ops'`
      assert.strictEqual(agent!.session_count, 2)
      assert.deepStrictEqual(yield* recount, [])

      // the folded session's id stays an alias: every read by it answers with the surviving session
      const [survivor, folded] = [before[0]!.session_id, before[1]!.session_id]
      const principal: Principal = { ...identity, role: "member", kind: "pat", token_id: identity.key_id }
      const reads = (id: string) =>
        Effect.gen(function*() {
          const query = yield* LedgerQuery
          return {
            session: (yield* query.getSession(principal, id)).session_id,
            decisions: (yield* query.listSessionDecisions(principal, id, {})).data.length,
            filtered: (yield* query.listDecisions(principal, { session_id: id })).data.length,
            decision: (yield* query.getDecision(principal, later[0]!.ledger_id, id)).session_id
          }
        }).pipe(Effect.provide(LedgerQueryLive))
      assert.deepStrictEqual(yield* reads(folded), { session: survivor, decisions: 6, filtered: 6, decision: survivor })

      // a call bridging the session at -57 and the survivor folds the survivor into it (the earliest): both ids
      // now resolve to that one, in one step
      yield* build(identity, [call("ops", -41)])
      const [earliest] = yield* sessionsOf("ops")
      assert.strictEqual((yield* sessionsOf("ops")).length, 1)
      const aliases = yield* sql<{ session_id: string; merged_into: string }>`
        SELECT session_id::text, merged_into::text FROM session_aliases WHERE session_id IN (${survivor}, ${folded}) ORDER BY session_id`
      assert.deepStrictEqual(aliases.map((a) => a.merged_into), [earliest!.session_id, earliest!.session_id])
      for (const id of [survivor, folded]) {
        assert.deepStrictEqual(yield* reads(id), { session: earliest!.session_id, decisions: 8, filtered: 8, decision: earliest!.session_id })
      }
      const unknown = yield* Effect.flip(LedgerQuery.use((query) => query.getSession(principal, Crypto.randomUUID())).pipe(Effect.provide(LedgerQueryLive)))
      assert.strictEqual(unknown._tag, "NotFound")
    }))

  it.effect("the builder writes a session's summary until analytics has written one; then it keeps analytics'", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const tenantSql = yield* TenantSql
      const stored = Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ session_id: string; decision_count: number; summary: string }>`
          SELECT session_id, decision_count::int, summary FROM sessions WHERE agent_id = 'summarised'`
        return row!
      })
      yield* build(identity, [call("summarised", 0)])
      const first = yield* stored
      yield* build(identity, [call("summarised", 5)])
      const second = yield* stored
      // the builder's summary follows the session
      assert.match(first.summary, /\(1 decision over /)
      assert.match(second.summary, /\(2 decisions over /)

      // analytics writes its own (the default, deterministic one); the builder's next rollup leaves it
      const [state] = yield* tenantSql.write(identity, writeDeterministicSummaries([second.session_id], false))
      const analytics = deterministicSummary(state!.facts)
      yield* build(identity, [call("summarised", 10)])
      const third = yield* stored
      assert.strictEqual(third.decision_count, 3)
      assert.strictEqual(third.summary, analytics)

      // a model summary is not replaced by the builder's at the next decision
      yield* tenantSql.write(identity, writeModelSummaries("openai/gpt-4o-mini", [{ session_id: second.session_id, summary: "Reviewed the payments runbook.", decisions: 3 }]))
      yield* build(identity, [call("summarised", 15)])
      const fourth = yield* stored
      assert.strictEqual(fourth.decision_count, 4)
      assert.strictEqual(fourth.summary, "Reviewed the payments runbook.")
      assert.deepStrictEqual(yield* recount, [])
    }))

  it.effect("a session written without its first decision (an earlier builder, mid-upgrade) keeps its rollup and gets it", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const sql = yield* SqlClient.SqlClient
      yield* build(identity, [call("upgraded", 0), call("upgraded", 3)])
      // what a builder of the version before migration 0023 leaves: the rollup without the first decision
      yield* sql`UPDATE sessions SET first_ledger_id = NULL, first_at = NULL, first_title = NULL WHERE agent_id = 'upgraded'`
      yield* build(identity, [call("upgraded", 6)])
      const [row] = yield* sql<{ decision_count: number; first_at: Date; first_title: string; summary: string }>`
        SELECT decision_count::int, first_at, first_title, summary FROM sessions WHERE agent_id = 'upgraded'`
      const [first] = yield* sql<{ title: string }>`SELECT title FROM decisions WHERE agent_id = 'upgraded' ORDER BY created_at LIMIT 1`
      assert.deepStrictEqual([row!.decision_count, row!.first_at.getTime() - T0, row!.first_title], [3, 0, first!.title])
      assert.match(row!.summary, /\(3 decisions over /)
      assert.deepStrictEqual(yield* recount, [])
    }))

  it.effect("arrival order does not matter: shuffled timelines in random batches give the in-order sessions", () =>
    Effect.gen(function*() {
      for (const seed of [1, 7, 42]) {
        const identity = yield* newWorkspace()
        const random = rng(seed)
        const agents = ["alpha", "beta", "gamma"].map((name) => `${name}-${seed}`)
        const timelines = agents.map((agent) => randomTimeline(agent, random, 25))
        for (const batch of batches(shuffle(timelines.flat(), random), random)) yield* build(identity, batch)
        for (const [i, agent] of agents.entries()) {
          assert.deepStrictEqual(yield* sessionPartition(agent), expectedPartition(timelines[i]!), `seed ${seed}, ${agent}`)
        }
      }
      assert.deepStrictEqual(yield* recount, [])
    }))

  it.effect("several builders at once on the same agents: same sessions, consistent rollups, no deadlock", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const random = rng(99)
      const agents = ["one", "two", "three", "four"]
      const timelines = agents.map((agent) => randomTimeline(`${agent}-concurrent`, random, 40))
      const shuffled = batches(shuffle(timelines.flat(), random), random)
      // four consumers, each building every fourth batch, all at the same time
      yield* Effect.forEach(
        [0, 1, 2, 3],
        (consumer) =>
          Effect.forEach(shuffled.filter((_, i) => i % 4 === consumer), (batch) => publishAndBuild(batch.map((c) => payload(identity, c)), `consumer-${consumer}`)),
        { concurrency: "unbounded" }
      )
      for (const [i, agent] of agents.entries()) {
        assert.deepStrictEqual(yield* sessionPartition(`${agent}-concurrent`), expectedPartition(timelines[i]!), agent)
      }
      assert.deepStrictEqual(yield* recount, [])
    }))
})
