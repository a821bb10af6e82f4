import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { graphText } from "../../views/analyticsText.ts"
import { GraphParams, GraphResult } from "../../analytics/schema.ts"
import { defineTool } from "./Tool.ts"

export const queryGraph = defineTool({
  name: "query_graph",
  title: "Explore the decision graph",
  description:
    "Walk the graph linking agents, sessions, decisions, the subjects they are about (tickets, files, services, " +
    "topics) and the evidence sources they cite. Give one start node (`agent_id`, `session_id`, `ledger_id`, " +
    "`subject` such as `ticket:PAY-231`, or `source`), the edge types to follow, a direction and a depth (1–3); " +
    "nearest nodes come first up to `limit`. Or set `mode` to `agent_network` to see which agents hand " +
    "work to each other, share executions or work on the same subjects. Edges carry labels and weights; node keys " +
    "are `type:id`, and ids feed get_decision, list_session_decisions, get_feature.",
  input: GraphParams,
  output: GraphResult,
  run: (principal, args) => AnalyticsQuery.use((query) => query.queryGraph(principal, args)),
  text: graphText
})
