/**
 * The read model's contract: the only service that reads ledger tables for clients. REST and MCP both call it,
 * and both return what it returns (one schema, two surfaces); every answer is scoped to the caller's tenant,
 * workspace and user. This module holds its shape, parameters and pages only; the implementation and its layer
 * are in ./ReadModel.ts (see docs/ARCHITECTURE.md).
 */
import { Context, type Effect, Schema } from "effect"
import { Decision, DecisionSummary, Intent, Outcome } from "../domain/decision.ts"
import type { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import { Agent, Page, Session, SessionDetail } from "../domain/ledger.ts"
import type { Principal } from "../domain/principal.ts"
import { AgentId, AgentOrder, DecisionOrder, IsoDateTime, LedgerUuid, ModelName, SessionOrder, UnitScore, UsdAmount } from "./params.ts"

export const AgentPage = Page(Agent)
export type AgentPage = typeof AgentPage.Type
export const SessionPage = Page(Session)
export type SessionPage = typeof SessionPage.Type
export const DecisionPage = Page(DecisionSummary)
export type DecisionPage = typeof DecisionPage.Type

/** Paging shared by every list: `limit` 1–100 (default 20) and the opaque cursor of the previous page. */
export interface PageParams {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export interface AgentListParams extends PageParams {
  /** `recent` (last activity, default), `cost`, `decisions` */
  readonly order?: AgentOrder | undefined
  /** ISO times bounding last activity */
  readonly active_since?: string | undefined
  readonly active_until?: string | undefined
}

export interface SessionListParams extends PageParams {
  /** `recent` (last activity, default), `cost` */
  readonly order?: SessionOrder | undefined
  /** ISO times: sessions active at some point in [since, until] (ended at/after `since`, started at/before `until`) */
  readonly since?: string | undefined
  readonly until?: string | undefined
}

/** Filters of `list_decisions`, also used by session decision lists and similarity search. */
export const DecisionFilters = Schema.Struct({
  since: Schema.optional(IsoDateTime.annotate({ description: "Only decisions created at or after this ISO 8601 time." })),
  until: Schema.optional(IsoDateTime.annotate({ description: "Only decisions created before this ISO 8601 time." })),
  outcomes: Schema.optional(Schema.Array(Outcome).annotate({ description: "Only decisions with one of these outcomes." })),
  intents: Schema.optional(Schema.Array(Intent).annotate({ description: "Only decisions with one of these intents." })),
  min_cost_usd: Schema.optional(UsdAmount.annotate({ description: "Only decisions costing at least this many USD (unpriced ones excluded)." })),
  max_cost_usd: Schema.optional(UsdAmount.annotate({ description: "Only decisions costing at most this many USD (unpriced ones excluded)." })),
  min_quality: Schema.optional(UnitScore.annotate({ description: "Only decisions with quality ≥ this value (0–1)." })),
  max_quality: Schema.optional(UnitScore.annotate({ description: "Only decisions with quality ≤ this value (0–1)." })),
  agent_id: Schema.optional(AgentId.annotate({ description: "Only decisions of this agent." })),
  session_id: Schema.optional(LedgerUuid.annotate({ description: "Only decisions of this session." })),
  model: Schema.optional(ModelName.annotate({ description: "Only decisions of this model (without the provider prefix, e.g. `gpt-4o`)." }))
})
export type DecisionFilters = typeof DecisionFilters.Type

export interface DecisionListParams extends PageParams, DecisionFilters {
  /** `newest` (default), `oldest`, `cost` (most expensive first), `quality` (lowest first) */
  readonly order?: DecisionOrder | undefined
}

export type QueryError = BadRequest | NotFound | DatabaseUnavailable

export class LedgerQuery extends Context.Service<LedgerQuery, {
  listAgents(principal: Principal, params: AgentListParams): Effect.Effect<AgentPage, BadRequest | DatabaseUnavailable>
  listAgentSessions(principal: Principal, agentId: string, params: SessionListParams): Effect.Effect<SessionPage, QueryError>
  getSession(principal: Principal, sessionId: string): Effect.Effect<SessionDetail, QueryError>
  listSessionDecisions(principal: Principal, sessionId: string, params: DecisionListParams): Effect.Effect<DecisionPage, QueryError>
  /** `sessionId` given: the decision must belong to it (REST path); omitted: looked up by ledger id alone (MCP). */
  getDecision(principal: Principal, ledgerId: string, sessionId?: string): Effect.Effect<Decision, QueryError>
  listDecisions(principal: Principal, params: DecisionListParams): Effect.Effect<DecisionPage, BadRequest | DatabaseUnavailable>
}>()("ledger/query/LedgerQuery") {}

export { Agent, Decision, DecisionSummary, Session, SessionDetail }
