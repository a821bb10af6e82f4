import { Schema } from "effect"
import { AgentOrder, IsoDateTime } from "../../query/params.ts"
import { AgentPage, LedgerQuery } from "../../query/LedgerQuery.ts"
import { pageFields } from "../../views/params.ts"
import { nextPage, plural, score, usd, when } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const listAgents = defineTool({
  name: "list_agents",
  title: "List agents",
  description:
    "List the AI agents recorded in your ledger workspace, with their rollups: decision and session counts, total cost " +
    "in USD, mean confidence, error count, first and last activity. Start here to find an `agent_id`, then call " +
    "list_agent_sessions or list_decisions with it. Ordered by latest activity unless `order` says otherwise; " +
    "paginated with `cursor`/`next_cursor`.",
  input: Schema.Struct({
    order: Schema.optional(AgentOrder),
    active_since: Schema.optional(IsoDateTime.annotate({ description: "Only agents active at or after this ISO 8601 time." })),
    active_until: Schema.optional(IsoDateTime.annotate({ description: "Only agents active before this ISO 8601 time." })),
    ...pageFields
  }),
  output: AgentPage,
  run: (principal, args) => LedgerQuery.use((query) => query.listAgents(principal, args)),
  text: (page) =>
    page.data.length === 0
      ? "No agents match."
      : `${plural(page.data.length, "agent")}:\n` +
        page.data.map((a) =>
          `- ${a.agent_id}${a.agent_name && a.agent_name !== a.agent_id ? ` (${a.agent_name})` : ""}: ` +
          `${plural(a.decision_count, "decision")} in ${plural(a.session_count, "session")}, ${usd(a.total_cost_usd)}, ` +
          `${plural(a.error_count, "error")}, mean confidence ${score(a.avg_confidence)}, last active ${when(a.last_seen_at)}`
        ).join("\n") + nextPage(page.next_cursor)
})
