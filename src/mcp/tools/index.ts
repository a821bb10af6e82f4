/**
 * The MCP tools, in `tools/list` order. Adding a tool: write its module (see ./Tool.ts) and append it here.
 */
import { getDecision } from "./get_decision.ts"
import { getFeature } from "./get_feature.ts"
import { getPulseReport } from "./get_pulse_report.ts"
import { listAgentSessions } from "./list_agent_sessions.ts"
import { listAgents } from "./list_agents.ts"
import { listDecisions } from "./list_decisions.ts"
import { listFeatureMergeSuggestions } from "./list_feature_merge_suggestions.ts"
import { listFeatures } from "./list_features.ts"
import { listInsights } from "./list_insights.ts"
import { listSessionDecisions } from "./list_session_decisions.ts"
import { queryGraph } from "./query_graph.ts"
import { renderUi } from "./render_ui.ts"
import { searchSimilarDecisions } from "./search_similar_decisions.ts"

export const tools = [
  listAgents,
  listAgentSessions,
  listSessionDecisions,
  getDecision,
  listDecisions,
  queryGraph,
  searchSimilarDecisions,
  listFeatures,
  getFeature,
  listFeatureMergeSuggestions,
  listInsights,
  getPulseReport,
  renderUi
] as const
