import { Schema } from "effect"
import { DecisionOrder } from "../../query/params.ts"
import { DecisionFilters, DecisionPage, LedgerQuery } from "../../query/LedgerQuery.ts"
import { pageFields } from "../../views/params.ts"
import { decisionList } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const listDecisions = defineTool({
  name: "list_decisions",
  title: "Search decisions",
  description:
    "Find decisions (model calls) across all agents of your workspace by time range, outcomes (e.g. `error`, " +
    "`refusal`), intents (e.g. `debugging`), cost range in USD, quality range (0–1), agent, session or model. " +
    "Order by `newest` (default), `oldest`, `cost` (most expensive first) or `quality` (lowest first) — e.g. the " +
    "costliest calls this week, or every failed call of one agent. Each row has the `ledger_id` to pass to " +
    "get_decision. Paginated with `cursor`/`next_cursor`.",
  input: Schema.Struct({
    ...DecisionFilters.fields,
    order: Schema.optional(DecisionOrder),
    ...pageFields
  }),
  output: DecisionPage,
  run: (principal, args) => LedgerQuery.use((query) => query.listDecisions(principal, args)),
  text: (page) => decisionList("Decisions", page.data, page.next_cursor)
})
