import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { pulseText } from "../../views/analyticsText.ts"
import { PulseParams, PulseReport } from "../../analytics/schema.ts"
import { defineTool } from "./Tool.ts"

export const getPulseReport = defineTool({
  name: "get_pulse_report",
  title: "Pulse report",
  description:
    "A summary of a UTC day, week or month (the one containing `date`, default now) or of a `range`: totals (decisions, " +
    "sessions, agents, cost, errors, quality, latency, tokens) with changes against the period just before, top " +
    "agents, outcome and intent mix, costliest sessions, the insights whose window overlaps the period and features " +
    "delivered. `partial` flags figures " +
    "that cannot be complete (period not over, analytics catching up, no data before the previous period).",
  input: PulseParams,
  output: PulseReport,
  run: (principal, args) => AnalyticsQuery.use((query) => query.getPulseReport(principal, args)),
  text: pulseText
})
