import { Schema } from "effect"
import { IsoDateTime, SessionOrder } from "../../query/params.ts"
import { LedgerQuery, SessionPage } from "../../query/LedgerQuery.ts"
import { agentIdParam, pageFields } from "../../views/params.ts"
import { nextPage, plural, usd, when } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const listAgentSessions = defineTool({
  name: "list_agent_sessions",
  title: "List an agent's sessions",
  description:
    "List the sessions (runs) of one agent: a session groups the agent's decisions of one execution (`execution_id`) " +
    "or one burst of activity. Each has start/end time, decision and error counts, cost in USD, tokens and a summary " +
    "of what the agent worked on. Use it after list_agents; then call list_session_decisions with a `session_id`. " +
    "Latest activity first unless `order` says otherwise; paginated with `cursor`/`next_cursor`.",
  input: Schema.Struct({
    agent_id: agentIdParam,
    order: Schema.optional(SessionOrder),
    since: Schema.optional(IsoDateTime.annotate({ description: "Only sessions active at or after this ISO 8601 time." })),
    until: Schema.optional(IsoDateTime.annotate({ description: "Only sessions active before this ISO 8601 time." })),
    ...pageFields
  }),
  output: SessionPage,
  run: (principal, { agent_id, ...params }) => LedgerQuery.use((query) => query.listAgentSessions(principal, agent_id, params)),
  text: (page, args) =>
    page.data.length === 0
      ? `No sessions of agent ${args.agent_id} match.`
      : `${plural(page.data.length, "session")} of agent ${args.agent_id}:\n` +
        page.data.map((s) =>
          `- ${s.session_id} ${when(s.started_at)} → ${when(s.ended_at)}${s.execution_id ? ` (execution ${s.execution_id})` : ""}: ` +
          `${plural(s.decision_count, "decision")}, ${plural(s.error_count, "error")}, ${usd(s.total_cost_usd)}, ` +
          `${s.total_tokens} tokens${s.summary ? ` — ${s.summary}` : ""}`
        ).join("\n") + nextPage(page.next_cursor)
})
