/**
 * Checking one stretch of a workspace's chain, `seq` in (from, to]: each decision's hash recomputed under its key,
 * its link to the decision before it within the stretch, its raw exchange against the raw hash, seq numbers missing
 * or repeated inside the stretch. What joins two stretches — the first decision's link to the previous stretch's
 * last, a gap between them — is left to the caller (Verifier.ts), so stretches can be checked in parallel (threads
 * of their own, verifyThread.ts). Pages come by keyset on (workspace, seq); the next is fetched while this one is
 * hashed.
 */
import { Effect, Fiber } from "effect"
import type { SqlError } from "effect/sql"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { GENESIS, sameDigest } from "../chain/chain.ts"
import type { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { type ChainRow, chainRowOf, factsOfRow, ROW_COLUMNS } from "./rows.ts"

/** How many altered decisions a report names per workspace (the count is always complete). */
export const LISTED = 1000
const PAGE = 10_000

export type AlterationReason =
  | "hash" // the facts or the link no longer match the decision's hash
  | "raw" // the stored raw exchange is not the one hashed
  | "link" // prev_hash is not the predecessor's hash
  | "order" // a seq number appears twice
  | "unchained" // the decision has no place in the chain
  | "key" // chained with a key this verifier does not hold
  | "erasure" // content removed without a signed erasure event

export interface Alteration {
  readonly ledger_id: string
  readonly seq: number | null
  readonly reason: AlterationReason
}

export interface RangeTask {
  readonly scope: WorkspaceScope
  /** exclusive */
  readonly from: number
  /** inclusive */
  readonly to: number
  /** the erasure events whose signature holds: a tombstone naming one may differ from its raw hash */
  readonly erasures: ReadonlyArray<string>
  /** the seq whose hash the result reports (a checkpoint's) */
  readonly watch: number | null
}

/** A decision at an end of the stretch: enough to join it to the next. */
export interface RangeEnd {
  readonly seq: number
  readonly ledger_id: string
  /** prev_hash for the first decision, hash for the last (hex) */
  readonly link: string
  /** its own hash holds under the key */
  readonly authentic: boolean
}

export interface RangeResult {
  readonly checked: number
  readonly altered: ReadonlyArray<Alteration>
  readonly altered_total: number
  /** seq numbers missing between decisions found in the stretch */
  readonly gaps: ReadonlyArray<{ readonly from: number; readonly to: number }>
  readonly first: RangeEnd | null
  readonly last: RangeEnd | null
  /** the hash (hex) of the decision at `watch`, when the stretch holds it */
  readonly watched: string | null
}

const readPage = (scope: WorkspaceScope, after: number, to: number) =>
  ScopedSql.use((sql) =>
    // ordered by the column, not by the float8 alias of the select list, so the chain index gives the order
    sql`SELECT ${sql.literal(ROW_COLUMNS)} FROM decisions d
      WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid
        AND d.seq > ${after}::bigint AND d.seq <= ${to}::bigint
      ORDER BY d.seq LIMIT ${PAGE}`.values.pipe(Effect.map((rows) => rows.map(chainRowOf)))
  )

const hex = (bytes: Uint8Array | null) => (bytes === null ? GENESIS : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString("hex")

/**
 * Checks the stretch. `read` runs a statement in the workspace's read scope; `progress` hears of each page.
 */
export const checkRange = (
  task: RangeTask,
  keys: IntegrityKeys["Service"],
  read: <A>(effect: Effect.Effect<A, SqlError.SqlError, ScopedSql>) => Effect.Effect<A, DatabaseUnavailable>,
  progress: (rows: number) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const { scope } = task
    const erasures = new Set(task.erasures)
    const altered: Array<Alteration> = []
    let alteredTotal = 0
    const alter = (row: ChainRow, reason: AlterationReason) => {
      alteredTotal++
      if (altered.length < LISTED) altered.push({ ledger_id: row.ledger_id, seq: row.seq, reason })
    }
    const gaps: Array<{ from: number; to: number }> = []
    let checked = 0
    let first: RangeEnd | null = null
    let watched: string | null = null
    // the previous decision of the stretch, and whether its hash holds
    let previous: ChainRow | null = null
    let previousAuthentic = false

    const check = (row: ChainRow) => {
      if (previous !== null && row.seq === previous.seq) {
        // the same seq twice: reordered or copied
        alter(row, "order")
        return
      }
      const contiguous = previous !== null && row.seq === previous.seq + 1
      if (previous !== null && !contiguous) gaps.push({ from: previous.seq + 1, to: row.seq - 1 })
      const hash = row.chain_key === null ? undefined : keys.hasher(row.chain_key)
      const prevHash = row.prev_hash ?? GENESIS
      const authentic = hash !== undefined && row.hash !== null && row.raw_hash !== null &&
        sameDigest(hash(factsOfRow(scope, row), prevHash, row.raw_hash), row.hash)
      if (hash === undefined) alter(row, "key")
      else if (!authentic) alter(row, "hash")
      // a decision whose own hash fails says nothing of its successor's link: only an authentic one is linked to
      else if (contiguous && previousAuthentic && !sameDigest(prevHash, previous!.hash)) alter(row, "link")
      else if (!row.raw_intact && (row.erasure_id === null || !erasures.has(row.erasure_id))) {
        alter(row, row.erasure_id === null ? "raw" : "erasure")
      }
      if (row.seq === task.watch) watched = hex(row.hash)
      first ??= { seq: row.seq, ledger_id: row.ledger_id, link: hex(row.prev_hash), authentic }
      previous = row
      previousAuthentic = authentic
    }

    let pending = yield* Effect.forkChild(read(readPage(scope, task.from, task.to)))
    while (true) {
      const page = yield* Fiber.join(pending)
      if (page.length === PAGE) pending = yield* Effect.forkChild(read(readPage(scope, page.at(-1)!.seq, task.to)))
      for (const row of page) check(row)
      checked += page.length
      yield* progress(page.length)
      if (page.length < PAGE) break
    }
    // (assigned in check, which the compiler does not follow)
    const end = previous as ChainRow | null
    const last: RangeEnd | null = end === null ? null : { seq: end.seq, ledger_id: end.ledger_id, link: hex(end.hash), authentic: previousAuthentic }
    return { checked, altered, altered_total: alteredTotal, gaps, first, last, watched } satisfies RangeResult
  })
