/**
 * Agents and sessions as served by the query layer (REST bodies = MCP structuredContent).
 */
import { Schema } from "effect"
import { DecisionSummary } from "./decision.ts"

export const Agent = Schema.Struct({
  agent_id: Schema.String,
  agent_name: Schema.NullOr(Schema.String),
  decision_count: Schema.Number,
  session_count: Schema.Number,
  total_cost_usd: Schema.Number,
  avg_confidence: Schema.NullOr(Schema.Number),
  error_count: Schema.Number,
  first_seen_at: Schema.String,
  last_seen_at: Schema.String
})
export type Agent = typeof Agent.Type

export const Session = Schema.Struct({
  session_id: Schema.String,
  agent_id: Schema.String,
  execution_id: Schema.NullOr(Schema.String),
  started_at: Schema.String,
  ended_at: Schema.String,
  decision_count: Schema.Number,
  error_count: Schema.Number,
  total_cost_usd: Schema.Number,
  total_tokens: Schema.Number,
  summary: Schema.String
})
export type Session = typeof Session.Type

export const SessionHealth = Schema.Struct({
  status: Schema.Literals(["healthy", "degraded", "failing", "idle"]),
  reasons: Schema.Array(Schema.String),
  error_rate: Schema.Number,
  loops: Schema.Number,
  p95_latency_ms: Schema.NullOr(Schema.Number),
  cost_per_hour_usd: Schema.NullOr(Schema.Number),
  token_growth: Schema.NullOr(Schema.Number),
  last_activity_at: Schema.String
})
export type SessionHealth = typeof SessionHealth.Type

export const SessionDetail = Schema.Struct({
  ...Session.fields,
  health: SessionHealth,
  outcomes: Schema.Record(Schema.String, Schema.Number),
  intents: Schema.Record(Schema.String, Schema.Number),
  decisions: Schema.Array(DecisionSummary),
  /** true when the session has more decisions than `decisions` holds (use list_session_decisions) */
  decisions_truncated: Schema.Boolean
})
export type SessionDetail = typeof SessionDetail.Type

/** A page of a list: `next_cursor` is opaque and null on the last page. */
export const Page = <S extends Schema.Top>(item: S) =>
  Schema.Struct({
    data: Schema.Array(item),
    next_cursor: Schema.NullOr(Schema.String)
  })
