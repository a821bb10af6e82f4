/** The workspaces the integrity commands walk, by name, `TENANT/NAME` or id (read as the control role). */
import { Effect, Schema } from "effect"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"

export interface NamedWorkspace {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly tenant: string
  readonly workspace: string
}

/** A workspace filter (NAME, TENANT/NAME or id) that names none. */
export class UnknownWorkspace extends Schema.TaggedError<UnknownWorkspace>()("UnknownWorkspace", {
  message: Schema.String
}) {}

/** Every workspace, or those `filter` names; a filter that names none fails. */
export const listWorkspaces = Effect.fnUntraced(function*(filter?: string) {
  const tenantSql = yield* TenantSql
  const all = yield* tenantSql.control(ScopedSql.use((sql) =>
    sql<NamedWorkspace>`SELECT w.tenant_id, w.workspace_id, t.name AS tenant, w.name AS workspace
      FROM workspaces w JOIN tenants t ON t.tenant_id = w.tenant_id ORDER BY t.name, w.name, w.workspace_id`
  ))
  if (filter === undefined) return all
  const picked = all.filter((w) => w.workspace_id === filter || w.workspace === filter || `${w.tenant}/${w.workspace}` === filter)
  if (picked.length === 0) {
    return yield* Effect.fail(new UnknownWorkspace({ message: `no workspace named "${filter}" (give NAME, TENANT/NAME or the workspace id)` }))
  }
  return picked
})
