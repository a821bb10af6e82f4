/**
 * Deletion requests on PostgreSQL (`ledger erase`, src/integrity/Eraser.ts): the erased decisions lose their content —
 * raw exchange, title, every text of the derivation, the search rows, postings and prints analytics made of them, the
 * summaries of their sessions — and keep their chained facts and hashes, so `ledger verify` still holds under the
 * signed audit event; a tombstone whose event is forged, altered, another workspace's or missing is reported as an
 * erasure. By agent, by user (in every tenant that has the email) and by date; other workspaces untouched.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { TEMPLATE_COUNT } from "../../bench/ingest/captures.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ModelCalls } from "../../src/analytics/ModelCalls.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { Decision } from "../../src/domain/decision.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { Eraser, type ErasureCriteria, ErasureCriteriaInvalid, ErasureUserUnknown } from "../../src/integrity/Eraser.ts"
import { erasureCriteria } from "../../src/integrity/eraseCommand.ts"
import { IntegrityKeys } from "../../src/chain/IntegrityKeys.ts"
import { Verifier } from "../../src/integrity/Verifier.ts"
import { UnknownWorkspace } from "../../src/integrity/workspaces.ts"
import { getDecision } from "../../src/mcp/tools/get_decision.ts"
import { callTool } from "../../src/mcp/tools/Tool.ts"
import { LedgerQueryLive } from "../../src/query/ReadModel.ts"
import { builderStack, captureJson, holdAgentLock, MINUTE, publishAndBuild, T0 } from "./builder-harness.ts"
import { POSTING_ROWS } from "../support/postings.ts"

interface Member {
  readonly tenant: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly key_id: string
}

/** Members of workspace "ops" of a new tenant (or of `tenant`), by email. */
const members = (emails: ReadonlyArray<string>, tenant = `erase-${Crypto.randomBytes(4).toString("hex")}`) =>
  Effect.forEach(emails, (email) =>
    Credentials.use((credentials) => credentials.bootstrap({ tenant, workspace: "ops", email, role: "member" })).pipe(
      Effect.map((boot): Member => ({ tenant, tenant_id: boot.tenant_id, workspace_id: boot.workspace_id, user_id: boot.user_id, key_id: Crypto.randomUUID() }))
    ))

/** `count` calls of `agent` made with the member's key, a minute apart from `start`, built by the builder. */
const calls = (member: Member, agent: string, count: number, start = T0) =>
  publishAndBuild(Array.from({ length: count }, (_, i) =>
    captureJson(member, { agent_id: agent, started_at: start + i * MINUTE, variant: i % TEMPLATE_COUNT })))

interface StoredDecision {
  readonly ledger_id: string
  readonly agent_id: string
  readonly user_id: string
  readonly session_id: string
  readonly raw_request: string
  readonly raw_response: string | null
  readonly raw_context: string | null
  readonly error: unknown
  readonly title: string
  readonly subjects: unknown
  readonly derivation: any
  readonly erasure_id: string | null
  /** the chain's columns and the facts it covers, as text: equal before and after an erasure */
  readonly chained: string
}

const decisionsOf = (workspaceId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<StoredDecision>`SELECT ledger_id::text AS ledger_id, agent_id, user_id::text AS user_id,
        session_id::text AS session_id, raw_request, raw_response, raw_context, error, title, subjects, derivation,
        erasure_id::text AS erasure_id,
        concat_ws('|', seq, encode(prev_hash, 'hex'), encode(hash, 'hex'), encode(raw_hash, 'hex'), chain_key, recorded_at,
          created_at, captured_at, user_id, key_id, agent_id, execution_id, provider, model, api, status, aborted, latency_ms,
          usage, response_id, previous_response_id, capture_version, source) AS chained
      FROM decisions WHERE workspace_id = ${workspaceId}::uuid ORDER BY seq`
  })

