/**
 * The agents a batch writes (docs/ARCHITECTURE.md, "The promises"): the advisory locks every builder takes on them
 * before it reads or writes their sessions, and their rollups, added in one upsert.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql } from "./TenantSql.ts"
import { floats, ints, texts, times, zipped } from "./arrays.ts"
import { pgText } from "./pgValues.ts"

/** Class id of the ledger's advisory locks (the first key of the two-key form). */
const AGENT_LOCK_CLASS = 0x1ed9e7

/** The advisory lock key of an agent: 32 bits of a hash (a collision only serialises two agents more). */
export const agentLockKey = (scope: WorkspaceScope, agentId: string): number =>
  Crypto.hash("sha1", `${scope.tenant_id}\u0000${scope.workspace_id}\u0000${agentId}`, "buffer").readInt32BE(0)

/** Takes the agents' transaction-level locks in ascending key order (the one order every builder uses). */
export const lockAgents = Effect.fnUntraced(function*(keys: Iterable<number>) {
  const sorted = [...new Set(keys)].sort((a, b) => a - b)
  if (sorted.length === 0) return
  const sql = yield* ScopedSql
  // unnest yields the array in order, so the locks are taken in that order
  yield* sql`SELECT pg_advisory_xact_lock(${AGENT_LOCK_CLASS}, key) FROM unnest(${ints(sorted)}) AS key`
})

/** What a batch adds to one agent's rollup. */
export interface AgentDelta {
  agent_name: string | null
  named_at: number
  decision_count: number
  session_count: number
  error_count: number
  total_cost_usd: number
  total_tokens: number
  confidence_sum: number
  first_seen_at: number
  last_seen_at: number
}

/** The agents' rollups added in one upsert (none when nothing changed); sent with the chain's lock (lockChain). */
export const agentsUpsert = (sql: ScopedSql["Service"], scope: WorkspaceScope, deltas: ReadonlyMap<string, AgentDelta>) => {
  if (deltas.size === 0) return undefined
  const ids = [...deltas.keys()]
  const list = [...deltas.values()]
  // The name follows the most recent call that carried one; a late capture does not rename the agent back.
  return sql`
    INSERT INTO agents (tenant_id, workspace_id, agent_id, agent_name, decision_count, session_count, error_count,
      total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, agent_id, agent_name, decision_count, session_count,
      error_count, total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at
    FROM ${zipped(sql, {
      agent_id: texts(ids.map(pgText)),
      agent_name: texts(list.map((d) => d.agent_name === null ? null : pgText(d.agent_name))),
      decision_count: floats(list.map((d) => d.decision_count)),
      session_count: floats(list.map((d) => d.session_count)),
      error_count: floats(list.map((d) => d.error_count)),
      total_cost_usd: floats(list.map((d) => d.total_cost_usd)),
      total_tokens: floats(list.map((d) => d.total_tokens)),
      confidence_sum: floats(list.map((d) => d.confidence_sum)),
      first_seen_at: times(list.map((d) => d.first_seen_at)),
      last_seen_at: times(list.map((d) => d.last_seen_at))
    })} AS v
    ON CONFLICT (tenant_id, workspace_id, agent_id) DO UPDATE SET
      agent_name = CASE WHEN EXCLUDED.last_seen_at >= agents.last_seen_at
        THEN COALESCE(EXCLUDED.agent_name, agents.agent_name) ELSE COALESCE(agents.agent_name, EXCLUDED.agent_name) END,
      decision_count = agents.decision_count + EXCLUDED.decision_count,
      session_count = agents.session_count + EXCLUDED.session_count,
      error_count = agents.error_count + EXCLUDED.error_count,
      total_cost_usd = agents.total_cost_usd + EXCLUDED.total_cost_usd,
      total_tokens = agents.total_tokens + EXCLUDED.total_tokens,
      confidence_sum = agents.confidence_sum + EXCLUDED.confidence_sum,
      first_seen_at = LEAST(agents.first_seen_at, EXCLUDED.first_seen_at),
      last_seen_at = GREATEST(agents.last_seen_at, EXCLUDED.last_seen_at)`
}

/** Nothing added yet. */
export const noAgentDelta = (): AgentDelta => ({
  agent_name: null,
  named_at: -Infinity,
  decision_count: 0,
  session_count: 0,
  error_count: 0,
  total_cost_usd: 0,
  total_tokens: 0,
  confidence_sum: 0,
  first_seen_at: Infinity,
  last_seen_at: -Infinity
})
