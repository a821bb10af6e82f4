import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { featureLine, suggestionLine } from "../../views/analyticsText.ts"
import { FeatureDetail, FeatureGetParams } from "../../analytics/schema.ts"
import { plural, usd, when } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const getFeature = defineTool({
  name: "get_feature",
  title: "Get a feature",
  description:
    "One feature (unit of work) by `feature_id` (from list_features): status with its reason, the subjects linking " +
    "its sessions, agents, cost, time span, success rate, ROI with its inputs, its sessions with their summaries " +
    "(session ids feed list_session_decisions), and the features it may duplicate.",
  input: FeatureGetParams,
  output: FeatureDetail,
  run: (principal, args) => AnalyticsQuery.use((query) => query.getFeature(principal, args)),
  text: (f) =>
    [
      featureLine(f).slice(2),
      `Subjects: ${f.subjects.map((s) => `${s.kind} ${s.label} (${plural(s.sessions, "session")})`).join(", ")}.`,
      `ROI inputs: ${JSON.stringify(f.roi.successful_decisions_by_intent)} successful decisions × minutes ` +
      `${JSON.stringify(f.roi.minutes_saved_by_intent)} at $${f.roi.hourly_rate_usd}/h.`,
      `Sessions (${f.sessions.length}):`,
      ...f.sessions.map((s) => `- ${s.session_id} ${s.agent_id} ${when(s.started_at)}: ${plural(s.decision_count, "decision")}, ${usd(s.total_cost_usd)} — ${s.summary}`),
      ...(f.merge_suggestions.length === 0 ? [] : ["May duplicate:", ...f.merge_suggestions.map(suggestionLine)])
    ].join("\n")
})
