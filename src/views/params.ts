/**
 * Tool parameters shared by several tools, built from the read model's parameter schemas (src/query/params.ts) so
 * MCP and REST accept exactly the same values; descriptions here point a model at where ids come from.
 */
import { Schema } from "effect"
import { AgentId, LedgerUuid, PageCursor, PageLimit } from "../query/params.ts"

/** `limit` + `cursor` of every list tool. */
export const pageFields = {
  limit: Schema.optional(PageLimit),
  cursor: Schema.optional(
    PageCursor.annotate({
      description: "Opaque cursor: the `next_cursor` of the previous page; keep the other arguments unchanged."
    })
  )
}

export const agentIdParam = AgentId.annotate({
  description: "The agent's id (`agent_id` from list_agents; the id the agent sends to the gateway)."
})

export const sessionIdParam = LedgerUuid.annotate({
  description: "The session's id (`session_id` from list_agent_sessions or from a decision)."
})

export const ledgerIdParam = LedgerUuid.annotate({
  description: "The decision's id (`ledger_id` from a decision list, or the `x-ledger-id` header the gateway returned)."
})
