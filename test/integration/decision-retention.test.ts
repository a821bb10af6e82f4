/**
 * Decisions kept by whole partitions, on PostgreSQL and embedded PGlite: upkeep creates this month's and the next two
 * months' partitions once (two processes at once included), none of them open to the runtime roles directly; pruning
 * drops a partition older than the retention, marks every chain where it now starts (the verifier starts there and
 * checks the marker's signature) and deletes what analytics derived from the dropped decisions; the legacy partition
 * goes whole once its bound is old enough.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TEMPLATE_COUNT } from "../../bench/ingest/captures.ts"
import { sameDigest } from "../../src/chain/chain.ts"
import { IntegrityKeys } from "../../src/chain/IntegrityKeys.ts"
import { pruneMacText } from "../../src/integrity/markers.ts"
import { DecisionRetention } from "../../src/integrity/DecisionRetention.ts"
import { Verifier } from "../../src/integrity/Verifier.ts"
import type { Backend } from "../support/stack.ts"
import { POSTING_ROWS } from "../support/postings.ts"
import { builderStack, captureJson, chainedWorkspace, MINUTE, newWorkspace, publishAndBuild, T0 } from "./builder-harness.ts"

const DAY = 86_400_000

const verifyOne = (workspaceId: string) =>
  Effect.gen(function*() {
    const result = yield* (yield* Verifier).run({ workspace: workspaceId })
    return { ok: result.ok, w: result.workspaces[0]! }
  })

const monthName = (month: number) => {
  const date = new Date(month)
  return `decisions_${date.getUTCFullYear()}_${String(date.getUTCMonth() + 1).padStart(2, "0")}`
}
const monthStart = (at: number, offset: number) => Date.UTC(new Date(at).getUTCFullYear(), new Date(at).getUTCMonth() + offset, 1)

/** A clock standing at `at` (time passing for what reads it), sleeping as the live one does. */
const clockAt = (at: number, live: Clock.Clock): Clock.Clock => ({
  currentTimeMillisUnsafe: () => at,
  currentTimeMillis: Effect.succeed(at),
  currentTimeNanosUnsafe: () => BigInt(at) * 1_000_000n,
  currentTimeNanos: Effect.succeed(BigInt(at) * 1_000_000n),
  monotonicTimeNanosUnsafe: () => live.monotonicTimeNanosUnsafe(),
  monotonicTimeNanos: live.monotonicTimeNanos,
  sleep: (duration) => live.sleep(duration)
})

/** The legacy partition's upper bound (the first monthly partition's lower one). */
const legacyBound = Effect.gen(function*() {
  const legacy = (yield* (yield* DecisionRetention).partitions).find((p) => p.name === "decisions_legacy")
  return legacy!.to!
})

