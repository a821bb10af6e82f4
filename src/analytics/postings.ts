/**
 * The lexical index's postings (migration 0021): blocks of decisions per lexeme, newest first — one block per lexeme
 * and materialiser batch (written with the search rows, materialize/search.ts). Read and removed with what is here.
 */
import { Effect } from "effect"
import type { Statement } from "effect/sql"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql } from "../store/TenantSql.ts"

/** A block's entries as rows: `FROM search_posting_blocks b, ${ENTRIES}` gives u.ledger_id and u.created_at. */
export const ENTRIES = "unnest(b.ledger_ids, b.created_ats) AS u(ledger_id, created_at)"

/** A block's key besides its lexeme: blocks are read newest first by it. */
export interface BlockKey {
  readonly newest: string
  readonly head: string
}

/** Posting blocks read at first, newest first; each further read takes four times as many, up to the last size. */
const BLOCK_READS = [8, 32, 128, 512] as const

/**
 * The newest `wanted` decisions in the lexeme's postings whose documents hold every one of `others` too. Blocks are read newest first, a few at a time: a block holds nothing newer
 * than its `newest`, so once `wanted` matches are newer than the last block read, no block after it can come before
 * them.
 */
export const newestHolding = Effect.fnUntraced(function*(lexeme: string, others: ReadonlyArray<string>, wanted: number) {
  const sql = yield* ScopedSql
  const found: Array<Posting> = []
  let after: BlockKey | undefined
  for (let read = 0;; read++) {
    const size = BLOCK_READS[Math.min(read, BLOCK_READS.length - 1)]!
    // times as µs since the epoch (exact in a double) to compare here; `at` as Postgres writes it, to probe by
    const rows = yield* sql<BlockKey & { newest_us: number; blocks: number; ledger_id: string | null; at: string | null; us: number | null }>`
      WITH page AS MATERIALIZED (
        SELECT b.newest, b.head, b.ledger_ids, b.created_ats FROM search_posting_blocks b
        WHERE b.lexeme = ${lexeme} ${
      after === undefined ? sql`` : sql`AND (b.newest, b.head) < (${after.newest}::timestamptz, ${after.head}::uuid)`
    }
        ORDER BY b.newest DESC, b.head DESC LIMIT ${size}
      ), last AS (SELECT newest, head, (SELECT count(*) FROM page) AS blocks FROM page ORDER BY newest, head LIMIT 1)
      SELECT l.newest::text AS newest, floor(extract(epoch FROM l.newest) * 1e6)::float8 AS newest_us, l.head::text AS head,
        l.blocks::int AS blocks, m.ledger_id::text AS ledger_id,
        m.created_at::text AS at, floor(extract(epoch FROM m.created_at) * 1e6)::float8 AS us
      FROM last l LEFT JOIN LATERAL (
        SELECT u.ledger_id, u.created_at FROM page b, ${sql.literal(ENTRIES)}
        ${
      others.length === 0 ? sql`` : sql`WHERE EXISTS (SELECT 1 FROM decision_search s
          WHERE s.ledger_id = u.ledger_id AND s.created_at = u.created_at AND tsvector_to_array(s.document) @> ${[...others]}::text[])`
    }
      ) m ON true`
    if (rows.length === 0) break
    for (const row of rows) {
      if (row.ledger_id !== null) found.push({ ledger_id: row.ledger_id, at: row.at!, us: row.us! })
    }
    const last = rows[0]!
    if (last.blocks < size) break
    if (found.filter((candidate) => candidate.us > last.newest_us).length >= wanted) break
    after = { newest: last.newest, head: last.head }
  }
  return found.sort(newestFirst).slice(0, wanted)
})

/** A posting found: its decision's key, its time as PostgreSQL writes it (`at`) and as µs since the epoch (`us`). */
export interface Posting {
  readonly ledger_id: string
  readonly at: string
  readonly us: number
}

/** Newest first; ties by ledger id, highest first (the order of a block's entries). */
export const newestFirst = (a: Pick<Posting, "ledger_id" | "us">, b: Pick<Posting, "ledger_id" | "us">) =>
  b.us - a.us || (a.ledger_id < b.ledger_id ? 1 : a.ledger_id > b.ledger_id ? -1 : 0)

/**
 * Takes decisions out of the postings: every block holding one is rewritten without it (dropped once empty), and the
 * workspace's term counts lose it. `gone` selects the ledger ids (`SELECT … AS ledger_id`); `blocks` selects the keys
 * (lexeme, newest, head) of the blocks that may hold them, and may read the ids from the CTE `gone`.
 */
export const forgetPostings = Effect.fnUntraced(function*(scope: WorkspaceScope, gone: Statement.Fragment, blocks: Statement.Fragment) {
  const sql = yield* ScopedSql
  const { tenant_id, workspace_id } = scope
  // Deleting a block and inserting what is left of it under the same key in one statement is sound: the insert
  // aggregates every entry (so it follows every delete), and a key deleted by this transaction is free again.
  const emptied = yield* sql<{ lexeme: string }>`
    WITH gone AS MATERIALIZED (${gone}),
    hit AS (
      DELETE FROM search_posting_blocks b USING (${blocks}) k
      WHERE b.tenant_id = ${tenant_id}::uuid AND b.workspace_id = ${workspace_id}::uuid
        AND b.lexeme = k.lexeme AND b.newest = k.newest AND b.head = k.head
      RETURNING b.lexeme, b.head, b.ledger_ids, b.created_ats
    ), entries AS (
      -- a join rather than IN in the select list: a retention cut can hold more ids than a hashed subplan may keep
      SELECT h.lexeme, h.head, u.ledger_id, u.created_at, u.n, g.ledger_id IS NOT NULL AS leaving
      FROM hit h CROSS JOIN LATERAL unnest(h.ledger_ids, h.created_ats) WITH ORDINALITY AS u(ledger_id, created_at, n)
      LEFT JOIN gone g ON g.ledger_id = u.ledger_id
    ), kept AS (
      INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, lexeme, max(created_at), min(created_at),
        (array_agg(ledger_id ORDER BY n))[1], array_agg(ledger_id ORDER BY n), array_agg(created_at ORDER BY n)
      FROM entries WHERE NOT leaving GROUP BY lexeme, head
    ), counted AS (
      UPDATE search_terms t SET doc_count = t.doc_count - g.n
      FROM (SELECT lexeme, count(*) AS n FROM entries WHERE leaving GROUP BY lexeme) g
      WHERE t.tenant_id = ${tenant_id}::uuid AND t.workspace_id = ${workspace_id}::uuid AND t.lexeme = g.lexeme
      RETURNING t.lexeme, t.doc_count
    )
    SELECT lexeme FROM counted WHERE doc_count <= 0`
  if (emptied.length > 0) {
    yield* sql`DELETE FROM search_terms WHERE tenant_id = ${tenant_id}::uuid AND workspace_id = ${workspace_id}::uuid
      AND lexeme = ANY(${emptied.map((row) => row.lexeme)}::text[]) AND doc_count <= 0`
  }
})
