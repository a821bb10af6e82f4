import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { insightsText } from "../../views/analyticsText.ts"
import { InsightListParams, InsightPage } from "../../analytics/schema.ts"
import { defineTool } from "./Tool.ts"

export const listInsights = defineTool({
  name: "list_insights",
  title: "List insights",
  description:
    "Findings the detectors raised over your agents' decisions: cost spikes, error-rate spikes, loops (the same call " +
    "repeated in a session), low-quality streaks, latency regressions, model right-sizing (an expensive model on " +
    "simple work, with the estimated saving) and idle agents. Each has a severity, a time window, the figures and rule " +
    "behind it in `evidence`, and the agent, session and decision ids concerned (ledger ids feed get_decision). " +
    "Filter by types, severities, agent, session or time; newest first; paginated with `cursor`.",
  input: InsightListParams,
  output: InsightPage,
  run: (principal, args) => AnalyticsQuery.use((query) => query.listInsights(principal, args)),
  text: (page) => insightsText(page.data, page.next_cursor)
})
