/**
 * The signed texts of the chain's markers: a prune marker ("pruned up to seq N, whose hash was H") and an audit event
 * (an erasure). Each is HMAC-SHA-256 under a numbered chain key, so neither can be written without the key.
 */
import { canonicalJson } from "../chain/chain.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

export const pruneMacText = (scope: WorkspaceScope, seq: number, hash: Buffer, at: number) =>
  `ledger-prune/1\n${scope.tenant_id}\n${scope.workspace_id}\n${seq}\n${hash.toString("hex")}\n${at}`

export interface AuditEvent {
  readonly event_id: string
  readonly kind: string
  readonly at: Date
  readonly detail: unknown
}

export const auditMacText = (scope: WorkspaceScope, event: AuditEvent) =>
  `ledger-audit/1\n${canonicalJson([scope.tenant_id, scope.workspace_id, event.event_id, event.kind, event.at.getTime(), event.detail])}`
