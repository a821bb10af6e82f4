/**
 * `ledger verify` (docs/ARCHITECTURE.md, "Integrity"): walks each workspace's chain in seq order and reports two
 * things apart —
 *
 * - integrity: decisions whose facts, raw exchange or link to their predecessor no longer match their hash under
 *   the key (named by ledger_id), decisions not in the chain at all, a head or checkpoint the chain contradicts;
 * - completeness: seq numbers missing (gaps), and a tail cut short of the head the chain table records or of the
 *   checkpoint given.
 *
 * A workspace is read inside its own tenant scope (row-level security), so verifying one reads no other's rows. Pages
 * come by keyset on (workspace, seq); the next page is fetched while this one is hashed. Postgres recomputes each raw
 * exchange's hash where the text is (`RAW_HASH_SQL`), Node the HMACs.
 */
import { Clock, Context, Effect, Fiber, Layer } from "effect"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { type Checkpoint, checkpointHeads, CheckpointInvalid } from "./checkpoint.ts"
import { chainHash, GENESIS, sameDigest } from "./chain.ts"
import { type ChainRow, factsOfRow, ROW_COLUMNS } from "./rows.ts"
import { auditMacText, pruneMacText } from "./markers.ts"
import { IntegrityKeys } from "./IntegrityKeys.ts"
import { listWorkspaces, type NamedWorkspace, type UnknownWorkspace } from "./workspaces.ts"

/** How many altered decisions a report names per workspace (the count is always complete). */
const LISTED = 1000
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

export interface WorkspaceVerification {
  readonly tenant: string
  readonly workspace: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly decisions: number
  readonly first_seq: number | null
  readonly last_seq: number | null
  readonly head_seq: number
  readonly pruned_through: number
  readonly integrity: {
    readonly ok: boolean
    readonly altered: ReadonlyArray<Alteration>
    readonly altered_total: number
    /** the chain table's head or the checkpoint contradicts the chain (not about one decision) */
    readonly problems: ReadonlyArray<string>
  }
  readonly completeness: {
    readonly ok: boolean
    readonly gaps: ReadonlyArray<{ readonly from: number; readonly to: number }>
    readonly missing: number
    /** decisions expected after the last one found: up to the recorded head, or the checkpoint's seq */
    readonly tail: { readonly expected_through: number; readonly found_through: number; readonly by: "head" | "checkpoint" } | null
  }
  readonly checkpoint: { readonly seq: number; readonly matches: boolean } | null
}

export interface VerifyResult {
  readonly ok: boolean
  readonly decisions: number
  readonly seconds: number
  readonly workspaces: ReadonlyArray<WorkspaceVerification>
}

export interface VerifyProgress {
  readonly done: number
  readonly total: number
}

const readPage = (scope: NamedWorkspace, after: number, size: number) =>
  ScopedSql.use((sql) =>
    // ordered by the column, not by the float8 alias of the select list, so the chain index gives the order
    sql<ChainRow>`SELECT ${sql.literal(ROW_COLUMNS)} FROM decisions d
      WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND d.seq > ${after}::bigint
      ORDER BY d.seq LIMIT ${size}`
  )

interface ChainState {
  readonly head_seq: number
  readonly head_hash: Uint8Array | null
  readonly pruned_seq: number
  readonly pruned_hash: Uint8Array | null
  readonly pruned_at: Date | null
  readonly pruned_key: number | null
  readonly pruned_mac: Uint8Array | null
}

