/**
 * A workspace's chain head (its last seq, hash and time), inside the workspace's transaction. `lockChain` takes the
 * head row (created on first use) for the rest of the transaction, so seq is gapless and in commit order: a batch that
 * rolls back leaves neither rows nor a moved head. A transaction writes one workspace and takes its agents' locks
 * before the chain's, so builders never deadlock.
 */
import { Effect } from "effect"
import type { Statement } from "effect/sql"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { GENESIS } from "./chain.ts"

export interface ChainHead {
  readonly seq: number
  readonly hash: Buffer
  /** epoch ms of the head's recorded_at (0 for an empty chain) */
  readonly at: number
}

/**
 * Locks and reads the workspace's chain head; `alongside`, a data-modifying statement, runs in the same round trip
 * (the builder's last write before its decisions', so the lock costs the transaction no extra wait on the network).
 */
export const lockChain = Effect.fnUntraced(function*(scope: WorkspaceScope, alongside?: Statement.Fragment) {
  const sql = yield* ScopedSql
  const [row] = yield* sql<{ head_seq: string | number; head_hash: Uint8Array | null; head_at: Date | null }>`
    ${alongside === undefined ? sql`` : sql`WITH alongside AS (${alongside})`}
    INSERT INTO ledger_chains (tenant_id, workspace_id) VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid)
    ON CONFLICT (tenant_id, workspace_id) DO UPDATE SET head_seq = ledger_chains.head_seq
    RETURNING head_seq, head_hash, head_at`
  return {
    seq: Number(row!.head_seq),
    hash: row!.head_hash === null ? GENESIS : Buffer.from(row!.head_hash),
    at: row!.head_at?.getTime() ?? 0
  } satisfies ChainHead
})

/** The statement that moves the locked head to the last decision chained (alone, or in a builder's insert). */
export const headUpdate = (sql: ScopedSql["Service"], scope: WorkspaceScope, head: ChainHead) =>
  sql`UPDATE ledger_chains SET head_seq = ${head.seq}, head_hash = decode(${head.hash.toString("hex")}, 'hex'),
    head_at = ${new Date(head.at)}
    WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`

/** Moves the locked head to the last decision chained. */
export const advanceChain = (scope: WorkspaceScope, head: ChainHead) => ScopedSql.use((sql) => headUpdate(sql, scope, head))
