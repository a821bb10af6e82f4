/**
 * The shapes analytics answers with (docs/ARCHITECTURE.md, "Analytics"): graph, similar decisions, features and merge
 * suggestions, insights, the pulse report — and their parameters. MCP `structuredContent` is exactly these; every
 * figure comes with what it was computed from, so a reader can check it.
 */
import { Schema } from "effect"
import { DecisionSummary, Outcome } from "../domain/decision.ts"
import { DecisionFilters } from "../query/LedgerQuery.ts"
import { AgentId, IsoDateTime, LedgerUuid, PageCursor, PageLimit, withoutNul } from "../query/params.ts"

const describe = <S extends Schema.Top>(schema: S, description: string) => schema.annotate({ description }) as S

// ---------------------------------------------------------------------------------------------------------
// Graph

export const NodeType = describe(
  Schema.Literals(["agent", "session", "decision", "subject", "source"]),
  "agent (id: agent_id), session (session_id), decision (ledger_id), subject (`kind:key`, e.g. `ticket:PAY-231`), " +
    "source (evidence source `kind:identity`, e.g. `url:https://…`, `tool:search_invoices`)."
)
export type NodeType = typeof NodeType.Type

export const EdgeType = Schema.Literals([
  "ran",
  "contains",
  "cites",
  "about",
  "handed_off_to",
  "shares_subject",
  "shares_execution"
])
export type EdgeType = typeof EdgeType.Type

export const EDGE_TYPES: ReadonlyArray<EdgeType> = EdgeType.literals

export const EdgeTypes = describe(
  Schema.Array(EdgeType),
  "Edge types to follow (default all): ran (agent→session), contains (session→decision), cites (decision→evidence " +
    "source), about (decision→subject), handed_off_to (agent→agent: one agent's output reused as another's input), " +
    "shares_subject (session↔session and agent↔agent sharing tickets, files, services, topics…), shares_execution " +
    "(agent↔agent working under one execution_id)."
)

export const GraphNode = Schema.Struct({
  /** `type:id`, the node's key in `edges` */
  key: Schema.String,
  type: NodeType,
  id: Schema.String,
  label: Schema.String,
  /** hops from the start node (0 for it); agent_network: 0 */
  depth: Schema.Number
})
export type GraphNode = typeof GraphNode.Type

export const GraphEdge = Schema.Struct({
  type: EdgeType,
  source: Schema.String,
  target: Schema.String,
  /** ran: decisions in the session; handed_off_to: hand-offs; shares_*: shared subjects / executions; others 1 */
  weight: Schema.Number,
  label: Schema.String
})
export type GraphEdge = typeof GraphEdge.Type

export const GraphResult = Schema.Struct({
  mode: Schema.Literals(["traverse", "agent_network"]),
  start: Schema.NullOr(Schema.String),
  edge_types: Schema.Array(EdgeType),
  direction: Schema.Literals(["out", "in", "both"]),
  depth: Schema.Number,
  nodes: Schema.Array(GraphNode),
  edges: Schema.Array(GraphEdge),
  /** true when the node limit stopped the traversal before it reached `depth` everywhere */
  truncated: Schema.Boolean
})
export type GraphResult = typeof GraphResult.Type

export const MAX_GRAPH_DEPTH = 3
export const MAX_GRAPH_NODES = 500

/** The start node of a walk: exactly one of these (traverse mode). */
export const START_PARAMS = ["agent_id", "session_id", "ledger_id", "subject", "source"] as const

export const GraphParams = Schema.Struct({
  mode: Schema.optional(describe(
    Schema.Literals(["traverse", "agent_network"]),
    "`traverse` (default): walk from one start node — give exactly one of agent_id, session_id, ledger_id, subject, " +
      "source. `agent_network`: every agent and how agents are linked (hand-offs, shared executions, shared subjects)."
  )),
  agent_id: Schema.optional(describe(AgentId, "Start at this agent (`agent_id` from list_agents).")),
  session_id: Schema.optional(describe(LedgerUuid, "Start at this session.")),
  ledger_id: Schema.optional(describe(LedgerUuid, "Start at this decision.")),
  subject: Schema.optional(describe(
    Schema.String.check(Schema.isMinLength(3), Schema.isMaxLength(2048), withoutNul),
    "Start at this subject, `kind:key`: ticket:PAY-231, issue:org/repo#12, file:src/pay/retry.ts, service:payment-service, " +
      "table:…, function:…, topic:…, tool:…, url:…"
  )),
  source: Schema.optional(describe(
    Schema.String.check(Schema.isMinLength(3), Schema.isMaxLength(2048), withoutNul),
    "Start at this evidence source, `kind:identity`: url:https://…, file:path, tool:name, document:<hash>, image:…"
  )),
  edge_types: Schema.optional(EdgeTypes),
  direction: Schema.optional(describe(
    Schema.Literals(["out", "in", "both"]),
    "Follow edges from the node (`out`), into it (`in`) or both (default). Shared-subject and shared-execution edges go both ways."
  )),
  depth: Schema.optional(describe(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_GRAPH_DEPTH })),
    `Hops from the start node, 1–${MAX_GRAPH_DEPTH} (default 2).`
  )),
  limit: Schema.optional(describe(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_GRAPH_NODES })),
    `Most nodes returned, 1–${MAX_GRAPH_NODES} (default 100); nearer nodes come first.`
  )),
  min_weight: Schema.optional(describe(
    Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)),
    "agent_network: only links at least this strong (default 1)."
  ))
})
export type GraphParams = typeof GraphParams.Type

