/**
 * The lexical index's posting blocks (migration 0021), on PostgreSQL and embedded PGlite: the newest decisions holding
 * every word, read block by block, are exactly what a scan of every posting would give, whatever the blocks' sizes
 * and however their times overlap; postings written before the blocks are regrouped into them whole; and the search
 * rows' large columns compress with lz4 on PostgreSQL (migration 0022).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { NodeServices } from "@effect/platform-node"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import type { DecisionAnalysis } from "../../src/analytics/analyse.ts"
import { insertSearchRows } from "../../src/analytics/materialize/search.ts"
import { newestHolding } from "../../src/analytics/postings.ts"
import { VECTOR_DIMENSIONS } from "../../src/analytics/text.ts"
import { migrations } from "../../src/store/migrations/index.ts"
import { TenantSql } from "../../src/store/TenantSql.ts"
import { testDatabase } from "../support/db.ts"
import { POSTING_ROWS } from "../support/postings.ts"
import type { Backend } from "../support/stack.ts"
import { builderStack, newWorkspace } from "./builder-harness.ts"

/** A deterministic stream of numbers in [0, 1) (mulberry32). */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), seed | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

interface Seeded {
  readonly ledger_id: string
  readonly at: number
  readonly words: ReadonlyArray<string>
}

const T0 = Date.UTC(2026, 9, 1)

