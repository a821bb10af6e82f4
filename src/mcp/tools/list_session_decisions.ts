import { Schema } from "effect"
import { DecisionOrder } from "../../query/params.ts"
import { DecisionPage, LedgerQuery } from "../../query/LedgerQuery.ts"
import { pageFields, sessionIdParam } from "../../views/params.ts"
import { decisionList } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const listSessionDecisions = defineTool({
  name: "list_session_decisions",
  title: "List a session's decisions",
  description:
    "List the decisions (model calls) of one session, oldest first by default, so you can follow what the agent did " +
    "step by step: time, model, intent, outcome, cost, quality, latency and a title. Use get_decision with a " +
    "`ledger_id` for the full audit trail of one step; use list_decisions with `session_id` to filter by outcome, " +
    "intent, cost or quality. Paginated with `cursor`/`next_cursor`.",
  input: Schema.Struct({
    session_id: sessionIdParam,
    order: Schema.optional(DecisionOrder),
    ...pageFields
  }),
  output: DecisionPage,
  run: (principal, { session_id, ...params }) =>
    LedgerQuery.use((query) => query.listSessionDecisions(principal, session_id, { order: "oldest", ...params })),
  text: (page, args) => decisionList(`Decisions of session ${args.session_id}`, page.data, page.next_cursor)
})
