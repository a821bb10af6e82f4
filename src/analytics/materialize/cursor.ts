/**
 * The materialiser's keyset cursor over built decisions (`built_at`, `ledger_id`): the batch after it, and the late
 * commits just before it that the cursor alone would skip.
 */
import { Effect } from "effect"
import type { Statement } from "effect/sql"
import { ScopedSql } from "../../store/TenantSql.ts"
import type { BuiltDecision } from "../analyse.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"
import { texts, uuids } from "../../store/arrays.ts"

/**
 * Decisions read and written per transaction. Each batch also costs a fixed ~10 ms of statements, transactions and
 * round trips: 500 rather than 200 a batch made the catch-up ~10 % faster (bench/notes/analytics.md, "Read ahead,
 * batches of 500, and the subjects probed by key").
 */
const BATCH_SIZE = 500
/** How far before the cursor the late-commit sweep looks: longer than any builder transaction lasts. */
const COMMIT_OVERLAP = "30 seconds"

export const BUILT_COLUMNS = `d.ledger_id::text AS ledger_id, d.session_id::text AS session_id, d.agent_id, d.execution_id,
  d.created_at, d.built_at, d.provider, d.model, d.title, d.intent, d.outcome, d.cost_usd, d.quality, d.latency_ms, d.status,
  coalesce((d.usage->>'total_tokens')::int, 0) AS total_tokens,
  coalesce((d.usage->>'completion_tokens')::int, 0) AS completion_tokens,
  d.derivation,
  d.api, d.raw_request, d.raw_response, d.subjects`

/** A position in build order: `built_at` as text (microseconds kept) and the ledger id. */
export interface BuildCursor {
  readonly at: string
  readonly id: string
}

const progressOf = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const [progress] = yield* sql<BuildCursor>`
    SELECT built_cursor::text AS at, built_cursor_id::text AS id FROM analytics_progress`
  return progress ?? { at: "-infinity", id: "00000000-0000-0000-0000-000000000000" }
})

/**
 * Raw exchange text a batch reads at most, so that a batch of long agent calls (hundreds of KB of transcript each)
 * stays a bounded amount of memory; a decision larger than this alone is a batch (with any empty ones before it).
 */
const BATCH_TEXT_BYTES = 16 * 1024 * 1024

/** A decision as a batch read it, with its `built_at` as text (microseconds kept). */
export type ReadDecision = BuiltDecision & { readonly built_cursor: string }

/** A batch in build order: its decisions, the position of the last (undefined when empty), whether more may follow. */
export interface CursorBatch {
  readonly rows: ReadonlyArray<ReadDecision>
  readonly last: BuildCursor | undefined
  readonly more: boolean
}

type BoundedRow = ReadDecision & { readonly fetched: string }

/**
 * The first rows of `candidates` (at most BATCH_SIZE, in build order, with BUILT_COLUMNS, `d.built_at` and
 * `d.ledger_id` as `built_key`/`ledger_key` and the raw text's size as `text_bytes`) that fit BATCH_TEXT_BYTES. The
 * sizes come from the rows' TOAST headers, and the raw texts of the rows left out are never read.
 */
const textBounded = (sql: ScopedSql["Service"], candidates: Statement.Fragment) =>
  Effect.map(
    sql<BoundedRow>`
      SELECT w.*, w.built_key::text AS built_cursor FROM (
        SELECT c.*, sum(c.text_bytes) OVER (ORDER BY c.built_key, c.ledger_key) AS running, count(*) OVER () AS fetched
        FROM (${candidates}) c
      ) w WHERE w.running <= ${BATCH_TEXT_BYTES} OR w.running = w.text_bytes
      ORDER BY w.built_key, w.ledger_key`,
    (rows): CursorBatch => {
      const last = rows.at(-1)
      return {
        rows,
        last: last === undefined ? undefined : { at: last.built_cursor, id: last.ledger_id },
        more: last !== undefined && (Number(last.fetched) === BATCH_SIZE || rows.length < Number(last.fetched))
      }
    }
  )

const CANDIDATE_COLUMNS = `${BUILT_COLUMNS}, d.built_at AS built_key, d.ledger_id AS ledger_key,
  octet_length(d.raw_request) + coalesce(octet_length(d.raw_response), 0) AS text_bytes`

