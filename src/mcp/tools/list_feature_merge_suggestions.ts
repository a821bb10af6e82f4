import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { suggestionLine } from "../../views/analyticsText.ts"
import { MergeSuggestionPage, MergeSuggestionParams } from "../../analytics/schema.ts"
import { nextPage } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const listFeatureMergeSuggestions = defineTool({
  name: "list_feature_merge_suggestions",
  title: "Features that look like the same work",
  description:
    "Pairs of features that look like the same piece of work tracked twice (e.g. two tickets for one fix), best first, " +
    "each with a score in [0,1], the signals behind it (subject overlap, text similarity, shared agents, time " +
    "proximity) and a readable reason; the scoring rule is in `rule`. Optionally only pairs involving `feature_id`, " +
    "or scoring at least `min_score`. Paginated with `cursor`.",
  input: MergeSuggestionParams,
  output: MergeSuggestionPage,
  run: (principal, args) => AnalyticsQuery.use((query) => query.listFeatureMergeSuggestions(principal, args)),
  text: (page) =>
    page.data.length === 0
      ? "No features look like the same work."
      : [`Merge suggestions (${page.data.length}):`, ...page.data.map(suggestionLine)].join("\n") + nextPage(page.next_cursor)
})