const suite = (backend: Backend) =>
  layer(builderStack(backend), { timeout: 120_000, excludeTestServices: true })(`posting blocks (${backend})`, (it) => {
    it.effect("the newest decisions holding every word, block by block, are those of a scan of every posting", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const scope = yield* newWorkspace("postings")
        const next = random(25)
        // 1,500 decisions holding "alpha", some "beta" and "gamma", times in whole ms with ties, analysed in batches of
        // 1–40; a fifth of the batches are late (an import of old transcripts: their decisions are up to 20 minutes
        // older than the batches before them), so blocks overlap in time and a newer block can hold older entries
        const batches: Array<Array<Seeded>> = []
        for (let i = 0; i < 1_500;) {
          const size = 1 + Math.floor(next() * 40)
          const late = next() < 0.2 ? Math.floor(next() * 1_200_000) : 0
          batches.push(Array.from({ length: Math.min(size, 1_500 - i) }, (_, j) => ({
            ledger_id: Crypto.randomUUID(),
            at: T0 + (i + j) * 1_000 - late - (next() < 0.3 ? 1_000 : 0),
            words: ["alpha", ...(next() < 0.3 ? ["beta"] : []), ...(next() < 0.5 ? ["gamma"] : [])]
          })))
          i += size
        }
        const decisions = batches.flat()
        yield* sql`INSERT INTO decision_search (ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, document,
            local_vector, call_signature)
          SELECT id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${Crypto.randomUUID()}::uuid, 'agent', at,
            to_tsvector('simple', words), '{}'::real[], 'sig'
          FROM unnest(${decisions.map((d) => d.ledger_id)}::uuid[], ${decisions.map((d) => new Date(d.at).toISOString())}::timestamptz[],
            ${decisions.map((d) => d.words.join(" "))}::text[]) AS t(id, at, words)`
        for (const batch of batches) {
          for (const word of ["alpha", "beta", "gamma"]) {
            const holding = batch.filter((d) => d.words.includes(word))
            if (holding.length === 0) continue
            yield* sql`INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
              SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${word}, max(at), min(at),
                (array_agg(id ORDER BY at DESC, id DESC))[1], array_agg(id ORDER BY at DESC, id DESC), array_agg(at ORDER BY at DESC, id DESC)
              FROM unnest(${holding.map((d) => d.ledger_id)}::uuid[], ${holding.map((d) => new Date(d.at).toISOString())}::timestamptz[]) AS t(id, at)`
          }
        }
        const tenantSql = yield* TenantSql
        for (const others of [[], ["beta"], ["beta", "gamma"], ["delta"]]) {
          for (const wanted of [1, 7, 60, 150, 400, 2_000]) {
            const expected = decisions
              .filter((d) => others.every((word) => d.words.includes(word)))
              .sort((a, b) => b.at - a.at || (a.ledger_id < b.ledger_id ? 1 : -1))
              .slice(0, wanted)
              .map((d) => d.ledger_id)
            const found = yield* tenantSql.write(scope, newestHolding("alpha", others, wanted))
            assert.deepStrictEqual(found.map((c) => c.ledger_id), expected, `${others.join("+")} × ${wanted}`)
          }
        }

        // the read stops where it may: seven new blocks with old tails, an eighth ending at 900 s with an entry at 880 s,
        // a ninth (past the first read) holding 895 s — which comes before 880 s
        const seconds = (at: number) => new Date(T0 + at * 1_000).toISOString()
        const block = (times: ReadonlyArray<number>) => ({ ids: times.map(() => Crypto.randomUUID()), times })
        const blocks = [
          ...Array.from({ length: 7 }, (_, k) => block([1_000 + k, 10 + k, 5 + k])),
          block([900, 880]),
          block([895]),
          ...Array.from({ length: 40 }, (_, k) => block([800 - k * 10, 700 - k * 10]))
        ]
        for (const { ids, times } of blocks) {
          yield* sql`INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
            VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, 'omega', ${seconds(times[0]!)}::timestamptz,
              ${seconds(times.at(-1)!)}::timestamptz, ${ids[0]}::uuid, ${ids}::uuid[], ${times.map(seconds)}::timestamptz[])`
        }
        const newest = yield* tenantSql.write(scope, newestHolding("omega", [], 9))
        const at = new Map<string, number>(blocks.flatMap(({ ids, times }) => ids.map((id, i) => [id, times[i]!] as const)))
        assert.deepStrictEqual(newest.map((c) => at.get(c.ledger_id)), [1_006, 1_005, 1_004, 1_003, 1_002, 1_001, 1_000, 900, 895])
      }))

    it.effect("the materialiser writes a batch's postings as one block per word, newest first, and counts each decision once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenantSql = yield* TenantSql
        const scope = yield* newWorkspace("blocks")
        const next = random(7)
        // times in whole seconds, three decisions a second (ties broken by ledger id); "the" is a stopword: no block
        const analysis = (i: number, words: string) =>
          ({
            decision: {
              ledger_id: Crypto.randomUUID(),
              session_id: Crypto.randomUUID(),
              agent_id: "agent",
              created_at: new Date(T0 + Math.floor(i / 3) * 1_000),
              provider: "openai",
              model: "gpt-4o-mini"
            },
            lexicalText: `the ${words}`,
            signature: `sig-${i}`,
            vector: Array.from({ length: VECTOR_DIMENSIONS }, () => Math.round(next() * 1e6) / 1e6)
          }) as unknown as DecisionAnalysis
        const first = Array.from({ length: 60 }, (_, i) => analysis(i, next() < 0.5 ? "alpha beta" : "alpha"))
        const written = yield* tenantSql.write(scope, insertSearchRows(scope, first.toReversed()))
        assert.strictEqual(written.length, 60)
        // a redelivered batch: five decisions already written, ten new ones
        const second = [...first.slice(10, 15), ...Array.from({ length: 10 }, (_, i) => analysis(100 + i, "alpha gamma"))]
        const again = yield* tenantSql.write(scope, insertSearchRows(scope, second))
        assert.deepStrictEqual(again.map((a) => a.decision.ledger_id), second.slice(5).map((a) => a.decision.ledger_id))

        const newestFirst = (batch: ReadonlyArray<DecisionAnalysis>, word: string) =>
          batch.filter((a) => a.lexicalText.includes(word)).map((a) => ({ id: a.decision.ledger_id, at: a.decision.created_at.getTime() }))
            .sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))
        const expected = [
          ...["alpha", "beta"].map((word) => ({ word, entries: newestFirst(first, word) })),
          ...["alpha", "gamma"].map((word) => ({ word, entries: newestFirst(second.slice(5), word) }))
        ].sort((a, b) => a.word.localeCompare(b.word) || b.entries[0]!.at - a.entries[0]!.at)
        const blocks = yield* sql<{ lexeme: string; newest: Date; oldest: Date; head: string; ledger_ids: Array<string>; created_ats: Array<Date> }>`
          SELECT lexeme, newest, oldest, head::text AS head, ledger_ids::text[] AS ledger_ids, created_ats FROM search_posting_blocks
          WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid ORDER BY lexeme, newest DESC`
        assert.deepStrictEqual(
          blocks.map((b) => ({ lexeme: b.lexeme, newest: b.newest.getTime(), oldest: b.oldest.getTime(), head: b.head, ids: b.ledger_ids, ats: b.created_ats.map((at) => at.getTime()) })),
          expected.map(({ word, entries }) => ({
            lexeme: word,
            newest: entries[0]!.at,
            oldest: entries.at(-1)!.at,
            head: entries[0]!.id,
            ids: entries.map((e) => e.id),
            ats: entries.map((e) => e.at)
          }))
        )
        const terms = yield* sql<{ lexeme: string; doc_count: number }>`SELECT lexeme, doc_count::int AS doc_count FROM search_terms
          WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid ORDER BY lexeme`
        assert.deepStrictEqual(terms, [
          { lexeme: "alpha", doc_count: 70 },
          { lexeme: "beta", doc_count: newestFirst(first, "beta").length },
          { lexeme: "gamma", doc_count: 10 }
        ])
        // the vectors went in whole, each to its own decision
        const vectors = yield* sql<{ ledger_id: string; local_vector: Array<number> }>`SELECT ledger_id::text AS ledger_id, local_vector
          FROM decision_search WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
        const stored = new Map(vectors.map((row) => [row.ledger_id, row.local_vector]))
        assert.strictEqual(stored.size, 70)
        for (const a of [...first, ...second]) assert.deepStrictEqual(stored.get(a.decision.ledger_id), a.vector.map(Math.fround))
      }))
  })

suite("postgres")
suite("pglite")

describe("posting blocks upgrade", () => {
  it.effect("postings written before the blocks are regrouped into them whole, newest first, at most 200 a block; search rows compress with lz4", () =>
    Effect.gen(function*() {
      const { url } = yield* testDatabase
      const pool = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
      yield* Effect.gen(function*() {
        const run = (ids: ReadonlyArray<string>) =>
          PgMigrator.run({ loader: PgMigrator.fromRecord(Object.fromEntries(ids.map((id) => [id, migrations[id]!]))), table: "ledger_migrations" })
            .pipe(Effect.provide(NodeServices.layer))
        const ids = Object.keys(migrations)
        yield* run(ids.filter((id) => id < "0021"))
        const sql = yield* SqlClient.SqlClient
        const [tenant, workspace] = [Crypto.randomUUID(), Crypto.randomUUID()]
        // "common" in 450 decisions (three blocks), "rare" in 3, times with ties
        const old = Array.from({ length: 450 }, (_, i) => ({ id: Crypto.randomUUID(), at: new Date(T0 + Math.floor(i / 2) * 1_000).toISOString() }))
        yield* sql`INSERT INTO search_postings (tenant_id, workspace_id, lexeme, created_at, ledger_id)
          SELECT ${tenant}::uuid, ${workspace}::uuid, l, at, id
          FROM unnest(${old.map((p) => p.id)}::uuid[], ${old.map((p) => p.at)}::timestamptz[]) WITH ORDINALITY AS t(id, at, n),
            unnest(CASE WHEN n <= 3 THEN ARRAY['common', 'rare'] ELSE ARRAY['common'] END) AS l`
        const before = yield* sql<{ lexeme: string; ledger_id: string; at: string }>`SELECT lexeme, ledger_id::text AS ledger_id,
          created_at::text AS at FROM search_postings ORDER BY lexeme, created_at DESC, ledger_id DESC`
        yield* run(ids)
        const after = yield* sql<{ lexeme: string; ledger_id: string; at: string }>`SELECT lexeme, ledger_id::text AS ledger_id,
          created_at::text AS at FROM ${sql.literal(POSTING_ROWS)} p ORDER BY lexeme, created_at DESC, ledger_id DESC`
        assert.strictEqual(before.length, 453)
        assert.deepStrictEqual(after, before)
        const blocks = yield* sql<{ lexeme: string; n: number; ordered: boolean; bounds: boolean }>`
          SELECT lexeme, cardinality(ledger_ids) AS n,
            ledger_ids[1] = head AND created_ats = ARRAY(SELECT x FROM unnest(created_ats) x ORDER BY x DESC) AS ordered,
            newest = created_ats[1] AND oldest = created_ats[cardinality(created_ats)] AS bounds
          FROM search_posting_blocks ORDER BY lexeme, newest DESC`
        assert.deepStrictEqual(blocks.map((b) => [b.lexeme, b.n]), [["common", 200], ["common", 200], ["common", 50], ["rare", 3]])
        assert.isTrue(blocks.every((b) => b.ordered && b.bounds))
        const [table] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'search_postings'`
        assert.strictEqual(table!.n, 0)
        // and the search rows' large columns compress with lz4 (migration 0022)
        const compression = yield* sql<{ attname: string; attcompression: string }>`SELECT attname, attcompression::text AS attcompression
          FROM pg_attribute WHERE attrelid = 'decision_search'::regclass AND attname IN ('document', 'local_vector', 'embedding') ORDER BY attname`
        assert.deepStrictEqual(compression.map((c) => [c.attname, c.attcompression]), [["document", "l"], ["embedding", "l"], ["local_vector", "l"]])
      }).pipe(Effect.provide(pool), Effect.scoped)
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
