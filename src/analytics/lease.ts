/**
 * Which builder process works a workspace's analytics. Every builder process runs the analytics fibers; without a
 * lease each of them read and analysed the same batches and all but one then found them done (the per-batch
 * advisory lock keeps that correct, not cheap). The lease lives on the workspace's `analytics_progress` row: the
 * holder renews it every round; a process that stops lets it lapse, and another takes over after `LEASE`.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { ScopedSql, type TenantSql } from "../store/TenantSql.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

/** This process, as a lease holder: the materialiser and detectors of one process share its leases. */
const PROCESS_OWNER = Crypto.randomUUID()

/** Longer than a round takes; how long analytics of a workspace pauses when its holder dies. */
const LEASE = "30 seconds"

/** Claims or renews the workspace's analytics lease for this process; false: another process holds it. */
export const claimWorkspace = (tenantSql: (typeof TenantSql)["Service"], scope: WorkspaceScope, owner = PROCESS_OWNER) =>
  tenantSql.write(scope, Effect.gen(function*() {
    const sql = yield* ScopedSql
    const rows = yield* sql`
      INSERT INTO analytics_progress (tenant_id, workspace_id, lease_owner, lease_until)
      VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${owner}::uuid, now() + ${LEASE}::interval)
      ON CONFLICT (tenant_id, workspace_id) DO UPDATE SET lease_owner = EXCLUDED.lease_owner, lease_until = EXCLUDED.lease_until
      WHERE analytics_progress.lease_owner IS NULL OR analytics_progress.lease_owner = EXCLUDED.lease_owner
        OR analytics_progress.lease_until < now()
      RETURNING 1`
    return rows.length > 0
  }))

/** Every workspace of the install (as the control role): what the analytics fibers go round, claiming each. */
export const allWorkspaces = (tenantSql: (typeof TenantSql)["Service"]) =>
  tenantSql.control(
    ScopedSql.use((sql) => sql<WorkspaceScope>`SELECT tenant_id::text AS tenant_id, workspace_id::text AS workspace_id FROM workspaces`)
  )

/**
 * The key of a workspace's analytics lock: one materialiser batch writes at a time per workspace, across processes,
 * and an erasure's page waits for the batch being written (and the batch after it sees the erasure).
 */
export const analyticsLockKey = (scope: WorkspaceScope) => `ledger-analytics:${scope.tenant_id}:${scope.workspace_id}`
