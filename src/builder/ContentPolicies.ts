/**
 * Each workspace's content policy (src/domain/contentPolicy.ts), kept on its chain row, and what it does to a call
 * before the builder stores it: `redacted` masks the exchange before anything is derived from it, `metadata` keeps
 * the derivation's labels, scores and cost and drops every text. The builder reads a workspace's policy at most
 * every few seconds (`POLICY_TTL`): a change applies to calls built from then on, not to decisions already stored.
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { type ContentPolicy, withoutContent } from "../domain/contentPolicy.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { redactText } from "../domain/redact.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import type { Reconstruction, StorableCapture } from "./reconstruct.ts"

const POLICY_TTL_MS = 5_000

/** The exchange with secrets and personal data masked (the masks keep JSON text JSON). */
const redactedCapture = (capture: StorableCapture): StorableCapture => ({
  ...capture,
  request: redactText(capture.request),
  response: capture.response === null ? null : redactText(capture.response),
  context: capture.context == null ? capture.context : redactText(capture.context),
  error: capture.error === null ? null : { ...capture.error, message: redactText(capture.error.message) }
})

/** What the builder derives from under `policy`. */
export const beforeDerivation = (capture: StorableCapture, policy: ContentPolicy): StorableCapture =>
  policy === "redacted" ? redactedCapture(capture) : capture

/** What the builder stores under `policy`: under `metadata`, the call without a word of its exchange. */
export const afterDerivation = (reconstruction: Reconstruction, policy: ContentPolicy): Reconstruction =>
  policy !== "metadata" ? reconstruction : {
    ...reconstruction,
    capture: {
      ...reconstruction.capture,
      request: "",
      response: null,
      context: null,
      error: reconstruction.capture.error === null ? null : { ...reconstruction.capture.error, message: "" }
    },
    derivation: withoutContent(reconstruction.derivation),
    subjects: []
  }

export class ContentPolicies extends Context.Service<ContentPolicies, {
  /** The workspace's policy as the builder applies it (cached for a few seconds). */
  readonly get: (scope: WorkspaceScope) => Effect.Effect<ContentPolicy, DatabaseUnavailable>
  readonly set: (scope: WorkspaceScope, policy: ContentPolicy) => Effect.Effect<void, DatabaseUnavailable>
}>()("ledger/builder/ContentPolicies") {
  static readonly layer = Layer.effect(
    ContentPolicies,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const cached = new Map<string, { readonly policy: ContentPolicy; readonly until: number }>()

      const read = (scope: WorkspaceScope) =>
        tenantSql.write(scope, ScopedSql.use((sql) =>
          sql<{ content_policy: ContentPolicy }>`SELECT content_policy FROM ledger_chains
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
        )).pipe(Effect.map(([row]) => row?.content_policy ?? "full"))

      const get = Effect.fn("ContentPolicies.get")(function*(scope: WorkspaceScope) {
        const key = `${scope.tenant_id}/${scope.workspace_id}`
        const now = yield* Clock.currentTimeMillis
        const hit = cached.get(key)
        if (hit !== undefined && hit.until > now) return hit.policy
        const policy = yield* read(scope)
        cached.set(key, { policy, until: now + POLICY_TTL_MS })
        return policy
      })

      const set = Effect.fn("ContentPolicies.set")(function*(scope: WorkspaceScope, policy: ContentPolicy) {
        yield* tenantSql.write(scope, ScopedSql.use((sql) =>
          sql`INSERT INTO ledger_chains (tenant_id, workspace_id, content_policy)
            VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${policy})
            ON CONFLICT (tenant_id, workspace_id) DO UPDATE SET content_policy = EXCLUDED.content_policy`
        ))
        cached.delete(`${scope.tenant_id}/${scope.workspace_id}`)
      })

      return ContentPolicies.of({ get, set })
    })
  )
}
