/**
 * Rows as the database returns them, the columns that select them, and their mapping to the domain shapes REST
 * and MCP serve. The mappers are total: a stored row always maps, even one written by an older builder.
 */
import type { Decision, DecisionIntegrity, DecisionSummary, Intent, Outcome } from "../domain/decision.ts"
import type { Agent, Session } from "../domain/ledger.ts"
import { sessionSummary } from "../domain/sessionSummary.ts"

export const SUMMARY_COLUMNS = `ledger_id, session_id, agent_id, execution_id, created_at, provider, model, title, intent,
  outcome, cost_usd, quality, confidence, latency_ms, status, usage`
/** the full decision adds its audit trail and its chain link to the summary */
export const DECISION_COLUMNS = `${SUMMARY_COLUMNS}, api, response_id, previous_ledger_id::text AS previous_ledger_id, source,
  stream, first_token_ms, derivation, error, seq::float8 AS seq, encode(hash, 'hex') AS hash,
  encode(prev_hash, 'hex') AS prev_hash, recorded_at, chain_key`
export const AGENT_COLUMNS = `agent_id, agent_name, decision_count, session_count, error_count, total_cost_usd, confidence_sum,
  first_seen_at, last_seen_at`
export const SESSION_COLUMNS = `session_id, agent_id, execution_id, started_at, ended_at, decision_count, error_count,
  total_cost_usd, total_tokens, summary`
/** the restricted view also carries its first decision, to summarise the session from what the member may see */
export const VISIBLE_SESSION_COLUMNS = `${SESSION_COLUMNS}, first_ledger_id, first_title`

/** A decision summary as the database returns it (shared with the analytics read model). */
export interface SummaryRow {
  readonly ledger_id: string
  readonly session_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly created_at: Date
  readonly provider: string
  readonly model: string
  readonly title: string
  readonly intent: Intent
  readonly outcome: Outcome
  readonly cost_usd: number | null
  readonly quality: number
  readonly confidence: number
  readonly latency_ms: number
  readonly status: number
  readonly usage: DecisionSummary["usage"]
}

export interface DecisionRow extends SummaryRow {
  readonly api: Decision["api"]
  readonly response_id: string | null
  readonly previous_ledger_id: string | null
  readonly source: Decision["source"]
  readonly stream: boolean
  readonly first_token_ms: number | null
  readonly derivation: Record<string, any> | null
  readonly error: { readonly type?: string; readonly code?: string | null; readonly message?: string } | null
  /** the chain columns, null until the decision is chained; hashes as hex */
  readonly seq: number | null
  readonly hash: string | null
  readonly prev_hash: string | null
  readonly recorded_at: Date
  readonly chain_key: number | null
}

/** count columns are bigint, which the driver returns as text */
export type Count = number | string

export interface AgentRow {
  readonly agent_id: string
  readonly agent_name: string | null
  readonly decision_count: Count
  readonly session_count: Count
  readonly error_count: Count
  readonly total_cost_usd: number
  readonly confidence_sum: number
  readonly first_seen_at: Date
  readonly last_seen_at: Date
}

export interface SessionRow {
  readonly session_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly started_at: Date
  readonly ended_at: Date
  readonly decision_count: Count
  readonly error_count: Count
  readonly total_cost_usd: number
  readonly total_tokens: Count
  /** stored summary; null for a restricted member's view, which is summarised from its own decisions */
  readonly summary: string | null
  readonly first_ledger_id?: string
  readonly first_title?: string
}

export const toSummary = (row: SummaryRow): DecisionSummary => ({
  ledger_id: row.ledger_id,
  session_id: row.session_id,
  agent_id: row.agent_id,
  execution_id: row.execution_id,
  created_at: row.created_at.toISOString(),
  provider: row.provider,
  model: row.model,
  title: row.title,
  intent: row.intent,
  outcome: row.outcome,
  cost_usd: row.cost_usd,
  quality: row.quality,
  confidence: row.confidence,
  latency_ms: row.latency_ms,
  status: row.status,
  usage: row.usage
})

const asArray = (value: unknown): Array<any> => Array.isArray(value) ? value : []

/** The chain columns are set together (by the builder, or the backfill for older rows), so any one null means unchained. */
const toIntegrity = ({ seq, hash, prev_hash, recorded_at, chain_key }: DecisionRow): DecisionIntegrity | null =>
  seq === null || hash === null || prev_hash === null || chain_key === null
    ? null
    : { seq, hash, prev_hash, recorded_at: recorded_at.toISOString(), chain_key }

/** The stored derivation completes the columns; parts missing from an older row degrade to empty, never fail. */
export const toDecision = (row: DecisionRow): Decision => {
  const derivation = row.derivation ?? {}
  const score = (value: any, fallback: number) => ({
    value: typeof value?.value === "number" ? value.value : fallback,
    source: value?.source === "logprobs" || value?.source === "model" ? value.source : "heuristic" as const,
    reasons: asArray(value?.reasons).filter((reason) => typeof reason === "string")
  })
  const cost = derivation.cost
  return {
    ...toSummary(row),
    api: row.api,
    response_id: row.response_id,
    previous_ledger_id: row.previous_ledger_id,
    source: row.source,
    stream: row.stream,
    first_token_ms: row.first_token_ms,
    intent_reason: typeof derivation.intent_reason === "string" ? derivation.intent_reason : "",
    cost: {
      total_usd: cost?.total_usd ?? row.cost_usd,
      input_usd: cost?.input_usd ?? null,
      output_usd: cost?.output_usd ?? null,
      cached_input_usd: cost?.cached_input_usd ?? null,
      cache_write_usd: cost?.cache_write_usd ?? null,
      reason: typeof cost?.reason === "string" ? cost.reason : row.cost_usd === null ? "no price recorded" : "price recorded"
    },
    quality_detail: score(derivation.quality, row.quality),
    confidence_detail: score(derivation.confidence, row.confidence),
    error: row.error === null
      ? null
      : { type: row.error.type ?? "error", code: row.error.code ?? null, message: row.error.message ?? "" },
    logic_trace: asArray(derivation.logic_trace),
    evidence: asArray(derivation.evidence),
    findings: asArray(derivation.findings),
    artifacts: asArray(derivation.artifacts),
    integrity: toIntegrity(row)
  }
}

export const toAgent = (row: AgentRow): Agent => {
  const decisions = Number(row.decision_count)
  return {
    agent_id: row.agent_id,
    agent_name: row.agent_name,
    decision_count: decisions,
    session_count: Number(row.session_count),
    total_cost_usd: row.total_cost_usd,
    avg_confidence: decisions === 0 ? null : row.confidence_sum / decisions,
    error_count: Number(row.error_count),
    first_seen_at: row.first_seen_at.toISOString(),
    last_seen_at: row.last_seen_at.toISOString()
  }
}

export const toSession = (row: SessionRow): Session => {
  const figures = {
    decision_count: Number(row.decision_count),
    error_count: Number(row.error_count),
    total_cost_usd: row.total_cost_usd,
    total_tokens: Number(row.total_tokens)
  }
  return {
    session_id: row.session_id,
    agent_id: row.agent_id,
    execution_id: row.execution_id,
    started_at: row.started_at.toISOString(),
    ended_at: row.ended_at.toISOString(),
    ...figures,
    summary: row.summary ?? sessionSummary({
      ...figures,
      started_at: row.started_at.getTime(),
      ended_at: row.ended_at.getTime(),
      first: { at: row.started_at.getTime(), ledger_id: row.first_ledger_id ?? "", title: row.first_title ?? "" }
    })
  }
}