// ---------------------------------------------------------------------------------------------------------
// Similar decisions

/** What a text search found a decision by: the query as written, as a phrase, every word of it, or meaning alone. */
export const SimilarMatch = Schema.Literals(["exact", "phrase", "all_terms", "meaning"])
export type SimilarMatch = typeof SimilarMatch.Type

export const SimilarDecision = Schema.Struct({
  ...DecisionSummary.fields,
  /**
   * The calibrated score, in [0,1]. A text search: 0.95–1 when the decision holds the query (of several words) as
   * written, 0.9–0.95 as a phrase (its words in order, stemmed; a one-word query that it holds), 0.5–0.89 when it holds every word of it, below that the similarity alone
   * (at most 0.89). A search by `ledger_id`: the similarity.
   */
  score: Schema.Number,
  /** cosine similarity of the two vectors (model embeddings when both have them, local hashed vectors otherwise), in [0,1] */
  similarity: Schema.Number,
  match: SimilarMatch,
  /** search terms (stemmed) the two texts share */
  shared_terms: Schema.Array(Schema.String)
})
export type SimilarDecision = typeof SimilarDecision.Type

export const SimilarResult = Schema.Struct({
  query: Schema.Struct({ text: Schema.NullOr(Schema.String), ledger_id: Schema.NullOr(Schema.String) }),
  /** `local` (hashed word/trigram vectors) or `embeddings:<model>` */
  representation: Schema.String,
  /**
   * how candidates by meaning were found: `pgvector` (nearest neighbours), `full_text` (rarest shared terms), `recent`
   * (only common terms: the latest matching decisions); decisions holding every word of a text query are candidates too
   */
  candidates: Schema.Literals(["pgvector", "full_text", "recent"]),
  min_score: Schema.Number,
  data: Schema.Array(SimilarDecision)
})
export type SimilarResult = typeof SimilarResult.Type

export const MAX_SIMILAR = 50

export const SimilarParams = Schema.Struct({
  text: Schema.optional(describe(
    Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(8000), withoutNul),
    "Free text to find decisions about (give this or `ledger_id`)."
  )),
  ledger_id: Schema.optional(describe(LedgerUuid, "Find decisions similar to this one (give this or `text`).")),
  ...DecisionFilters.fields,
  limit: Schema.optional(describe(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_SIMILAR })),
    `Most results, 1–${MAX_SIMILAR} (default 10).`
  )),
  min_score: Schema.optional(describe(
    Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })),
    "Only results scoring at least this (0–1, default 0.3). Text search: ≥ 0.95 holds the query as written, ≥ 0.9 as a phrase, " +
      "≥ 0.5 holds all its words; below, similarity by meaning (0.3 clears all but about 1 % of unrelated decisions). " +
      "By ledger_id: similarity, 0.6 and above reads as a near-duplicate."
  ))
})
export type SimilarParams = typeof SimilarParams.Type

// ---------------------------------------------------------------------------------------------------------
// Features

export const FeatureStatus = Schema.Literals(["in_progress", "delivered", "stalled"])
export type FeatureStatus = typeof FeatureStatus.Type

export const FeatureSubject = Schema.Struct({
  subject_id: Schema.String,
  kind: Schema.String,
  label: Schema.String,
  /** sessions of the feature that mention it */
  sessions: Schema.Number
})

export const Roi = Schema.Struct({
  /** value_usd / cost_usd; null when nothing was spent */
  roi: Schema.NullOr(Schema.Number),
  value_usd: Schema.Number,
  cost_usd: Schema.Number,
  hourly_rate_usd: Schema.Number,
  /** minutes one successful decision saves, for the intents that occur */
  minutes_saved_by_intent: Schema.Record(Schema.String, Schema.Number),
  successful_decisions_by_intent: Schema.Record(Schema.String, Schema.Number),
  formula: Schema.String
})
export type Roi = typeof Roi.Type