/** Search rows, postings ('shared' in all, 'old' up to seq `k`, 'new' after), term counts, prints and two hand-offs. */
const derivedRows = (workspaces: ReadonlyArray<string>, k: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO decision_search (ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, document,
        local_vector, call_signature)
      SELECT ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, to_tsvector('simple', title), '{}'::real[], 'sig'
      FROM decisions WHERE workspace_id IN ${sql.in(workspaces)}`
    // blocks of three decisions by seq: some of them straddle the cut, and keep their newer entries
    yield* sql`INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
      SELECT tenant_id, workspace_id, l, max(created_at), min(created_at), (array_agg(ledger_id ORDER BY created_at DESC, ledger_id DESC))[1],
        array_agg(ledger_id ORDER BY created_at DESC, ledger_id DESC), array_agg(created_at ORDER BY created_at DESC, ledger_id DESC)
      FROM decisions, unnest(ARRAY['shared', CASE WHEN seq <= ${k} THEN 'old' ELSE 'new' END]) AS l
      WHERE workspace_id IN ${sql.in(workspaces)}
      GROUP BY tenant_id, workspace_id, l, seq / 3`
    yield* sql`INSERT INTO search_terms (tenant_id, workspace_id, lexeme, doc_count)
      SELECT tenant_id, workspace_id, lexeme, count(*) FROM ${sql.literal(POSTING_ROWS)} p WHERE workspace_id IN ${sql.in(workspaces)} GROUP BY 1, 2, 3`
    yield* sql`INSERT INTO decision_prints (tenant_id, workspace_id, direction, print, ledger_id, agent_id, created_at)
      SELECT tenant_id, workspace_id, 'out', 'print-' || seq, ledger_id, agent_id, created_at FROM decisions
      WHERE workspace_id IN ${sql.in(workspaces)}`
    // one hand-off from a decision that goes to one that stays, one between two that stay
    yield* sql`INSERT INTO handoffs (tenant_id, workspace_id, producer_ledger_id, consumer_ledger_id, producer_agent, consumer_agent,
        shared_lines, at)
      SELECT p.tenant_id, p.workspace_id, p.ledger_id, c.ledger_id, p.agent_id, c.agent_id, 3, c.created_at
      FROM decisions p JOIN decisions c ON c.workspace_id = p.workspace_id
      WHERE p.workspace_id IN ${sql.in(workspaces)} AND ((p.seq = ${k - 1} AND c.seq = ${k + 2}) OR (p.seq = ${k + 2} AND c.seq = ${k + 3}))`
  })

const suite = (backend: Backend) =>
  layer(Layer.mergeAll(Verifier.layer, DecisionRetention.layer).pipe(Layer.provideMerge(builderStack(backend))), {
    timeout: 120_000,
    excludeTestServices: true
  })(`decision retention (${backend})`, (it) => {
    it.effect("upkeep: partitions for this month and the next two after the legacy bound, made once, closed to the runtime roles", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const retention = yield* DecisionRetention
        const now = yield* Clock.currentTimeMillis
        const bound = (yield* legacyBound).getTime()

        const created = yield* retention.upkeep
        const expected = [0, 1, 2].map((i) => monthStart(now, i)).filter((month) => monthStart(month, 1) > bound).map(monthName)
        assert.deepStrictEqual(created, expected)
        assert.include(created, monthName(monthStart(now, 2)))
        assert.deepStrictEqual(yield* retention.upkeep, [], "nothing missing the second time")
        // one range, without gaps, to the end of the month after next
        const partitions = yield* retention.partitions
        assert.strictEqual(partitions[0]!.from, null)
        for (let i = 1; i < partitions.length; i++) assert.strictEqual(partitions[i]!.from!.getTime(), partitions[i - 1]!.to!.getTime())
        assert.strictEqual(partitions.at(-1)!.to!.getTime(), monthStart(now, 3))

        // two processes at once: the newest partition is made by one of them, the other finds it there
        const newest = monthName(monthStart(now, 2))
        yield* sql`DROP TABLE ${sql(newest)}`
        const both = yield* Effect.all([retention.upkeep, retention.upkeep], { concurrency: 2 })
        assert.deepStrictEqual(both.flat(), [newest])

        // the builder role's layer makes them before it is up
        yield* sql`DROP TABLE ${sql(newest)}`
        yield* Effect.scoped(Layer.build(DecisionRetention.maintained))
        assert.strictEqual((yield* retention.partitions).at(-1)!.name, newest)

        // partitions carry the parent's indexes; the runtime roles reach rows only through `decisions`
        const [indexes] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = ${newest}`
        const [parent] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_partitioned_table p
          JOIN pg_class c ON c.oid = p.partrelid JOIN pg_index i ON i.indrelid = c.oid WHERE c.relname = 'decisions'`
        assert.strictEqual(indexes!.n, parent!.n)
        for (const role of ["ledger_reader", "ledger_builder"]) {
          const denied = yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`SELECT set_config('role', ${role}, true)`
            return yield* sql`SELECT 1 FROM ${sql(newest)} LIMIT 1`
          })).pipe(Effect.flip)
          assert.strictEqual((denied.reason.cause as { readonly code?: unknown }).code, "42501", role)
        }
      }))

    it.effect("prune: a partition older than the retention is dropped; each chain starts after its signed marker; derived rows go", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const retention = yield* DecisionRetention
        const keys = yield* IntegrityKeys
        const [a, b] = [yield* chainedWorkspace(8, "retention"), yield* chainedWorkspace(8, "retention")]
        const ids = [a.workspace_id, b.workspace_id]
        const k = 3
        yield* derivedRows(ids, k)

        // January 2020 made room for (the legacy partition starts at MINVALUE), and each chain's first 3 decisions aged
        // into it: an update of recorded_at moves the rows between partitions
        const bound = (yield* legacyBound).toISOString()
        yield* sql`ALTER TABLE decisions DETACH PARTITION decisions_legacy`
        yield* sql.unsafe(`ALTER TABLE decisions ATTACH PARTITION decisions_legacy FOR VALUES FROM ('2020-02-01T00:00:00Z') TO ('${bound}')`)
        yield* sql`CREATE TABLE decisions_2020_01 PARTITION OF decisions FOR VALUES FROM ('2020-01-01T00:00:00Z') TO ('2020-02-01T00:00:00Z')`
        yield* sql`UPDATE decisions SET recorded_at = '2020-01-15T00:00:00Z' WHERE workspace_id IN ${sql.in(ids)} AND seq <= ${k}`
        const [moved] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions_2020_01`
        assert.strictEqual(moved!.n, 2 * k)

        // a decision there not chained yet holds the partition back (the chain backfill may still place it)
        yield* sql`UPDATE decisions SET seq = NULL WHERE workspace_id = ${a.workspace_id} AND seq = 1`
        assert.deepStrictEqual(yield* retention.prune(30), [])
        assert.include((yield* retention.partitions).map((p) => p.name), "decisions_2020_01")
        yield* sql`UPDATE decisions SET seq = 1 WHERE workspace_id = ${a.workspace_id} AND seq IS NULL`

        const pruned = yield* retention.prune(30)
        assert.strictEqual(pruned.length, 1)
        assert.strictEqual(pruned[0]!.partition, "decisions_2020_01")
        assert.strictEqual(pruned[0]!.decisions, 2 * k)
        // (a workspace ordered before the held-back one may have been marked already by the first round)
        assert.isNotEmpty(pruned[0]!.markers)
        for (const marker of pruned[0]!.markers) {
          assert.include(ids, marker.workspace_id)
          assert.strictEqual(marker.pruned_seq, k)
        }
        const [gone] = yield* sql<{ present: boolean }>`SELECT to_regclass('decisions_2020_01') IS NOT NULL AS present`
        assert.isFalse(gone!.present)
        assert.notInclude((yield* retention.partitions).map((p) => p.name), "decisions_2020_01")

        for (const { tenant_id, workspace_id } of [a, b]) {
          const { ok, w } = yield* verifyOne(workspace_id)
          assert.isTrue(ok, JSON.stringify(w))
          assert.deepStrictEqual([w.pruned_through, w.first_seq, w.last_seq, w.decisions], [k, k + 1, 8, 8 - k])
          // the marker: seq 3's hash, signed with the current key
          const [chain] = yield* sql<{ pruned_seq: string; pruned_hash: Uint8Array; pruned_at: Date; pruned_key: number; pruned_mac: Uint8Array }>`
            SELECT pruned_seq, pruned_hash, pruned_at, pruned_key, pruned_mac FROM ledger_chains WHERE workspace_id = ${workspace_id}`
          const [next] = yield* sql<{ prev_hash: Uint8Array }>`SELECT prev_hash FROM decisions WHERE workspace_id = ${workspace_id} AND seq = ${k + 1}`
          assert.isTrue(sameDigest(chain!.pruned_hash, next!.prev_hash))
          assert.strictEqual(chain!.pruned_key, keys.current.id)
          const mac = keys.mac(chain!.pruned_key, pruneMacText({ tenant_id, workspace_id }, k, Buffer.from(chain!.pruned_hash), chain!.pruned_at.getTime()))
          assert.isTrue(sameDigest(mac, chain!.pruned_mac))
        }

        // derived rows of the dropped decisions are gone, document frequencies down with them; the others stay
        const counts = yield* sql<{ what: string; n: number }>`
          SELECT 'search' AS what, count(*)::int AS n FROM decision_search WHERE workspace_id IN ${sql.in(ids)}
          UNION ALL SELECT 'postings', count(*)::int FROM ${sql.literal(POSTING_ROWS)} p WHERE workspace_id IN ${sql.in(ids)}
          UNION ALL SELECT 'prints', count(*)::int FROM decision_prints WHERE workspace_id IN ${sql.in(ids)}
          UNION ALL SELECT 'handoffs', count(*)::int FROM handoffs WHERE workspace_id IN ${sql.in(ids)}`
        assert.deepStrictEqual(Object.fromEntries(counts.map((row) => [row.what, row.n])), { search: 10, postings: 20, prints: 10, handoffs: 2 })
        const terms = yield* sql<{ lexeme: string; n: number }>`SELECT lexeme, sum(doc_count)::int AS n FROM search_terms
          WHERE workspace_id IN ${sql.in(ids)} GROUP BY lexeme ORDER BY lexeme`
        assert.deepStrictEqual(terms.map((row) => [row.lexeme, row.n]), [["new", 10], ["shared", 10]])

        assert.deepStrictEqual(yield* retention.prune(30), [], "nothing older than 30 days is left")
        // the chain goes on after the cut
        yield* publishAndBuild([captureJson(a, { agent_id: "agent-0", started_at: T0 + 60 * MINUTE, variant: 1 })])
        const after = yield* verifyOne(a.workspace_id)
        assert.isTrue(after.ok)
        assert.deepStrictEqual([after.w.first_seq, after.w.last_seq], [k + 1, 9])

        // a marker moved without the key is an integrity problem
        yield* sql`UPDATE ledger_chains SET pruned_seq = ${k - 1} WHERE workspace_id = ${b.workspace_id}`
        const tampered = yield* verifyOne(b.workspace_id)
        assert.isFalse(tampered.ok)
        assert.isFalse(tampered.w.integrity.ok)
        assert.match(tampered.w.integrity.problems.join("\n"), /prune marker \(up to seq 2\) is not signed/)
        yield* sql`UPDATE ledger_chains SET pruned_seq = ${k}, pruned_at = pruned_at + interval '1 second' WHERE workspace_id = ${b.workspace_id}`
        assert.isFalse((yield* verifyOne(b.workspace_id)).w.integrity.ok, "its time is signed too")
      }))

    it.effect("the legacy partition goes whole once its bound is older than the retention", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const retention = yield* DecisionRetention
        yield* retention.upkeep
        // chained now (in the legacy partition) up to seq 2, then the month after the legacy bound
        const bound = yield* legacyBound
        const live = yield* Clock.Clock
        const c = yield* newWorkspace("retention")
        const k = 2
        const payloads = Array.from({ length: 6 }, (_, i) => captureJson(c, { agent_id: "agent-0", started_at: T0 + i * MINUTE, variant: i % TEMPLATE_COUNT }))
        yield* publishAndBuild(payloads.slice(0, k))
        yield* publishAndBuild(payloads.slice(k)).pipe(Effect.provideService(Clock.Clock, clockAt(bound.getTime() + 9 * DAY, live)))
        const [next] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(monthName(bound.getTime()))} WHERE workspace_id = ${c.workspace_id}`
        assert.strictEqual(next!.n, 6 - k)
        const [heads] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_chains WHERE head_seq > pruned_seq`

        // six weeks after the legacy bound: the legacy partition is older than 30 days, the next month is not
        const at = Date.UTC(bound.getUTCFullYear(), bound.getUTCMonth() + 1, 15)
        const pruned = yield* retention.prune(30).pipe(Effect.provideService(Clock.Clock, clockAt(at, live)))
        assert.deepStrictEqual(pruned.map((p) => p.partition), ["decisions_legacy"])
        // every other workspace's decisions were all in it: their chains are marked through their heads
        assert.strictEqual(pruned[0]!.markers.length, heads!.n)
        assert.deepStrictEqual(pruned[0]!.markers.find((m) => m.workspace_id === c.workspace_id)?.pruned_seq, k)

        const { ok, w } = yield* verifyOne(c.workspace_id)
        assert.isTrue(ok, JSON.stringify(w))
        assert.deepStrictEqual([w.pruned_through, w.first_seq, w.decisions], [k, k + 1, 6 - k])
        const all = yield* (yield* Verifier).run()
        assert.isTrue(all.ok, JSON.stringify(all.workspaces.filter((x) => !x.integrity.ok || !x.completeness.ok)))
        assert.strictEqual((yield* retention.partitions)[0]!.from!.getTime(), bound.getTime())
      }))
  })

describe("decision retention", () => {
  suite("postgres")
  suite("pglite")
})