const verify = (workspaceId: string) =>
  Effect.gen(function*() {
    const result = yield* (yield* Verifier).run({ workspace: workspaceId })
    return { ok: result.ok, altered: result.workspaces[0]!.integrity.altered.map((a) => [a.ledger_id, a.reason]) }
  })

const erase = (criteria: ErasureCriteria, workspace?: string, pageSize?: number) =>
  Eraser.use((eraser) => eraser.erase({ criteria, workspace, pageSize }))

const isErased = (d: StoredDecision) =>
  d.raw_request === "" && d.raw_response === null && d.raw_context === null && d.error === null && d.title === "" &&
  JSON.stringify(d.subjects) === "[]" && d.derivation.title === "" && d.derivation.intent_reason === "" &&
  ["logic_trace", "evidence", "findings", "artifacts"].every((part) => d.derivation[part].length === 0) &&
  d.derivation.quality.reasons.length === 0 && d.derivation.confidence.reasons.length === 0 &&
  typeof d.derivation.quality.value === "number" && typeof d.derivation.outcome === "string"

/** Each term's document count equals its postings in the workspace (what similarity search relies on). */
const termCountsHold = (workspaceId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM
      (SELECT lexeme, doc_count FROM search_terms WHERE workspace_id = ${workspaceId}::uuid) t
      FULL JOIN (SELECT lexeme, count(*) AS c FROM ${sql.literal(POSTING_ROWS)} p WHERE workspace_id = ${workspaceId}::uuid GROUP BY lexeme) p
        ON p.lexeme = t.lexeme
      WHERE coalesce(t.doc_count, 0) <> coalesce(p.c, 0)`
    return row!.n === 0
  })

const Analytics = Materializer.layer.pipe(Layer.provide(ModelCalls.layer))

describe("erasure", () => {
  layer(Layer.mergeAll(Verifier.layer, Eraser.layer, Analytics, LedgerQueryLive).pipe(Layer.provideMerge(builderStack("postgres"))), {
    timeout: 120_000,
    excludeTestServices: true
  })("ledger erase on PostgreSQL", (it) => {
    it.effect("by agent: content and what analytics made of it gone, the chain untouched and verified, other workspaces kept", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [ann] = yield* members(["ann@example.test"])
        const [other] = yield* members(["olga@example.test"])
        yield* calls(ann!, "agent-a", 6)
        yield* calls(ann!, "agent-b", 6)
        yield* calls(other!, "agent-a", 4)
        yield* Materializer.use((m) => m.catchUp)
        const before = yield* decisionsOf(ann!.workspace_id)
        const otherBefore = yield* decisionsOf(other!.workspace_id)
        const erasedIds = before.filter((d) => d.agent_id === "agent-a").map((d) => d.ledger_id)
        const keptIds = before.filter((d) => d.agent_id === "agent-b").map((d) => d.ledger_id)
        const [postings] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(POSTING_ROWS)} p WHERE ledger_id = ANY(${erasedIds}::uuid[])`
        assert.isAbove(postings!.n, 0)
        assert.isTrue(yield* termCountsHold(ann!.workspace_id))
        const [rollup] = yield* sql<{ n: number }>`SELECT sum(decisions)::int AS n FROM hourly_rollups WHERE workspace_id = ${ann!.workspace_id}::uuid`
        // a loop insight quotes its first decision's title; a hand-off links an erased decision to a kept one
        const quoted = before.find((d) => d.ledger_id === erasedIds[0])!.title
        assert.notStrictEqual(quoted, "")
        yield* sql`INSERT INTO insights (insight_id, tenant_id, workspace_id, dedup_key, type, severity, title, evidence,
            window_start, window_end, agent_ids, session_ids, ledger_ids)
          VALUES (${Crypto.randomUUID()}, ${ann!.tenant_id}, ${ann!.workspace_id}, 'loop:test', 'loop', 'warning',
            ${`Loop: agent-a made the same call 4 times in 3 min (“${quoted}”)`}, '{}', now(), now(), '{agent-a}', '{}', ${erasedIds.slice(0, 4)})`
        yield* sql`INSERT INTO handoffs (tenant_id, workspace_id, producer_ledger_id, consumer_ledger_id, producer_agent, consumer_agent, shared_lines, at)
          VALUES (${ann!.tenant_id}, ${ann!.workspace_id}, ${keptIds[0]!}, ${erasedIds[1]!}, 'agent-b', 'agent-a', 2, now())`

        const result = yield* erase({ kind: "agent", agent_id: "agent-a" }, `${ann!.tenant}/ops`)
        assert.strictEqual(result.erased, 6)
        assert.strictEqual(result.workspaces.length, 1)
        const [done] = result.workspaces
        assert.deepInclude(done, { tenant: ann!.tenant, workspace: "ops", workspace_id: ann!.workspace_id, decisions: 6 })

        // the decisions: content gone, chained columns and facts as they were
        const after = yield* decisionsOf(ann!.workspace_id)
        assert.deepStrictEqual(after.map((d) => d.chained), before.map((d) => d.chained))
        for (const d of after) {
          if (d.agent_id === "agent-a") {
            assert.isTrue(isErased(d), `${d.ledger_id} is a tombstone`)
            assert.strictEqual(d.erasure_id, done!.event_id)
          } else {
            assert.deepStrictEqual(d, before.find((b) => b.ledger_id === d.ledger_id))
          }
        }

        // the signed event
        const keys = yield* IntegrityKeys
        const [event] = yield* sql<{ kind: string; detail: unknown; chain_key: number; tenant_id: string }>`
          SELECT kind, detail, chain_key, tenant_id::text AS tenant_id FROM ledger_audit_events WHERE event_id = ${done!.event_id}::uuid`
        assert.deepStrictEqual(event, { kind: "erase", detail: { criteria: { agent: "agent-a" }, decisions: 6 }, chain_key: keys.current.id, tenant_id: ann!.tenant_id })
        assert.deepStrictEqual(yield* verify(ann!.workspace_id), { ok: true, altered: [] })

        // analytics: search rows blank, postings, prints and hand-offs gone, term counts still right, titles unquoted
        const [search] = yield* sql<{ rows: number; worded: number }>`SELECT count(*)::int AS rows,
            (count(*) FILTER (WHERE length(document) > 0 OR embedding IS NOT NULL OR call_signature <> ''
              OR local_vector <> array_fill(0::real, ARRAY[256])))::int AS worded
          FROM decision_search WHERE ledger_id = ANY(${erasedIds}::uuid[])`
        assert.deepStrictEqual(search, { rows: 6, worded: 0 })
        const [left] = yield* sql<{ postings: number; prints: number; handoffs: number; kept: number }>`SELECT
          (SELECT count(*) FROM ${sql.literal(POSTING_ROWS)} p WHERE ledger_id = ANY(${erasedIds}::uuid[]))::int AS postings,
          (SELECT count(*) FROM decision_prints WHERE ledger_id = ANY(${erasedIds}::uuid[]))::int AS prints,
          (SELECT count(*) FROM handoffs WHERE workspace_id = ${ann!.workspace_id}::uuid)::int AS handoffs,
          (SELECT count(*) FROM ${sql.literal(POSTING_ROWS)} p WHERE ledger_id = ANY(${keptIds}::uuid[]))::int AS kept`
        assert.deepInclude(left, { postings: 0, prints: 0, handoffs: 0 })
        assert.isAbove(left!.kept, 0)
        assert.isTrue(yield* termCountsHold(ann!.workspace_id))
        const [insight] = yield* sql<{ title: string }>`SELECT title FROM insights WHERE workspace_id = ${ann!.workspace_id}::uuid`
        assert.strictEqual(insight!.title, "Loop: agent-a made the same call 4 times in 3 min")
        const sessions = yield* sql<{ agent_id: string; summary: string; first_title: string }>`SELECT agent_id, summary, first_title
          FROM sessions WHERE workspace_id = ${ann!.workspace_id}::uuid`
        assert.isTrue(sessions.filter((s) => s.agent_id === "agent-a").every((s) => s.summary === "" && s.first_title === ""))
        assert.isTrue(sessions.filter((s) => s.agent_id === "agent-b").every((s) => s.summary !== "" && s.first_title !== ""))

        // the materialiser sees the tombstones move (built_at) and counts nothing twice
        yield* Materializer.use((m) => m.catchUp)
        const [recounted] = yield* sql<{ n: number }>`SELECT sum(decisions)::int AS n FROM hourly_rollups WHERE workspace_id = ${ann!.workspace_id}::uuid`
        assert.strictEqual(recounted!.n, rollup!.n)
        const [still] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM decision_search
          WHERE ledger_id = ANY(${erasedIds}::uuid[]) AND length(document) > 0`
        assert.strictEqual(still!.n, 0)

        // the other tenant's agent-a, outside --workspace, is untouched
        assert.deepStrictEqual(yield* decisionsOf(other!.workspace_id), otherBefore)
        const [events] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_audit_events WHERE workspace_id = ${other!.workspace_id}::uuid`
        assert.strictEqual(events!.n, 0)

        // erasing again matches nothing: no event
        assert.deepStrictEqual(yield* erase({ kind: "agent", agent_id: "agent-a" }, ann!.workspace_id), { erased: 0, workspaces: [] })
        const [total] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_audit_events WHERE workspace_id = ${ann!.workspace_id}::uuid`
        assert.strictEqual(total!.n, 1)
      }))

    it.effect("get_decision on a tombstone answers, with its labels and scores and no content (the REST body validates)", () =>
      Effect.gen(function*() {
        const [ann] = yield* members(["ann@example.test"])
        yield* calls(ann!, "agent-a", TEMPLATE_COUNT)
        yield* erase({ kind: "agent", agent_id: "agent-a" }, ann!.workspace_id)
        const principal: Principal = {
          tenant_id: ann!.tenant_id,
          workspace_id: ann!.workspace_id,
          user_id: ann!.user_id,
          role: "member",
          kind: "pat",
          token_id: Crypto.randomUUID()
        }
        // every call shape, the failed ones (error emptied) included
        for (const stored of yield* decisionsOf(ann!.workspace_id)) {
          const { result, error } = yield* callTool(getDecision, principal, { ledger_id: stored.ledger_id })
          assert.isUndefined(error)
          assert.isUndefined(result.isError)
          const decision = result.structuredContent as unknown as Decision
          yield* Schema.encodeUnknownEffect(Decision)(decision)
          assert.strictEqual(decision.title, "")
          assert.strictEqual(decision.error, null)
          assert.deepStrictEqual([decision.logic_trace, decision.evidence, decision.findings, decision.artifacts], [[], [], [], []])
          assert.strictEqual(decision.quality, decision.quality_detail.value)
          assert.isNotNull(decision.integrity)
          assert.include((result.content[0] as { text: string }).text, `Decision ${stored.ledger_id}`)
        }
      }))

    it.effect("verify names a tombstone whose event is forged, altered, another workspace's or missing (reason erasure)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [ann] = yield* members(["ann@example.test"])
        const [other] = yield* members(["olga@example.test"])
        yield* calls(ann!, "agent-a", 3)
        yield* calls(ann!, "agent-b", 4)
        yield* calls(other!, "agent-a", 2)
        const { workspaces: [erased] } = yield* erase({ kind: "agent", agent_id: "agent-a" }, ann!.workspace_id)
        const { workspaces: [elsewhere] } = yield* erase({ kind: "agent", agent_id: "agent-a" }, other!.workspace_id)
        assert.isTrue((yield* verify(ann!.workspace_id)).ok)

        // an intruder empties decisions by hand, pointing them at a forged event, another workspace's, and none
        const kept = (yield* decisionsOf(ann!.workspace_id)).filter((d) => d.agent_id === "agent-b").map((d) => d.ledger_id)
        const forged = Crypto.randomUUID()
        yield* sql`INSERT INTO ledger_audit_events (event_id, tenant_id, workspace_id, kind, at, detail, chain_key, mac)
          VALUES (${forged}, ${ann!.tenant_id}, ${ann!.workspace_id}, 'erase', now(), '{"criteria":{"agent":"agent-b"},"decisions":1}',
            ${(yield* IntegrityKeys).current.id}, ${Crypto.randomBytes(32)})`
        const pointAt = (ledgerId: string, eventId: string) =>
          sql`UPDATE decisions SET raw_request = '', raw_response = NULL, erasure_id = ${eventId}::uuid WHERE ledger_id = ${ledgerId}::uuid`
        yield* pointAt(kept[0]!, forged)
        yield* pointAt(kept[1]!, elsewhere!.event_id)
        yield* pointAt(kept[2]!, Crypto.randomUUID())
        const tampered = yield* verify(ann!.workspace_id)
        assert.isFalse(tampered.ok)
        assert.deepStrictEqual(tampered.altered.sort(), kept.slice(0, 3).map((id) => [id, "erasure"]).sort())

        // altering the genuine event (its count) breaks its signature: its tombstones are named too
        yield* sql`UPDATE ledger_audit_events SET detail = jsonb_set(detail, '{decisions}', '1') WHERE event_id = ${erased!.event_id}::uuid`
        const altered = yield* verify(ann!.workspace_id)
        const tombstones = (yield* decisionsOf(ann!.workspace_id)).filter((d) => d.agent_id === "agent-a").map((d) => d.ledger_id)
        assert.deepStrictEqual(altered.altered.sort(), [...kept.slice(0, 3), ...tombstones].map((id) => [id, "erasure"]).sort())
        // content removed without any erasure id is a changed raw exchange
        yield* sql`UPDATE decisions SET raw_request = '' WHERE ledger_id = ${kept[3]!}::uuid`
        assert.deepInclude((yield* verify(ann!.workspace_id)).altered, [kept[3]!, "raw"])
        assert.isTrue((yield* verify(other!.workspace_id)).ok)
      }))

    it.effect("by date: decisions created before it, in pages (ties in time across them) under one event; later ones kept", () =>
      Effect.gen(function*() {
        const [ann] = yield* members(["ann@example.test"])
        // two agents calling at the same moments: pages of 3 split decisions created at the same time
        yield* calls(ann!, "agent-a", 10)
        yield* calls(ann!, "agent-b", 10)
        const cut = new Date(T0 + 5 * MINUTE)
        const result = yield* erase({ kind: "before", before: cut }, ann!.workspace_id, 3)
        assert.strictEqual(result.erased, 10)
        const event = result.workspaces[0]!.event_id
        const sql = yield* SqlClient.SqlClient
        const stored = yield* sql<{ created_at: Date; erasure_id: string | null }>`SELECT created_at, erasure_id::text AS erasure_id
          FROM decisions WHERE workspace_id = ${ann!.workspace_id}::uuid ORDER BY created_at`
        assert.deepStrictEqual(stored.map((d) => d.erasure_id), [...Array(10).fill(event), ...Array(10).fill(null)])
        assert.isTrue(stored.slice(0, 10).every((d) => d.created_at < cut) && stored.slice(10).every((d) => d.created_at >= cut))
        const [{ detail }] = yield* sql<{ detail: unknown }>`SELECT detail FROM ledger_audit_events WHERE event_id = ${event}::uuid`
        assert.deepStrictEqual(detail, { criteria: { before: cut.toISOString() }, decisions: 10 })
        assert.deepStrictEqual(yield* verify(ann!.workspace_id), { ok: true, altered: [] })
      }))

    it.effect("an erasure waits for a builder holding the agent's lock, so the batch cannot write an erased title back", () =>
      Effect.gen(function*() {
        const [ann] = yield* members(["ann@example.test"])
        yield* calls(ann!, "agent-a", 2)
        const scope = { tenant_id: ann!.tenant_id, workspace_id: ann!.workspace_id }
        // a builder's batch over agent-a: its transaction holds the agent's lock from the start to commit
        const release = yield* holdAgentLock(scope, "agent-a")
        const erasing = yield* Effect.forkChild(erase({ kind: "agent", agent_id: "agent-a" }, ann!.workspace_id))
        yield* Effect.sleep("700 millis")
        assert.isUndefined(erasing.pollUnsafe(), "the erasure waits for the batch")
        yield* release
        assert.strictEqual((yield* Fiber.join(erasing)).erased, 2)
      }))

    it.effect("by user: in each tenant that has the email, under its user id (never the email); other users kept", () =>
      Effect.gen(function*() {
        const email = `dana-${Crypto.randomBytes(4).toString("hex")}@example.test`
        const [dana, bert] = yield* members([email, "bert@example.test"])
        const [danaElsewhere] = yield* members([email.toUpperCase()])
        yield* calls(dana!, "agent-a", 3)
        yield* calls(bert!, "agent-a", 3, T0 + 10 * MINUTE)
        yield* calls(danaElsewhere!, "agent-z", 2)
        const result = yield* erase({ kind: "user", email })
        assert.strictEqual(result.erased, 5)
        assert.sameMembers(result.workspaces.map((w) => [w.workspace_id, w.decisions].join(":")), [`${dana!.workspace_id}:3`, `${danaElsewhere!.workspace_id}:2`])
        const sql = yield* SqlClient.SqlClient
        for (const member of [dana!, danaElsewhere!]) {
          const [{ detail }] = yield* sql<{ detail: unknown }>`SELECT detail FROM ledger_audit_events WHERE workspace_id = ${member.workspace_id}::uuid`
          assert.deepStrictEqual(detail, { criteria: { user: member.user_id }, decisions: member === dana ? 3 : 2 })
          assert.notInclude(JSON.stringify(detail).toLowerCase(), email)
          assert.isTrue((yield* verify(member.workspace_id)).ok)
        }
        const shared = yield* decisionsOf(dana!.workspace_id)
        assert.isTrue(shared.filter((d) => d.user_id === dana!.user_id).every(isErased))
        assert.isTrue(shared.filter((d) => d.user_id === bert!.user_id).every((d) => d.erasure_id === null && d.raw_request !== ""))
      }))

    it.effect("criteria: exactly one, a strict ISO date; an unknown user or workspace is refused", () =>
      Effect.gen(function*() {
        const refused = (flags: Parameters<typeof erasureCriteria>[0]) => Effect.flip(erasureCriteria(flags))
        assert.include((yield* refused({})).message, "--agent ID, --user EMAIL or --before DATE")
        assert.include((yield* refused({ agent: "a", before: "2025-01-01" })).message, "not --agent and --before")
        for (const bad of ["yesterday", "2025-02-30", "2025-11-03T25:00", "2025-11-03 09:00", "1730000000"]) {
          const error = yield* refused({ before: bad })
          assert.instanceOf(error, ErasureCriteriaInvalid)
          assert.include(error.message, "--before")
        }
        const before = (text: string) =>
          erasureCriteria({ before: text }).pipe(Effect.map((c) => (c.kind === "before" ? c.before.toISOString() : "")))
        assert.strictEqual(yield* before("2025-11-03"), "2025-11-03T00:00:00.000Z")
        assert.strictEqual(yield* before("2025-11-03T09:30"), "2025-11-03T09:30:00.000Z")
        assert.strictEqual(yield* before("2025-11-03T09:30:15.250+02:00"), "2025-11-03T07:30:15.250Z")
        assert.deepStrictEqual(yield* erasureCriteria({ user: " dana@example.test " }), { kind: "user", email: "dana@example.test" })

        assert.instanceOf(yield* Effect.flip(erase({ kind: "user", email: "nobody@example.test" })), ErasureUserUnknown)
        assert.instanceOf(yield* Effect.flip(erase({ kind: "agent", agent_id: "a" }, "no-such-workspace")), UnknownWorkspace)
      }))
  })
})