/** The next decisions after `after` — by default the workspace's stored cursor —, in build order. */
export const readBatch = Effect.fnUntraced(function*(after?: BuildCursor) {
  const sql = yield* ScopedSql
  const cursor = after ?? (yield* progressOf)
  return yield* textBounded(
    sql,
    sql`SELECT ${sql.literal(CANDIDATE_COLUMNS)} FROM decisions d
      WHERE (d.built_at, d.ledger_id) > (${cursor.at}::timestamptz, ${cursor.id}::uuid)
      ORDER BY d.built_at, d.ledger_id
      LIMIT ${BATCH_SIZE}`
  )
})

/** Moves the workspace's cursor on to `to`, never back. */
export const advanceCursor = Effect.fnUntraced(function*(scope: WorkspaceScope, to: BuildCursor) {
  const sql = yield* ScopedSql
  yield* sql`INSERT INTO analytics_progress (tenant_id, workspace_id, built_cursor, built_cursor_id)
    VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${to.at}::timestamptz, ${to.id}::uuid)
    ON CONFLICT (tenant_id, workspace_id) DO UPDATE
    SET built_cursor = EXCLUDED.built_cursor, built_cursor_id = EXCLUDED.built_cursor_id, updated_at = now()
    WHERE (analytics_progress.built_cursor, analytics_progress.built_cursor_id) < (EXCLUDED.built_cursor, EXCLUDED.built_cursor_id)`
})

/**
 * The ids of `rows` whose decisions changed since they were read: an erasure (or a rebuild) moves `built_at`, and
 * the cursor meets the decision again. Written from the text it was read with, its analytics would outlive the
 * erasure. Asked inside the batch's write, under the workspace's analytics lock, which an erasure's page takes too.
 */
export const changedSinceRead = Effect.fnUntraced(function*(rows: ReadonlyArray<ReadDecision>) {
  if (rows.length === 0) return new Set<string>()
  const sql = yield* ScopedSql
  const changed = yield* sql<{ ledger_id: string }>`
    SELECT q.id::text AS ledger_id FROM unnest(${uuids(rows.map((row) => row.ledger_id))},
      ${texts(rows.map((row) => row.built_cursor))}::timestamptz[]) AS q(id, at)
    LEFT JOIN LATERAL (SELECT true AS same FROM decisions d WHERE d.ledger_id = q.id AND d.built_at = q.at LIMIT 1) d ON true
    WHERE d.same IS NULL`
  return new Set(changed.map((row) => row.ledger_id))
})

/**
 * Decisions stamped shortly before the cursor that committed after it passed (concurrent builders), not yet
 * materialised. One key probe of the search rows per decision (LATERAL … LIMIT 1): as `NOT EXISTS`, a planner
 * without statistics on young tables took the window for a row or two and scanned every search row for each of
 * its decisions — 14.8 s of a core at 500 decisions/s (bench/notes/analytics.md, "The loop detector and the late-commit sweep").
 */
export const readLateBatch = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const cursor = yield* progressOf
  return yield* textBounded(
    sql,
    sql`SELECT ${sql.literal(CANDIDATE_COLUMNS)} FROM decisions d
      -- the time as well as the key: whichever index the planner takes (the tenant policy's, by time, was chosen without
      -- statistics: a walk of the workspace's search rows per decision, 14 s a sweep at 10,000), the probe is one entry
      LEFT JOIN LATERAL (SELECT true AS done FROM decision_search s WHERE s.ledger_id = d.ledger_id AND s.created_at = d.created_at LIMIT 1) s ON true
      WHERE d.built_at >= ${cursor.at}::timestamptz - ${COMMIT_OVERLAP}::interval AND d.built_at <= ${cursor.at}::timestamptz
        AND s.done IS NULL
      ORDER BY d.built_at, d.ledger_id
      LIMIT ${BATCH_SIZE}`
  )
})

/** Decisions by id, one key probe each (the background embedder reads its rows' texts with it). */
export const readDecisions = Effect.fnUntraced(function*(ids: ReadonlyArray<string>) {
  if (ids.length === 0) return []
  const sql = yield* ScopedSql
  return yield* sql<BuiltDecision>`
    SELECT x.* FROM unnest(${ids}::uuid[]) AS q(id)
    CROSS JOIN LATERAL (SELECT ${sql.literal(BUILT_COLUMNS)} FROM decisions d WHERE d.ledger_id = q.id LIMIT 1) x`
})