export class Verifier extends Context.Service<Verifier, {
  run(options?: {
    readonly workspace?: string | undefined
    readonly checkpoint?: Checkpoint | undefined
    readonly onProgress?: ((progress: VerifyProgress) => Effect.Effect<void>) | undefined
  }): Effect.Effect<VerifyResult, DatabaseUnavailable | UnknownWorkspace | CheckpointInvalid>
}>()("ledger/integrity/Verifier") {
  static readonly layer = Layer.effect(
    Verifier,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const keys = yield* IntegrityKeys

      const read = <A, E>(scope: NamedWorkspace, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.read({ tenant_id: scope.tenant_id, workspace_id: scope.workspace_id, user_id: "", role: "member" }, effect)

      const verifyWorkspace = (
        scope: NamedWorkspace,
        checkpoint: { readonly seq: number; readonly hash: Buffer } | undefined,
        progress: (rows: number) => Effect.Effect<void>
      ) =>
        Effect.gen(function*() {
          const { chain, unchained, unchainedTotal, erasures } = yield* read(scope, Effect.gen(function*() {
            const sql = yield* ScopedSql
            const [chain] = yield* sql<ChainState>`SELECT head_seq::float8 AS head_seq, head_hash, pruned_seq::float8 AS pruned_seq,
              pruned_hash, pruned_at, pruned_key, pruned_mac FROM ledger_chains
              WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
            const unchained = yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions
              WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND seq IS NULL LIMIT ${LISTED}`
            const [{ n }] = unchained.length < LISTED ? [{ n: unchained.length }] : yield* sql<{ n: number }>`SELECT count(*)::float8 AS n
              FROM decisions WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND seq IS NULL`
            const erasures = yield* sql<{ event_id: string; kind: string; at: Date; detail: unknown; chain_key: number; mac: Uint8Array }>`
              SELECT event_id, kind, at, detail, chain_key, mac FROM ledger_audit_events
              WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND kind = 'erase'`
            return { chain, unchained, unchainedTotal: n, erasures }
          }))
          const state: ChainState = chain ?? { head_seq: 0, head_hash: null, pruned_seq: 0, pruned_hash: null, pruned_at: null, pruned_key: null, pruned_mac: null }
          const problems: Array<string> = []
          const altered: Array<Alteration> = []
          let alteredTotal = unchainedTotal
          const alter = (row: ChainRow, reason: AlterationReason) => {
            alteredTotal++
            if (altered.length < LISTED) altered.push({ ledger_id: row.ledger_id, seq: row.seq, reason })
          }
          for (const row of unchained) if (altered.length < LISTED) altered.push({ ledger_id: row.ledger_id, seq: null, reason: "unchained" })

          // the prune marker: where the chain now starts, signed when it was cut
          let prevHash: Buffer = GENESIS
          if (state.pruned_seq > 0) {
            const mac = state.pruned_key === null || state.pruned_hash === null || state.pruned_at === null
              ? undefined
              : keys.mac(state.pruned_key, pruneMacText(scope, state.pruned_seq, Buffer.from(state.pruned_hash), state.pruned_at.getTime()))
            if (!sameDigest(mac, state.pruned_mac)) problems.push(`the prune marker (up to seq ${state.pruned_seq}) is not signed by a key held here`)
            prevHash = state.pruned_hash === null ? GENESIS : Buffer.from(state.pruned_hash)
          }
          const validErasures = new Set(erasures.flatMap((event) =>
            sameDigest(keys.mac(event.chain_key, auditMacText(scope, event)), event.mac) ? [event.event_id] : []
          ))

          const gaps: Array<{ from: number; to: number }> = []
          let missing = 0
          let expected = state.pruned_seq + 1
          let linked = true
          let decisions = 0
          let first: number | null = null
          let last: number | null = null
          let lastHash: Buffer | null = null
          let checkpointMatches: boolean | null = null

          const check = (row: ChainRow) => {
            if (row.seq < expected) {
              // the same seq twice: reordered or copied
              alter(row, "order")
              return
            }
            if (row.seq > expected) {
              gaps.push({ from: expected, to: row.seq - 1 })
              missing += row.seq - expected
              linked = false
            }
            expected = row.seq + 1
            first ??= row.seq
            last = row.seq
            const key = row.chain_key === null ? undefined : keys.byId(row.chain_key)
            const stored = row.hash === null ? null : Buffer.from(row.hash)
            const storedPrev = row.prev_hash === null ? GENESIS : Buffer.from(row.prev_hash)
            // a decision whose own hash fails says nothing of its successor's link: the link is checked after a valid one
            let valid = false
            if (key === undefined) alter(row, "key")
            else if (row.raw_hash === null || stored === null || !sameDigest(chainHash(key, factsOfRow(scope, row), storedPrev, Buffer.from(row.raw_hash)), stored)) {
              alter(row, "hash")
            } else if (linked && !sameDigest(storedPrev, prevHash)) alter(row, "link")
            else {
              valid = true
              if (!sameDigest(row.raw_now, row.raw_hash) && (row.erasure_id === null || !validErasures.has(row.erasure_id))) {
                alter(row, row.erasure_id === null ? "raw" : "erasure")
              }
            }
            if (checkpoint !== undefined && row.seq === checkpoint.seq) checkpointMatches = stored !== null && sameDigest(stored, checkpoint.hash)
            prevHash = stored ?? GENESIS
            lastHash = stored
            linked = valid
          }

          let after = state.pruned_seq
          let pending = yield* Effect.forkChild(read(scope, readPage(scope, after, PAGE)))
          while (true) {
            const page = yield* Fiber.join(pending)
            if (page.length === PAGE) pending = yield* Effect.forkChild(read(scope, readPage(scope, page.at(-1)!.seq, PAGE)))
            for (const row of page) check(row)
            decisions += page.length
            yield* progress(page.length)
            if (page.length < PAGE) break
            after = page.at(-1)!.seq
          }

          // the tail: the recorded head, then the checkpoint, may expect more than was found
          const foundThrough = last ?? state.pruned_seq
          let tail: WorkspaceVerification["completeness"]["tail"] = null
          if (state.head_seq > foundThrough) tail = { expected_through: state.head_seq, found_through: foundThrough, by: "head" }
          else if (state.head_seq < foundThrough) problems.push(`the chain table's head (seq ${state.head_seq}) is behind the last decision (seq ${foundThrough})`)
          else if (last !== null && lastHash !== null && !sameDigest(state.head_hash, lastHash)) {
            problems.push(`the chain table's head hash is not the last decision's (seq ${foundThrough})`)
          }
          if (checkpoint !== undefined) {
            if (checkpoint.seq > foundThrough) {
              if (tail === null || checkpoint.seq > tail.expected_through) tail = { expected_through: checkpoint.seq, found_through: foundThrough, by: "checkpoint" }
              checkpointMatches = false
            } else if (checkpoint.seq === state.pruned_seq && state.pruned_seq > 0) {
              checkpointMatches = sameDigest(state.pruned_hash, checkpoint.hash)
            } else if (checkpoint.seq < state.pruned_seq || checkpoint.seq === 0) {
              checkpointMatches = true
            }
            if (checkpointMatches === false && checkpoint.seq <= foundThrough) {
              problems.push(`the decision at the checkpoint's seq ${checkpoint.seq} does not have the checkpoint's hash: the chain was rewritten`)
            }
          }
          if (tail !== null) missing += tail.expected_through - tail.found_through

          return {
            tenant: scope.tenant,
            workspace: scope.workspace,
            tenant_id: scope.tenant_id,
            workspace_id: scope.workspace_id,
            decisions: decisions + unchainedTotal,
            first_seq: first,
            last_seq: last,
            head_seq: state.head_seq,
            pruned_through: state.pruned_seq,
            integrity: { ok: alteredTotal === 0 && problems.length === 0, altered, altered_total: alteredTotal, problems },
            completeness: { ok: gaps.length === 0 && tail === null, gaps, missing, tail },
            checkpoint: checkpoint === undefined ? null : { seq: checkpoint.seq, matches: checkpointMatches ?? false }
          } satisfies WorkspaceVerification
        })

      const run = Effect.fn("Verifier.run")(function*(options?: {
        readonly workspace?: string | undefined
        readonly checkpoint?: Checkpoint | undefined
        readonly onProgress?: ((progress: VerifyProgress) => Effect.Effect<void>) | undefined
      }) {
        const started = yield* Clock.currentTimeMillis
        const workspaces = yield* Effect.provideService(listWorkspaces(options?.workspace), TenantSql, tenantSql)
        const heads = options?.checkpoint === undefined
          ? undefined
          : yield* Effect.provideService(checkpointHeads(options.checkpoint), IntegrityKeys, keys)
        let total = 0
        for (const scope of workspaces) {
          const [row] = yield* read(scope, ScopedSql.use((sql) =>
            sql<{ n: number }>`SELECT coalesce(head_seq - pruned_seq, 0)::float8 AS n FROM ledger_chains
              WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
          ))
          total += row?.n ?? 0
        }
        let done = 0
        const report = options?.onProgress ?? (() => Effect.void)
        const results: Array<WorkspaceVerification> = []
        for (const scope of workspaces) {
          results.push(yield* verifyWorkspace(scope, heads?.get(scope.workspace_id), (rows) => {
            done += rows
            return report({ done, total: Math.max(total, done) })
          }))
        }
        // a workspace the checkpoint names that is gone altogether is a tail cut to nothing
        if (heads !== undefined && options?.workspace === undefined) {
          const seen = new Set(workspaces.map((w) => w.workspace_id))
          for (const entry of options!.checkpoint!.workspaces) {
            if (seen.has(entry.workspace_id)) continue
            results.push({
              tenant: entry.tenant,
              workspace: entry.workspace,
              tenant_id: entry.tenant_id,
              workspace_id: entry.workspace_id,
              decisions: 0,
              first_seq: null,
              last_seq: null,
              head_seq: 0,
              pruned_through: 0,
              integrity: { ok: true, altered: [], altered_total: 0, problems: [] },
              completeness: { ok: false, gaps: [], missing: entry.seq, tail: { expected_through: entry.seq, found_through: 0, by: "checkpoint" } },
              checkpoint: { seq: entry.seq, matches: false }
            })
          }
        }
        const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
        return {
          ok: results.every((w) => w.integrity.ok && w.completeness.ok),
          decisions: results.reduce((sum, w) => sum + w.decisions, 0),
          seconds,
          workspaces: results
        } satisfies VerifyResult
      })

      return Verifier.of({ run })
    })
  )
}
