/**
 * Who is calling: what a bearer token resolves to. Every read and write of ledger data runs under one.
 */
import { Schema } from "effect"

export const MemberRole = Schema.Literals(["member", "restricted"])
export type MemberRole = typeof MemberRole.Type

/**
 * Credential kinds: Personal Access Tokens for the read surfaces, Gateway Keys for the gateway, OAuth access tokens
 * for MCP, and the app's browser sessions.
 */
export const CredentialKind = Schema.Literals(["pat", "gateway", "oauth", "session"])
export type CredentialKind = typeof CredentialKind.Type

export const Principal = Schema.Struct({
  tenant_id: Schema.String,
  workspace_id: Schema.String,
  user_id: Schema.String,
  role: MemberRole,
  kind: CredentialKind,
  /** credential id (never the token) */
  token_id: Schema.String
})
export type Principal = typeof Principal.Type

/** A tenant's workspace: what every ledger row belongs to, and what a writer's transaction is scoped to. */
export interface WorkspaceScope {
  readonly tenant_id: string
  readonly workspace_id: string
}

/** The part of a principal that scopes ledger rows. */
export interface TenantScope {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly role: MemberRole
}