export const Feature = Schema.Struct({
  feature_id: Schema.String,
  title: Schema.String,
  status: FeatureStatus,
  /** the rule that gave `status`, with this feature's figures */
  status_reason: Schema.String,
  subjects: Schema.Array(FeatureSubject),
  session_count: Schema.Number,
  decision_count: Schema.Number,
  agent_count: Schema.Number,
  agents: Schema.Array(Schema.String),
  cost_usd: Schema.Number,
  started_at: Schema.String,
  last_activity_at: Schema.String,
  time_span_hours: Schema.Number,
  /** successful decisions (outcome success or tool_call) / decisions */
  success_rate: Schema.Number,
  last_outcome: Outcome,
  roi: Roi
})
export type Feature = typeof Feature.Type

export const FeatureSession = Schema.Struct({
  session_id: Schema.String,
  agent_id: Schema.String,
  started_at: Schema.String,
  ended_at: Schema.String,
  decision_count: Schema.Number,
  total_cost_usd: Schema.Number,
  summary: Schema.String
})

export const MergeSuggestion = Schema.Struct({
  feature_a: Schema.Struct({ feature_id: Schema.String, title: Schema.String }),
  feature_b: Schema.Struct({ feature_id: Schema.String, title: Schema.String }),
  /** in [0,1]: the weighted signals in `signals` */
  score: Schema.Number,
  signals: Schema.Struct({
    subject_overlap: Schema.Number,
    text_similarity: Schema.Number,
    shared_agents: Schema.Number,
    time_proximity: Schema.Number
  }),
  reason: Schema.String
})
export type MergeSuggestion = typeof MergeSuggestion.Type

export const FeatureDetail = Schema.Struct({
  ...Feature.fields,
  sessions: Schema.Array(FeatureSession),
  merge_suggestions: Schema.Array(MergeSuggestion)
})
export type FeatureDetail = typeof FeatureDetail.Type

export const FeatureRules = Schema.Struct({
  status_rule: Schema.String,
  linking_rule: Schema.String
})

export const FeaturePage = Schema.Struct({
  data: Schema.Array(Feature),
  next_cursor: Schema.NullOr(Schema.String),
  as_of: Schema.String,
  rules: FeatureRules
})
export type FeaturePage = typeof FeaturePage.Type

export const MergeSuggestionPage = Schema.Struct({
  data: Schema.Array(MergeSuggestion),
  next_cursor: Schema.NullOr(Schema.String),
  rule: Schema.String
})
export type MergeSuggestionPage = typeof MergeSuggestionPage.Type

const asOfParam = describe(
  IsoDateTime,
  "Judge status as of this time (default now): `delivered`/`stalled` need a quiet period before it."
)

const pageParams = {
  limit: Schema.optional(PageLimit),
  cursor: Schema.optional(describe(PageCursor, "Opaque cursor: the `next_cursor` of the previous page; keep the other arguments unchanged."))
}

export const FeatureListParams = Schema.Struct({
  status: Schema.optional(describe(FeatureStatus, "Only features with this status.")),
  agent_id: Schema.optional(describe(AgentId, "Only features this agent worked on.")),
  since: Schema.optional(describe(IsoDateTime, "Only features active at or after this time.")),
  until: Schema.optional(describe(IsoDateTime, "Only features that started before this time.")),
  order: Schema.optional(describe(
    Schema.Literals(["recent", "cost"]),
    "`recent` (latest activity first, default) or `cost` (most expensive first)."
  )),
  as_of: Schema.optional(asOfParam),
  ...pageParams
})
export type FeatureListParams = typeof FeatureListParams.Type

export const FeatureIdParam = describe(LedgerUuid, "The feature's id (`feature_id` from list_features).")

export const FeatureGetParams = Schema.Struct({
  feature_id: FeatureIdParam,
  as_of: Schema.optional(asOfParam)
})
export type FeatureGetParams = typeof FeatureGetParams.Type

export const MergeSuggestionParams = Schema.Struct({
  feature_id: Schema.optional(describe(FeatureIdParam, "Only suggestions involving this feature.")),
  min_score: Schema.optional(describe(
    Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })),
    "Only suggestions scoring at least this (default: every stored suggestion, which all score ≥ 0.5)."
  )),
  ...pageParams
})
export type MergeSuggestionParams = typeof MergeSuggestionParams.Type

// ---------------------------------------------------------------------------------------------------------
// Insights

