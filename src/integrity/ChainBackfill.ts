/**
 * Chains the decisions that are not in their workspace's chain yet: those stored before chaining existed (migration
 * 0019 keeps them as they were), and rows written past the builder (imports). Runs in the builder role at start,
 * workspace by workspace, a page per transaction under the chain's lock, in the order the rows were recorded.
 *
 * A row joins the chain after its head, so its `recorded_at` is raised to the head's when it is older (the rows
 * kept from before chaining have their capture time): recorded_at then never goes back within a chain, which keeps
 * a dropped time partition a prefix of it. Their raw hash is taken from the content as it is when chained.
 */
import { Context, Effect, Layer } from "effect"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { advanceChain, lockChain } from "../chain/heads.ts"
import { texts, uuids } from "../store/arrays.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { supervise } from "../supervision/supervise.ts"
import { RAW_HASH_SQL } from "../chain/chain.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { type ChainRow, factsOfRow, ROW_COLUMNS } from "./rows.ts"
import { listWorkspaces, type UnknownWorkspace } from "./workspaces.ts"

const PAGE = 2_000

export class ChainBackfill extends Context.Service<ChainBackfill, {
  /** Chains every unchained decision; returns how many it chained. */
  readonly run: Effect.Effect<number, DatabaseUnavailable | UnknownWorkspace>
}>()("ledger/integrity/ChainBackfill") {
  static readonly layer = Layer.effect(
    ChainBackfill,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const keys = yield* IntegrityKeys

      /** One page of a workspace's unchained rows, chained; how many. */
      const chainPage = (scope: { tenant_id: string; workspace_id: string }) =>
        tenantSql.write(scope, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [any] = yield* sql`SELECT 1 FROM decisions
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND seq IS NULL LIMIT 1`
          if (any === undefined) return 0
          const head = yield* lockChain(scope)
          const rows = yield* sql<ChainRow & { readonly raw_now: Uint8Array }>`SELECT ${sql.literal(ROW_COLUMNS)}, ${sql.literal(RAW_HASH_SQL)} AS raw_now FROM decisions
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND seq IS NULL
            ORDER BY recorded_at, ledger_id LIMIT ${PAGE}`
          if (rows.length === 0) return 0
          let { seq, at } = head
          let hash: Buffer = head.hash
          const updates = rows.map((row) => {
            at = Math.max(at, row.recorded_at.getTime())
            seq += 1
            const place = { seq, chain_key: keys.current.id, recorded_at: new Date(at) }
            const next = keys.current.hash(factsOfRow(scope, { ...row, ...place }), hash, Buffer.from(row.raw_now))
            const update = { ledger_id: row.ledger_id, ...place, prev_hash: hash, hash: next, raw_hash: Buffer.from(row.raw_now) }
            hash = next
            return update
          })
          const hex = (pick: (u: (typeof updates)[number]) => Buffer) => texts(updates.map((u) => pick(u).toString("hex")))
          yield* sql`UPDATE decisions d SET seq = v.seq::bigint, recorded_at = v.recorded_at::timestamptz, prev_hash = decode(v.prev_hash, 'hex'),
              hash = decode(v.hash, 'hex'), raw_hash = decode(v.raw_hash, 'hex'), chain_key = ${keys.current.id}
            FROM UNNEST(${uuids(updates.map((u) => u.ledger_id))}, ${texts(updates.map((u) => String(u.seq)))},
              ${texts(updates.map((u) => u.recorded_at.toISOString()))}, ${hex((u) => u.prev_hash)}, ${hex((u) => u.hash)},
              ${hex((u) => u.raw_hash)}) AS v(ledger_id, seq, recorded_at, prev_hash, hash, raw_hash)
            WHERE d.ledger_id = v.ledger_id AND d.seq IS NULL`
          yield* advanceChain(scope, { seq, hash, at })
          return rows.length
        }))

      const run = Effect.gen(function*() {
        let chained = 0
        for (const scope of yield* Effect.provideService(listWorkspaces(), TenantSql, tenantSql)) {
          while (true) {
            const n = yield* chainPage(scope)
            chained += n
            if (n < PAGE) break
          }
        }
        if (chained > 0) yield* Effect.logInfo("decisions chained that were stored before chaining", { decisions: chained })
        return chained
      }).pipe(Effect.withSpan("ChainBackfill.run"))

      return ChainBackfill.of({ run })
    })
  )

  /** Runs once when the builder role starts (supervised: a database away at start retries it). */
  static readonly atStart = Layer.effectDiscard(Effect.gen(function*() {
    const { run } = yield* ChainBackfill
    yield* supervise("chain backfill", run)
  }))
}
