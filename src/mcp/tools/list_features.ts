import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { featuresText } from "../../views/analyticsText.ts"
import { FeatureListParams, FeaturePage } from "../../analytics/schema.ts"
import { defineTool } from "./Tool.ts"

export const listFeatures = defineTool({
  name: "list_features",
  title: "List features (units of work)",
  description:
    "List the units of delivered work detected from sessions that share tickets, issues, files, services or topics. " +
    "Each feature has a status (in_progress, delivered, stalled — the rule is in `rules` and each feature's " +
    "`status_reason`), its sessions, decisions, agents, cost, time span, success rate and ROI with every input shown. " +
    "Filter by status, agent or time; order by recent activity or cost; `as_of` judges status at another time. " +
    "Use get_feature for a feature's sessions, list_feature_merge_suggestions for duplicates. Paginated with `cursor`.",
  input: FeatureListParams,
  output: FeaturePage,
  run: (principal, args) => AnalyticsQuery.use((query) => query.listFeatures(principal, args)),
  text: (page) => featuresText(page.data, page.next_cursor, page.rules.status_rule)
})