export const InsightType = Schema.Literals([
  "cost_spike",
  "error_rate_spike",
  "loop",
  "low_quality_streak",
  "latency_regression",
  "model_right_sizing",
  "idle_agent"
])
export type InsightType = typeof InsightType.Type

export const Severity = Schema.Literals(["info", "warning", "critical"])
export type Severity = typeof Severity.Type

export const Insight = Schema.Struct({
  insight_id: Schema.String,
  type: InsightType,
  severity: Severity,
  title: Schema.String,
  /** the figures behind it, including the thresholds of the rule that fired */
  evidence: Schema.Record(Schema.String, Schema.Unknown),
  /** the window the insight is about, [window_start, window_end): an hour, a day, a loop's first call to just after its last */
  window_start: Schema.String,
  window_end: Schema.String,
  agent_ids: Schema.Array(Schema.String),
  session_ids: Schema.Array(Schema.String),
  ledger_ids: Schema.Array(Schema.String),
  detected_at: Schema.String,
  updated_at: Schema.String
})
export type Insight = typeof Insight.Type

export const InsightPage = Schema.Struct({
  data: Schema.Array(Insight),
  next_cursor: Schema.NullOr(Schema.String)
})
export type InsightPage = typeof InsightPage.Type

export const InsightListParams = Schema.Struct({
  types: Schema.optional(describe(Schema.Array(InsightType), "Only insights of these types.")),
  severities: Schema.optional(describe(Schema.Array(Severity), "Only insights of these severities.")),
  agent_id: Schema.optional(describe(AgentId, "Only insights concerning this agent.")),
  session_id: Schema.optional(describe(LedgerUuid, "Only insights concerning this session.")),
  since: Schema.optional(describe(IsoDateTime, "Only insights whose window overlaps [since, until): it ends after this time.")),
  until: Schema.optional(describe(IsoDateTime, "Only insights whose window starts before this time.")),
  ...pageParams
})
export type InsightListParams = typeof InsightListParams.Type

// ---------------------------------------------------------------------------------------------------------
// Pulse

export const PulseTotals = Schema.Struct({
  decisions: Schema.Number,
  sessions: Schema.Number,
  agents: Schema.Number,
  cost_usd: Schema.Number,
  errors: Schema.Number,
  error_rate: Schema.Number,
  avg_quality: Schema.NullOr(Schema.Number),
  avg_latency_ms: Schema.NullOr(Schema.Number),
  tokens: Schema.Number
})
export type PulseTotals = typeof PulseTotals.Type

export const Delta = Schema.Struct({
  change: Schema.Number,
  /** relative change; null when the previous value was 0 */
  percent: Schema.NullOr(Schema.Number)
})

export const PulseReport = Schema.Struct({
  period: Schema.Struct({ kind: Schema.Literals(["day", "week", "month", "range"]), start: Schema.String, end: Schema.String }),
  previous_period: Schema.Struct({ start: Schema.String, end: Schema.String }),
  totals: PulseTotals,
  previous_totals: PulseTotals,
  deltas: Schema.Record(Schema.String, Delta),
  top_agents: Schema.Array(Schema.Struct({
    agent_id: Schema.String,
    agent_name: Schema.NullOr(Schema.String),
    decisions: Schema.Number,
    cost_usd: Schema.Number,
    errors: Schema.Number
  })),
  outcomes: Schema.Record(Schema.String, Schema.Number),
  intents: Schema.Record(Schema.String, Schema.Number),
  costliest_sessions: Schema.Array(Schema.Struct({
    session_id: Schema.String,
    agent_id: Schema.String,
    started_at: Schema.String,
    ended_at: Schema.String,
    decision_count: Schema.Number,
    total_cost_usd: Schema.Number,
    summary: Schema.String
  })),
  new_insights: Schema.Array(Insight),
  features_delivered: Schema.Array(Feature),
  partial: Schema.Struct({
    is_partial: Schema.Boolean,
    reasons: Schema.Array(Schema.String)
  })
})
export type PulseReport = typeof PulseReport.Type

export const PulseParams = Schema.Struct({
  period: Schema.optional(describe(
    Schema.Literals(["day", "week", "month", "range"]),
    "`day` (default), `week` (Monday–Sunday) or `month` (UTC) containing `date`; `range`: from `since` to `until`. " +
      "An insight is listed in every period its window overlaps."
  )),
  date: Schema.optional(describe(IsoDateTime, "A time inside the day, week or month to report (default now).")),
  since: Schema.optional(describe(IsoDateTime, "range: start (inclusive).")),
  until: Schema.optional(describe(IsoDateTime, "range: end (exclusive)."))
})
export type PulseParams = typeof PulseParams.Type

