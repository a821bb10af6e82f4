/**
 * The decision builder against real PostgreSQL (and embedded PGlite): reconstruction stored with its subjects,
 * rollups from what was inserted, redelivery changing nothing, dead letters for what cannot be built (with the
 * batch going on), the maxDeliveries rule, and the consumer loops with the reclaimer.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Metric } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { BuilderWorkers } from "../../src/builder/BuilderWorkers.ts"
import { ContentPolicies } from "../../src/builder/ContentPolicies.ts"
import { classifyFailure, DecisionBuilder } from "../../src/builder/DecisionBuilder.ts"
import { lockWait } from "../../src/builder/metrics.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import { derive } from "../../src/derive/derive.ts"
import { extractSubjects } from "../../src/derive/subjects.ts"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import { eventually } from "../support/eventually.ts"
import type { Capture } from "../../src/domain/capture.ts"
import { DatabaseUnavailable } from "../../src/domain/errors.ts"
import { realisticCapture, TEMPLATE_COUNT } from "../../bench/ingest/captures.ts"
import { builderStack, captureJson, holdAgentLock, MINUTE, newWorkspace, publishAndBuild, recount, publish, T0 } from "./builder-harness.ts"

const rowsOf = (ledgerIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<Record<string, any>>`SELECT * FROM decisions WHERE ledger_id = ANY(${ledgerIds}::uuid[]) ORDER BY created_at`
  })

const snapshot = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const agents = yield* sql`SELECT * FROM agents ORDER BY tenant_id, agent_id`
  const sessions = yield* sql`SELECT * FROM sessions ORDER BY session_id`
  const decisions = yield* sql`SELECT ledger_id, session_id, title, cost_usd FROM decisions ORDER BY ledger_id`
  return { agents, sessions, decisions }
})

const suite = (backend: "postgres" | "pglite") =>
  layer(builderStack(backend), { timeout: 120_000, excludeTestServices: true })(`decision builder (${backend})`, (it) => {
    it.effect("stores each capture's reconstruction, subjects and the raw call; rollups follow what was inserted", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace()
        const captures: Array<Capture> = Array.from({ length: TEMPLATE_COUNT }, (_, i) =>
          realisticCapture(identity, { agent_id: "agent-billing", agent_name: "billing", started_at: T0 + i * MINUTE, variant: i }))
        const outcome = yield* publishAndBuild(captures.map((c) => JSON.stringify(c)))
        assert.deepStrictEqual(outcome, { built: captures.length, duplicates: 0, deadLettered: 0, released: 0 })

        const rows = yield* rowsOf(captures.map((c) => c.ledger_id))
        assert.strictEqual(rows.length, captures.length)
        for (const [i, row] of rows.entries()) {
          const capture = captures[i]!
          const derivation = derive(capture)
          assert.strictEqual(row.title, derivation.title)
          assert.strictEqual(row.intent, derivation.intent)
          assert.strictEqual(row.outcome, derivation.outcome)
          assert.strictEqual(row.cost_usd, derivation.cost.total_usd)
          assert.deepStrictEqual(row.derivation, JSON.parse(JSON.stringify(derivation)))
          assert.deepStrictEqual(row.subjects, JSON.parse(JSON.stringify(extractSubjects(capture, derivation))))
          assert.strictEqual(row.raw_request, capture.request)
          assert.strictEqual(row.raw_response, capture.response)
          assert.strictEqual(row.latency_ms, capture.ended_at - capture.started_at)
          assert.strictEqual(row.created_at.getTime(), capture.started_at)
          assert.strictEqual(row.user_id, identity.user_id)
        }
        // every call within 30 minutes of the previous one: one session
        assert.strictEqual(new Set(rows.map((row) => row.session_id)).size, 1)
        assert.deepStrictEqual(yield* recount, [])

        const sql = yield* SqlClient.SqlClient
        const [agent] = yield* sql<{ agent_name: string; decision_count: number; error_count: number; session_count: number }>`
          SELECT agent_name, decision_count::int, error_count::int, session_count::int FROM agents WHERE tenant_id = ${identity.tenant_id}`
        assert.deepStrictEqual(agent, {
          agent_name: "billing",
          decision_count: captures.length,
          error_count: rows.filter((row) => row.outcome === "error").length,
          session_count: 1
        })
        const [session] = yield* sql<{ summary: string }>`SELECT summary FROM sessions WHERE tenant_id = ${identity.tenant_id}`
        assert.match(session!.summary, new RegExp(`^Find the open invoices for ACME Corp.* \\(${captures.length} decisions over ${captures.length - 1} min, 1 error, \\$`))

        const stats = yield* (yield* CaptureStream).stats
        assert.strictEqual(stats.pending, 0, "acknowledged after commit")
      }))

    it.effect("a redelivered or duplicated capture changes nothing", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace()
        const payloads = Array.from({ length: 6 }, (_, i) => captureJson(identity, { agent_id: "agent-dup", started_at: T0 + i * MINUTE, variant: i }))
        yield* publishAndBuild(payloads)
        const before = yield* snapshot
        // the same captures again, one of them twice in the same batch
        const again = yield* publishAndBuild([...payloads, payloads[0]!])
        assert.deepStrictEqual(again, { built: 0, duplicates: 7, deadLettered: 0, released: 0 })
        assert.deepStrictEqual(yield* snapshot, before)
        assert.deepStrictEqual(yield* recount, [])
      }))

    it.effect("a Responses call built before the one it continues is linked when that one is built", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace()
        const responsesCall = (at: number, id: string, input: string, previous?: string) => ({
          ...realisticCapture(identity, { agent_id: "agent-codex", started_at: at }),
          api: "responses",
          request: JSON.stringify({ model: "gpt-5-mini", input, ...(previous === undefined ? {} : { previous_response_id: previous }) }),
          response: JSON.stringify({
            id,
            object: "response",
            status: "completed",
            output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: `Answered: ${input}` }] }],
            usage: { input_tokens: 12, output_tokens: 6, total_tokens: 18 }
          }),
          usage: null
        })
        const first = responsesCall(T0, "resp_first", "List the open incidents.")
        const second = responsesCall(T0 + MINUTE, "resp_second", "Which one is oldest?", "resp_first")
        // the successor reaches the builder first: nothing to link to yet
        yield* publishAndBuild([JSON.stringify(second)])
        yield* publishAndBuild([JSON.stringify(first)])
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ previous: string | null }>`
          SELECT previous_ledger_id::text AS previous FROM decisions WHERE ledger_id = ${second.ledger_id}::uuid`
        assert.strictEqual(row!.previous, first.ledger_id)

        // in one batch: a call continuing a stored one, one continuing it in the batch, and one naming a chat
        // completion's id (only a Responses answer is continued: it links to nothing)
        const third = responsesCall(T0 + 2 * MINUTE, "resp_third", "Who owns it?", "resp_second")
        const fourth = responsesCall(T0 + 3 * MINUTE, "resp_fourth", "Page them.", "resp_third")
        const chat = { ...realisticCapture(identity, { agent_id: "agent-codex", started_at: T0 + 4 * MINUTE, variant: 0 }) }
        const chatId = JSON.parse(chat.response!).id as string
        const stray = responsesCall(T0 + 5 * MINUTE, "resp_stray", "And then?", chatId)
        yield* publishAndBuild([fourth, chat, third, stray].map((call) => JSON.stringify(call)))
        const rows = yield* sql<{ ledger_id: string; previous: string | null; turns: number }>`
          SELECT ledger_id::text, previous_ledger_id::text AS previous, json_array_length(derivation->'logic_trace') AS turns
          FROM decisions WHERE ledger_id = ANY(${[second, third, fourth, stray].map((call) => call.ledger_id)}::uuid[])`
        const by = new Map(rows.map((r) => [r.ledger_id, r]))
        assert.strictEqual(by.get(third.ledger_id)!.previous, second.ledger_id)
        assert.strictEqual(by.get(fourth.ledger_id)!.previous, third.ledger_id)
        assert.strictEqual(by.get(stray.ledger_id)!.previous, null)
        // each trace opens with the turns it continues: two a call
        assert.deepStrictEqual([second, third, fourth, stray].map((call) => by.get(call.ledger_id)!.turns), [4, 6, 8, 2])
      }))

    it.effect("what cannot be built goes to the dead letters with the reason, and the batch goes on", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace()
        const good = Array.from({ length: 4 }, (_, i) => captureJson(identity, { agent_id: "agent-mixed", started_at: T0 + i * MINUTE, variant: i }))
        // Postgres refuses this one (a token count no bigint holds): found by splitting the batch
        const oversized = JSON.stringify({
          ...realisticCapture(identity, { agent_id: "agent-mixed", started_at: T0 + 10 * MINUTE }),
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 1e20 }
        })
        const notJson = "{\"v\":1,\"ledger_id\":"
        const wrongShape = JSON.stringify({ v: 1, ledger_id: Crypto.randomUUID() })
        const notUuid = JSON.stringify({ ...realisticCapture(identity, { agent_id: "a", started_at: T0 }), tenant_id: "tenant-acme" })
        const outcome = yield* publishAndBuild([good[0]!, notJson, good[1]!, wrongShape, oversized, good[2]!, notUuid, good[3]!])
        assert.deepStrictEqual(outcome, { built: 4, duplicates: 0, deadLettered: 4, released: 0 })

        const stream = yield* CaptureStream
        const letters = yield* stream.listDeadLetters({ count: 10 })
        const reasons = letters.map((letter) => letter.reason)
        assert.strictEqual(letters.length, 4)
        assert.match(reasons[0]!, /^invalid capture: Expected a valid JSON string/)
        assert.match(reasons[1]!, /^invalid capture: Missing key at \["tenant_id"\]/)
        assert.match(reasons[2]!, /^capture cannot be stored: .*uuid.* at \["tenant_id"\]/i)
        assert.match(reasons[3]!, /^database refused the decision: .*bigint out of range/)
        assert.strictEqual((yield* stream.stats).pending, 0)
        assert.deepStrictEqual(yield* recount, [])
      }))

    it.effect("an entry delivered more than maxDeliveries times is dead-lettered with the last reason", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace()
        const builder = yield* DecisionBuilder
        const stream = yield* CaptureStream
        const before = (yield* stream.listDeadLetters({ count: 100 })).length
        const payload = captureJson(identity, { agent_id: "agent-crashy", started_at: T0 })
        const [id] = yield* publish([payload])
        // a consumer that keeps dying: the entry is reclaimed over and over (maxDeliveries is 5)
        yield* stream.read("dies", { count: 1, blockMs: 0 })
        let delivered = yield* stream.reclaim("dies", { minIdleMs: 0, count: 1 })
        while (delivered[0]!.deliveries <= 5) delivered = yield* stream.reclaim("dies", { minIdleMs: 0, count: 1 })
        const outcome = yield* builder.process("survivor", delivered)
        assert.deepStrictEqual(outcome, { built: 0, duplicates: 0, deadLettered: 1, released: 0 })
        const letters = yield* stream.listDeadLetters({ count: 100 })
        assert.strictEqual(letters.length, before + 1)
        const letter = letters.at(-1)!
        assert.strictEqual(letter.original_id, id)
        assert.strictEqual(letter.deliveries, 6)
        assert.match(letter.reason, /^delivered 6 times without being built; last failure: unknown/)
        assert.strictEqual(letter.payload, payload)
      }))

    it.effect("sorts database failures: unavailable → retry, refused data → split, the rest → release", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const failureOf = (statement: Effect.Effect<unknown, unknown>) =>
          statement.pipe(
            Effect.flip,
            Effect.map((error) => classifyFailure(new DatabaseUnavailable({ message: "database unavailable", cause: error })).kind)
          )
        assert.strictEqual(yield* failureOf(sql`SELECT 'x'::uuid`), "data")
        assert.strictEqual(yield* failureOf(sql`SELECT 1e30::float8::bigint`), "data")
        assert.strictEqual(yield* failureOf(sql`SELECT * FROM no_such_table`), "other")
        assert.strictEqual(classifyFailure("timeout").kind, "unavailable")
      }))
  })

describe("DecisionBuilder", () => {
  suite("postgres")
  suite("pglite")

  layer(builderStack("postgres", { builderConsumers: 2, builderBatchSize: 7, reclaimIdleMs: 200 }), { timeout: 120_000, excludeTestServices: true })(
    "consumer loops",
    (it) => {
      it.effect("consumers build what is published and the reclaimer takes over a dead consumer's entries", () =>
        Effect.gen(function*() {
          const identity = yield* newWorkspace()
          const stream = yield* CaptureStream
          const sql = yield* SqlClient.SqlClient
          // a consumer takes 5 entries and dies before building them
          const orphaned = Array.from({ length: 5 }, (_, i) => captureJson(identity, { agent_id: "agent-orphan", started_at: T0 + i * MINUTE, variant: i }))
          yield* publish(orphaned)
          assert.strictEqual((yield* stream.read("dead-consumer", { count: 5, blockMs: 0 })).length, 5)

          yield* Layer.build(BuilderWorkers.pipe(Layer.provide(Layer.mergeAll(CaptureShards.single, ContentPolicies.layer))))
          const payloads = Array.from({ length: 40 }, (_, i) =>
            captureJson(identity, { agent_id: `agent-${i % 4}`, started_at: T0 + i * MINUTE, variant: i }))
          yield* publish(payloads)

          const count = () => sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions WHERE tenant_id = ${identity.tenant_id}`.pipe(Effect.map((rows) => rows[0]!.n))
          for (let i = 0; i < 200 && (yield* count()) < 45; i++) yield* Effect.sleep("50 millis")
          assert.strictEqual(yield* count(), 45)
          for (let i = 0; i < 100 && (yield* stream.stats).pending > 0; i++) yield* Effect.sleep("50 millis")
          assert.strictEqual((yield* stream.stats).pending, 0)
          assert.deepStrictEqual(yield* recount, [])
          const [throughput] = yield* sql<{ n: number }>`SELECT sum(decisions)::int AS n FROM pipeline_throughput`
          assert.isAtLeast(throughput!.n, 45)
        }).pipe(Effect.scoped))
    }
  )

  // a budget of two and a half captures of the shape published below: batches commit two captures a transaction
  const payloadChars = captureJson({ tenant_id: Crypto.randomUUID(), workspace_id: Crypto.randomUUID(), user_id: Crypto.randomUUID(), key_id: Crypto.randomUUID() }, { agent_id: "agent-b", started_at: T0 }).length
  layer(builderStack("postgres", { builderBatchBytes: Math.floor(payloadChars * 2.5) }), { timeout: 120_000, excludeTestServices: true })(
    "a batch larger than LEDGER_BUILDER_BATCH_MB",
    (it) => {
      it.effect("commits in transactions within the budget, in order, and acknowledges each after its commit", () =>
        Effect.gen(function*() {
          const identity = yield* newWorkspace()
          const stream = yield* CaptureStream
          const sql = yield* SqlClient.SqlClient
          const ids = yield* publish(Array.from({ length: 9 }, (_, i) => captureJson(identity, { agent_id: "agent-b", started_at: T0 + i * MINUTE })))
          const outcome = yield* (yield* DecisionBuilder).process("bytes-test/0.0", yield* stream.read("bytes-test", { count: 20, blockMs: 0 }))
          assert.deepStrictEqual(outcome, { built: 9, duplicates: 0, deadLettered: 0, released: 0 })
          assert.strictEqual((yield* stream.stats).pending, 0)
          // rows of one transaction share its xmin: five transactions (2 + 2 + 2 + 2 + 1), chained in the order read
          const rows = yield* sql<{ xid: string; created_at: Date }>`SELECT xmin::text AS xid, created_at FROM decisions
            WHERE tenant_id = ${identity.tenant_id} ORDER BY seq`
          assert.strictEqual(rows.length, ids.length)
          assert.strictEqual(new Set(rows.map((row) => row.xid)).size, 5)
          assert.deepStrictEqual(rows.map((row) => row.created_at.getTime()), ids.map((_, i) => T0 + i * MINUTE))
          assert.deepStrictEqual(yield* recount, [])
        }))
    }
  )

  layer(builderStack("postgres"), { timeout: 120_000, excludeTestServices: true })("a batch over several workspaces", (it) => {
    it.effect("commits a transaction a workspace: one workspace's decisions are stored and acknowledged while another's wait on its locks", () =>
      Effect.gen(function*() {
        const stream = yield* CaptureStream
        const sql = yield* SqlClient.SqlClient
        // workspaces are written in ascending order: the second one's agent is held by another transaction
        const [first, second] = [yield* newWorkspace(), yield* newWorkspace()].sort((a, b) =>
          `${a.tenant_id}/${a.workspace_id}` < `${b.tenant_id}/${b.workspace_id}` ? -1 : 1)
        const release = yield* holdAgentLock({ tenant_id: second!.tenant_id, workspace_id: second!.workspace_id }, "agent-w")
        yield* publish(Array.from({ length: 12 }, (_, i) =>
          captureJson(i % 2 === 0 ? first! : second!, { agent_id: "agent-w", started_at: T0 + i * MINUTE, variant: i })))
        const builder = yield* DecisionBuilder
        const building = yield* Effect.forkChild(
          Effect.flatMap(stream.read("workspaces-test", { count: 12, blockMs: 0 }), (entries) => builder.process("workspaces-test/0.0", entries))
        )
        const stored = (workspace: { readonly tenant_id: string }) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions WHERE tenant_id = ${workspace.tenant_id}`.pipe(Effect.map((rows) => rows[0]!.n))
        yield* eventually("the first workspace stored and acknowledged", Effect.gen(function*() {
          return (yield* stored(first!)) === 6 && (yield* stream.stats).pending === 6
        }), 20)
        assert.strictEqual(yield* stored(second!), 0)

        yield* release
        assert.deepStrictEqual(yield* Fiber.join(building), { built: 12, duplicates: 0, deadLettered: 0, released: 0 })
        assert.strictEqual(yield* stored(second!), 6)
        assert.strictEqual((yield* stream.stats).pending, 0)
        const transactions = yield* sql<{ xid: string }>`SELECT DISTINCT xmin::text AS xid FROM decisions
          WHERE tenant_id IN (${first!.tenant_id}, ${second!.tenant_id})`
        assert.strictEqual(transactions.length, 2)
        assert.deepStrictEqual(yield* recount, [])
      }).pipe(Effect.scoped))
  })

  layer(builderStack("postgres", { builderConsumers: 1, builderBatchSize: 5, builderLingerMs: 0 }), { timeout: 120_000, excludeTestServices: true })(
    "a consumer reading ahead",
    (it) => {
      it.effect("reads and derives its next batch while the current one waits on its locks; batches commit in read order", () =>
        Effect.gen(function*() {
          const identity = yield* newWorkspace()
          const scope = { tenant_id: identity.tenant_id, workspace_id: identity.workspace_id }
          const stream = yield* CaptureStream
          const sql = yield* SqlClient.SqlClient
          // another transaction holds the agent's lock: the consumer's first batch waits for it
          const release = yield* holdAgentLock(scope, "agent-r")
          const waitedBefore = (yield* Metric.value(lockWait)).count
          yield* Layer.build(BuilderWorkers.pipe(Layer.provide(Layer.mergeAll(CaptureShards.single, ContentPolicies.layer))))
          const ids = yield* publish(Array.from({ length: 15 }, (_, i) =>
            captureJson(identity, { agent_id: "agent-r", started_at: T0 + i * MINUTE, variant: i })))

          // the batch waiting on the lock and the one read ahead: one batch ahead, no more
          yield* eventually("two batches delivered", Effect.map(stream.stats, (stats) => stats.pending === 10), 20)
          yield* Effect.sleep("300 millis")
          assert.strictEqual((yield* stream.stats).pending, 10)
          const count = sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions WHERE tenant_id = ${identity.tenant_id}`
          assert.strictEqual((yield* count)[0]!.n, 0)

          yield* release
          yield* eventually("all built and acknowledged", Effect.gen(function*() {
            return (yield* count)[0]!.n === 15 && (yield* stream.stats).pending === 0
          }), 20)
          // the wait shows on /metrics: contention between builders is visible to whoever scales them
          assert.isAtLeast((yield* Metric.value(lockWait)).count - waitedBefore, 0.3)
          // chained in the order published
          const chained = yield* sql<{ seq: string; created_at: Date }>`SELECT seq, created_at FROM decisions
            WHERE tenant_id = ${identity.tenant_id} ORDER BY seq`
          assert.deepStrictEqual(chained.map((row) => row.created_at.getTime()), ids.map((_, i) => T0 + i * MINUTE))
        }).pipe(Effect.scoped))
    }
  )
})

layer(builderStack("postgres", { builderBatchBytes: 256 * 1024 }), { timeout: 120_000, excludeTestServices: true })("decision builder, a capture larger than a batch", (it) => {
  it.effect("is dead-lettered with its size named; the rest of its batch is built", () =>
    Effect.gen(function*() {
      const identity = yield* newWorkspace()
      const small = Array.from({ length: 3 }, (_, i) => captureJson(identity, { agent_id: "agent-big", started_at: T0 + i * MINUTE, variant: i }))
      const large = JSON.stringify({ ...realisticCapture(identity, { agent_id: "agent-big", started_at: T0 + 5 * MINUTE }), request: "x".repeat(300 * 1024) })
      const outcome = yield* publishAndBuild([small[0]!, large, small[1]!, small[2]!])
      assert.deepStrictEqual(outcome, { built: 3, duplicates: 0, deadLettered: 1, released: 0 })
      const [letter] = yield* (yield* CaptureStream).listDeadLetters({ count: 10 })
      assert.match(letter!.reason, /^the capture is 0\.3 MB, more than one batch carries \(LEDGER_BUILDER_BATCH_MB=0\)/)
      assert.strictEqual(letter!.payload, large)
    }))
})
