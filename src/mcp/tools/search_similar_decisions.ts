import { AnalyticsQuery } from "../../analytics/AnalyticsQuery.ts"
import { similarText } from "../../views/analyticsText.ts"
import { SimilarParams, SimilarResult } from "../../analytics/schema.ts"
import { defineTool } from "./Tool.ts"

export const searchSimilarDecisions = defineTool({
  name: "search_similar_decisions",
  title: "Find similar decisions",
  description:
    "Find decisions that asked or concluded the same thing as a free `text` or as a given decision (`ledger_id`) — " +
    "e.g. has any agent already solved this, or which calls are near-duplicates. Accepts the list_decisions filters " +
    "(time range, outcomes, intents, cost, quality, agent, session, model). Each result has a score in [0,1] (0.6 and " +
    "above reads as the same question in other words) and the search terms it shares; the payload says which vectors " +
    "(local or model embeddings) and which candidate search were used.",
  input: SimilarParams,
  output: SimilarResult,
  run: (principal, args) => AnalyticsQuery.use((query) => query.searchSimilarDecisions(principal, args)),
  text: similarText
})
