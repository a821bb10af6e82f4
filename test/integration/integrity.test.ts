/**
 * The ledger proves itself, against real PostgreSQL: decisions built by the builder verify; each kind of tampering
 * done straight in the database is found and reported as what it is (altered decisions by id, gaps, a cut tail
 * against a checkpoint); a rebuild keeps the chain; one workspace's verification is blind to another's rows.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Rebuilder } from "../../src/builder/Rebuild.ts"
import { ChainBackfill } from "../../src/integrity/ChainBackfill.ts"
import { chainHasher } from "../../src/chain/chain.ts"
import { makeCheckpoint } from "../../src/integrity/checkpoint.ts"
import { IntegrityKeys } from "../../src/chain/IntegrityKeys.ts"
import { type ChainRow, factsOfRow, ROW_COLUMNS } from "../../src/integrity/rows.ts"
import { Verifier, type WorkspaceVerification } from "../../src/integrity/Verifier.ts"
import { builderStack, captureJson, chainedWorkspace, newWorkspace, publishAndBuild, T0 } from "./builder-harness.ts"

const verifyOne = (workspaceId: string, checkpoint?: Parameters<Verifier["Service"]["run"]>[0] extends infer O ? O extends { checkpoint?: infer C } ? C : never : never) =>
  Effect.gen(function*() {
    const verifier = yield* Verifier
    const result = yield* verifier.run({ workspace: workspaceId, checkpoint })
    assert.strictEqual(result.workspaces.length, 1)
    // cut into stretches of three, checked in threads of their own and joined: the same report
    const stretched = yield* verifier.run({ workspace: workspaceId, checkpoint, stretch: 3 })
    assert.deepStrictEqual(stretched.workspaces, result.workspaces)
    return { ok: result.ok, w: result.workspaces[0]! }
  })

/** The decision at `seq` in a workspace, read as the owner. */
const atSeq = (workspaceId: string, seq: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions WHERE workspace_id = ${workspaceId} AND seq = ${seq}`
    return row!.ledger_id
  })

const alteredIds = (w: WorkspaceVerification) => w.integrity.altered.map((a) => a.ledger_id).sort()

describe("integrity", () => {
  layer(Layer.mergeAll(Verifier.layer, Rebuilder.layer, ChainBackfill.layer).pipe(Layer.provideMerge(builderStack("postgres"))), {
    timeout: 120_000,
    excludeTestServices: true
  })("chain on PostgreSQL", (it) => {
    it.effect("decisions the builder stored verify: gapless seq, each hash linked to the one before", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(20)
        const rows = yield* sql<{ seq: string; prev_hash: Uint8Array; hash: Uint8Array }>`
          SELECT seq, prev_hash, hash FROM decisions WHERE workspace_id = ${workspace_id} ORDER BY seq`
        assert.deepStrictEqual(rows.map((row) => Number(row.seq)), Array.from({ length: 20 }, (_, i) => i + 1))
        for (let i = 1; i < rows.length; i++) assert.deepStrictEqual(Buffer.from(rows[i]!.prev_hash), Buffer.from(rows[i - 1]!.hash))
        const { ok, w } = yield* verifyOne(workspace_id)
        assert.isTrue(ok)
        assert.strictEqual(w.decisions, 20)
        assert.strictEqual(w.head_seq, 20)
        assert.deepStrictEqual([w.integrity.ok, w.completeness.ok], [true, true])
      }))

    it.effect("an updated decision is named by its ledger_id; so is a changed raw exchange", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(12)
        const [facts, raw] = [yield* atSeq(workspace_id, 4), yield* atSeq(workspace_id, 9)]
        yield* sql`UPDATE decisions SET model = 'gpt-4o-mini-cheaper', status = 200 WHERE ledger_id = ${facts}`
        yield* sql`UPDATE decisions SET raw_response = replace(raw_response, 'a', 'b') WHERE ledger_id = ${raw}`
        const { ok, w } = yield* verifyOne(workspace_id)
        assert.isFalse(ok)
        assert.isFalse(w.integrity.ok)
        assert.isTrue(w.completeness.ok)
        assert.deepStrictEqual(w.integrity.altered.map((a) => [a.ledger_id, a.reason]).sort(), [[facts, "hash"], [raw, "raw"]].sort())
      }))

    it.effect("a deleted middle row is a gap (completeness), not an alteration", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(10)
        yield* sql`DELETE FROM decisions WHERE ledger_id = ${yield* atSeq(workspace_id, 6)}`
        const { ok, w } = yield* verifyOne(workspace_id)
        assert.isFalse(ok)
        assert.isTrue(w.integrity.ok)
        assert.deepStrictEqual(w.completeness.gaps, [{ from: 6, to: 6 }])
        assert.strictEqual(w.completeness.missing, 1)
      }))

    it.effect("a cut tail is noticed against the recorded head, and against a checkpoint once the head is moved back too", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(10)
        const checkpoint = yield* makeCheckpoint()
        yield* sql`DELETE FROM decisions WHERE workspace_id = ${workspace_id} AND seq > 7`
        const byHead = yield* verifyOne(workspace_id)
        assert.isFalse(byHead.ok)
        assert.deepStrictEqual(byHead.w.completeness.tail, { expected_through: 10, found_through: 7, by: "head" })

        // a careful intruder also moves the head back to the new last decision: only the checkpoint knows better
        yield* sql`UPDATE ledger_chains c SET head_seq = 7, head_hash = d.hash FROM decisions d
          WHERE c.workspace_id = ${workspace_id} AND d.workspace_id = c.workspace_id AND d.seq = 7`
        const walked = yield* verifyOne(workspace_id)
        assert.isTrue(walked.ok, "walking the chain alone cannot see a cut tail")
        const against = yield* verifyOne(workspace_id, checkpoint)
        assert.isFalse(against.ok)
        assert.isTrue(against.w.integrity.ok)
        assert.deepStrictEqual(against.w.completeness.tail, { expected_through: 10, found_through: 7, by: "checkpoint" })
        assert.deepStrictEqual(against.w.checkpoint, { seq: 10, matches: false })
      }))

    it.effect("reordered sequence numbers name both decisions", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(10)
        const [a, b] = [yield* atSeq(workspace_id, 3), yield* atSeq(workspace_id, 8)]
        yield* sql`UPDATE decisions SET seq = CASE WHEN ledger_id = ${a} THEN 8 ELSE 3 END WHERE ledger_id IN (${a}, ${b})`
        const { ok, w } = yield* verifyOne(workspace_id)
        assert.isFalse(ok)
        assert.deepStrictEqual(alteredIds(w), [a, b].sort())
        assert.isTrue(w.completeness.ok)
      }))

    it.effect("a hash forged without the key is found: the facts changed and rehashed with another key", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id, tenant_id } = yield* chainedWorkspace(6)
        const id = yield* atSeq(workspace_id, 5)
        // the intruder knows the encoding (it is documented) but not the key
        const keys = yield* IntegrityKeys
        yield* sql`UPDATE decisions SET status = 500 WHERE ledger_id = ${id}`
        const [row] = yield* sql<ChainRow>`SELECT ${sql.literal(ROW_COLUMNS)} FROM decisions WHERE ledger_id = ${id}`
        const forged = chainHasher(Crypto.randomBytes(32))(factsOfRow({ tenant_id, workspace_id }, row!), Buffer.from(row!.prev_hash!), Buffer.from(row!.raw_hash!))
        // with the real key, the same facts would verify: only the key is missing
        assert.isFalse(forged.equals(keys.current.hash(factsOfRow({ tenant_id, workspace_id }, row!), Buffer.from(row!.prev_hash!), Buffer.from(row!.raw_hash!))))
        yield* sql`UPDATE decisions SET hash = ${forged} WHERE ledger_id = ${id}`
        const { ok, w } = yield* verifyOne(workspace_id)
        assert.isFalse(ok)
        assert.deepStrictEqual(w.integrity.altered.map((a) => [a.ledger_id, a.reason]), [[id, "hash"]])
      }))

    it.effect("after ledger rebuild the chain still verifies (derived fields are outside it)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(8)
        yield* sql`UPDATE decisions SET title = 'stale', derivation = '{}'::jsonb, quality = 0 WHERE workspace_id = ${workspace_id}`
        const rebuilt = yield* (yield* Rebuilder).run()
        assert.isAbove(rebuilt.changed, 7)
        assert.isTrue((yield* verifyOne(workspace_id)).ok)
      }))

    it.effect("decisions stored before chaining join the chain when the builder starts, after any head already there", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { workspace_id } = yield* chainedWorkspace(9)
        // as before chaining: no seq, no hashes, no chain row
        yield* sql`UPDATE decisions SET seq = NULL, prev_hash = NULL, hash = NULL, raw_hash = NULL, chain_key = NULL
          WHERE workspace_id = ${workspace_id}`
        yield* sql`DELETE FROM ledger_chains WHERE workspace_id = ${workspace_id}`
        const before = yield* verifyOne(workspace_id)
        assert.isFalse(before.w.integrity.ok)
        assert.strictEqual(before.w.integrity.altered_total, 9)
        assert.isTrue(before.w.integrity.altered.every((a) => a.reason === "unchained"))

        assert.isAtLeast(yield* (yield* ChainBackfill).run, 9)
        const after = yield* verifyOne(workspace_id)
        assert.isTrue(after.ok)
        assert.strictEqual(after.w.head_seq, 9)

        // unchained rows recorded earlier than the head are placed after it, their recorded_at raised to the head's
        yield* sql`UPDATE decisions SET seq = NULL, prev_hash = NULL, hash = NULL, raw_hash = NULL, chain_key = NULL,
          recorded_at = recorded_at - interval '1 day' WHERE workspace_id = ${workspace_id} AND seq > 6`
        yield* sql`UPDATE ledger_chains c SET head_seq = 6, head_hash = d.hash FROM decisions d
          WHERE c.workspace_id = ${workspace_id} AND d.workspace_id = c.workspace_id AND d.seq = 6`
        yield* (yield* ChainBackfill).run
        assert.isTrue((yield* verifyOne(workspace_id)).ok)
        const [order] = yield* sql<{ monotonic: boolean }>`SELECT bool_and(recorded_at >= prev_at) AS monotonic FROM (
          SELECT recorded_at, lag(recorded_at) OVER (ORDER BY seq) AS prev_at FROM decisions WHERE workspace_id = ${workspace_id}) x
          WHERE prev_at IS NOT NULL`
        assert.isTrue(order!.monotonic)
      }))

    it.effect("text Postgres stores differently from how it was sent (NUL, a lone surrogate) is chained as stored", () =>
      Effect.gen(function*() {
        const identity = yield* newWorkspace("odd-text")
        const capture = JSON.parse(captureJson(identity, { agent_id: "odd", started_at: T0, variant: 0 }))
        yield* publishAndBuild([JSON.stringify({ ...capture, model: "gpt-4o\u0000-\ud800", request: capture.request.replace("{", "{\"note\":\"\u0000\ud83d\",") })])
        const { ok, w } = yield* verifyOne(identity.workspace_id)
        assert.strictEqual(w.decisions, 1)
        assert.isTrue(ok)
      }))

    it.effect("isolation: each workspace has its own chain, and verifying one is blind to another's tampering", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [a, b] = [yield* chainedWorkspace(5), yield* chainedWorkspace(5)]
        const seqs = yield* sql<{ workspace_id: string; seqs: string }>`SELECT workspace_id, string_agg(seq::text, ',' ORDER BY seq) AS seqs
          FROM decisions WHERE workspace_id IN (${a.workspace_id}, ${b.workspace_id}) GROUP BY workspace_id`
        assert.deepStrictEqual(seqs.map((row) => row.seqs), ["1,2,3,4,5", "1,2,3,4,5"])
        yield* sql`UPDATE decisions SET model = 'x' WHERE workspace_id = ${b.workspace_id}`
        yield* sql`DELETE FROM decisions WHERE workspace_id = ${b.workspace_id} AND seq = 2`
        const one = yield* verifyOne(a.workspace_id)
        assert.isTrue(one.ok)
        assert.strictEqual(one.w.decisions, 5)
        const other = yield* verifyOne(b.workspace_id)
        assert.isFalse(other.ok)
        assert.strictEqual(other.w.integrity.altered_total, 4)
      }))
  })
})
