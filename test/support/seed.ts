/**
 * Seeding the ledger directly (tests, benchmarks): realistic captures run through the real derivation, written in
 * batches as the builder role — one transaction per batch, one statement per table and workspace, and the agent
 * and session rollups updated from the rows actually inserted, as the decision builder keeps them.
 *
 * Sessions are given, not planned: each row names its session, so a test or benchmark decides the shape of the
 * ledger exactly (the builder's gap-based session planning is tested on its own).
 */
import { Effect } from "effect"
import { derive } from "../../src/derive/derive.ts"
import { extractSubjects, type Subject } from "../../src/derive/subjects.ts"
import { byWorkspace } from "../../src/builder/writes.ts"
import type { Capture } from "../../src/domain/capture.ts"
import type { Derivation } from "../../src/domain/decision.ts"
import { sessionSummary } from "../../src/domain/sessionSummary.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import * as fixtures from "../fixtures/captures/index.ts"

/** Who a seeded call belongs to: tenant, workspace, user, and the gateway key (a uuid) it was made with. */
export interface SeedScope {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly key_id: string
}

/** One decision row to insert: the capture it comes from, what the builder derives from it, and its session. */
export interface SeedDecision {
  readonly capture: Capture
  readonly derivation: Derivation
  readonly subjects: ReadonlyArray<Subject>
  readonly session_id: string
}

/** Realistic calls of every outcome (tool call, code, refusal, truncation, provider error, unpriced model, ...). */
export const TEMPLATES: ReadonlyArray<Capture> = [
  fixtures.toolCallingAgent(),
  fixtures.codingAgent(),
  fixtures.refusal(),
  fixtures.truncatedSummary(),
  fixtures.rateLimited(),
  fixtures.anthropicCached(),
  fixtures.geminiCached(),
  fixtures.withLogprobs(),
  fixtures.unknownModel()
]

export interface CallSpec {
  readonly scope: SeedScope
  readonly agent_id: string
  readonly agent_name?: string | null | undefined
  readonly execution_id?: string | null | undefined
  /** epoch ms the call started */
  readonly at: number
  /** the call to copy (default: the first template) */
  readonly template?: Capture | undefined
  readonly latency_ms?: number | undefined
  /** replaces the last user message's text (the decision's title follows it) */
  readonly ask?: string | undefined
}

/** Replaces the text of the last user message of a chat-completions request. */
const withAsk = (request: string, ask: string): string => {
  const body = JSON.parse(request)
  const messages: Array<{ role: string; content: unknown }> = body.messages ?? []
  const last = messages.findLastIndex((message) => message.role === "user")
  if (last >= 0) messages[last] = { ...messages[last]!, content: ask }
  else messages.push({ role: "user", content: ask })
  return JSON.stringify({ ...body, messages })
}

/** A capture as the gateway would record it for the spec, with a fresh uuid v7 ledger id minted at `at`. */
export const makeCapture = (spec: CallSpec): Capture => {
  const template = spec.template ?? TEMPLATES[0]!
  const latency = spec.latency_ms ?? template.ended_at - template.started_at
  const firstToken = template.first_token_at === null ? null : Math.min(template.first_token_at - template.started_at, latency)
  return {
    ...template,
    ledger_id: uuidv7(spec.at),
    ...spec.scope,
    agent_id: spec.agent_id,
    agent_name: spec.agent_name ?? null,
    execution_id: spec.execution_id ?? null,
    request: spec.ask === undefined ? template.request : withAsk(template.request, spec.ask),
    started_at: spec.at,
    first_token_at: firstToken === null ? null : spec.at + firstToken,
    ended_at: spec.at + latency,
    upstream_ms: Math.max(0, latency - 2)
  }
}

/** A capture with its derivation and subjects (as the builder reconstructs it), in the given session. */
export const seedDecision = (
  capture: Capture,
  session_id: string,
  derivation: Derivation = derive(capture),
  subjects: ReadonlyArray<Subject> = extractSubjects(capture, derivation)
): SeedDecision => ({ capture, derivation, subjects, session_id })

// ---------------------------------------------------------------------------------------------------------
// Writing: each statement takes its whole batch as one JSON parameter, expanded by jsonb_to_recordset (no
// parameter-count limit, and NULL-only or mixed int/float columns need no array type inference)

const decisionRecord = ({ capture, derivation, session_id, subjects }: SeedDecision) => ({
  ledger_id: capture.ledger_id,
  tenant_id: capture.tenant_id,
  workspace_id: capture.workspace_id,
  user_id: capture.user_id,
  key_id: capture.key_id,
  agent_id: capture.agent_id,
  session_id,
  execution_id: capture.execution_id,
  created_at: new Date(capture.started_at).toISOString(),
  provider: capture.provider,
  provider_type: capture.provider_type,
  model: capture.model,
  stream: capture.stream,
  status: capture.status,
  title: derivation.title,
  intent: derivation.intent,
  outcome: derivation.outcome,
  cost_usd: derivation.cost.total_usd,
  quality: derivation.quality.value,
  confidence: derivation.confidence.value,
  latency_ms: capture.ended_at - capture.started_at,
  first_token_ms: capture.first_token_at === null ? null : capture.first_token_at - capture.started_at,
  usage: capture.usage,
  derivation,
  subjects,
  raw_request: capture.request,
  raw_response: capture.response,
  error: capture.error,
  aborted: capture.aborted,
  upstream_ms: capture.upstream_ms,
  capture_version: capture.v,
  captured_at: new Date(capture.ended_at).toISOString()
})

interface Rollup {
  decisions: number
  errors: number
  cost: number
  tokens: number
  confidence: number
  start: number
  end: number
  first: { at: number; ledger_id: string; title: string }
  agent_name: string | null
  agent_id: string
  execution_id: string | null
}

const rollUp = (rows: ReadonlyArray<SeedDecision>, key: (row: SeedDecision) => string): Map<string, Rollup> => {
  const rollups = new Map<string, Rollup>()
  for (const row of rows) {
    const { capture, derivation } = row
    const first = { at: capture.started_at, ledger_id: capture.ledger_id, title: derivation.title }
    const current = rollups.get(key(row))
    if (current === undefined) {
      rollups.set(key(row), {
        decisions: 1,
        errors: derivation.outcome === "error" ? 1 : 0,
        cost: derivation.cost.total_usd ?? 0,
        tokens: capture.usage?.total_tokens ?? 0,
        confidence: derivation.confidence.value,
        start: capture.started_at,
        end: capture.ended_at,
        first,
        agent_name: capture.agent_name,
        agent_id: capture.agent_id,
        execution_id: capture.execution_id
      })
    } else {
      current.decisions++
      if (derivation.outcome === "error") current.errors++
      current.cost += derivation.cost.total_usd ?? 0
      current.tokens += capture.usage?.total_tokens ?? 0
      current.confidence += derivation.confidence.value
      current.start = Math.min(current.start, capture.started_at)
      current.end = Math.max(current.end, capture.ended_at)
      if (first.at < current.first.at || (first.at === current.first.at && first.ledger_id < current.first.ledger_id)) {
        current.first = first
      }
      current.agent_name = capture.agent_name ?? current.agent_name
    }
  }
  return rollups
}

const summaryOf = (rollup: Rollup) =>
  sessionSummary({
    decision_count: rollup.decisions,
    error_count: rollup.errors,
    total_cost_usd: rollup.cost,
    total_tokens: rollup.tokens,
    started_at: rollup.start,
    ended_at: rollup.end,
    first: rollup.first
  })

/** Inserts one workspace's rows (already rescoped) and updates the rollups of what was actually inserted. */
const insertWorkspaceRows = (all: ReadonlyArray<SeedDecision>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const inserted = new Set(
      (yield* sql<{ ledger_id: string }>`
      INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, execution_id,
        created_at, provider, provider_type, model, stream, status, title, intent, outcome, cost_usd, quality, confidence,
        latency_ms, first_token_ms, usage, derivation, subjects, raw_request, raw_response, error, aborted, upstream_ms,
        capture_version, captured_at, recorded_at)
      SELECT *, captured_at FROM jsonb_to_recordset(${JSON.stringify(all.map(decisionRecord))}::jsonb) AS t(
        ledger_id uuid, tenant_id uuid, workspace_id uuid, user_id uuid, key_id uuid, agent_id text, session_id uuid,
        execution_id text, created_at timestamptz, provider text, provider_type text, model text, stream boolean,
        status int, title text, intent text, outcome text, cost_usd float8, quality float8, confidence float8,
        latency_ms int, first_token_ms int, usage jsonb, derivation jsonb, subjects jsonb, raw_request text,
        raw_response text, error jsonb, aborted boolean, upstream_ms int, capture_version int, captured_at timestamptz)
      ON CONFLICT (tenant_id, workspace_id, ledger_id, recorded_at) DO NOTHING
      RETURNING ledger_id`).map((row) => row.ledger_id)
    )
    const rows = all.filter((row) => inserted.has(row.capture.ledger_id))
    if (rows.length === 0) return 0
    const { tenant_id, workspace_id } = rows[0]!.capture

    // rows are locked in id order, so concurrent batches touching the same sessions and agents cannot deadlock
    const byId = <A>([a]: readonly [string, A], [b]: readonly [string, A]) => (a < b ? -1 : a > b ? 1 : 0)
    const sessions = [...rollUp(rows, (row) => row.session_id)].sort(byId).map(([session_id, s]) => ({
      session_id,
      agent_id: s.agent_id,
      execution_id: s.execution_id,
      started_at: new Date(s.start).toISOString(),
      ended_at: new Date(s.end).toISOString(),
      decision_count: s.decisions,
      error_count: s.errors,
      total_cost_usd: s.cost,
      total_tokens: s.tokens,
      summary: summaryOf(s)
    }))
    const touched = yield* sql<{ session_id: string; agent_id: string; created: boolean }>`
      INSERT INTO sessions AS s (session_id, tenant_id, workspace_id, agent_id, execution_id, started_at, ended_at,
        decision_count, error_count, total_cost_usd, total_tokens, summary)
      SELECT session_id, ${tenant_id}::uuid, ${workspace_id}::uuid, agent_id, execution_id, started_at, ended_at,
        decision_count, error_count, total_cost_usd, total_tokens, summary
      FROM jsonb_to_recordset(${JSON.stringify(sessions)}::jsonb) AS t(session_id uuid, agent_id text, execution_id text,
        started_at timestamptz, ended_at timestamptz, decision_count int8, error_count int8, total_cost_usd float8,
        total_tokens int8, summary text)
      ON CONFLICT (session_id) DO UPDATE SET
        started_at = least(s.started_at, EXCLUDED.started_at), ended_at = greatest(s.ended_at, EXCLUDED.ended_at),
        decision_count = s.decision_count + EXCLUDED.decision_count, error_count = s.error_count + EXCLUDED.error_count,
        total_cost_usd = s.total_cost_usd + EXCLUDED.total_cost_usd, total_tokens = s.total_tokens + EXCLUDED.total_tokens
      RETURNING s.session_id, s.agent_id, (xmax = 0) AS created`
    // each session's first decision, as the builder keeps it (migration 0023)
    yield* sql`UPDATE sessions s SET first_ledger_id = f.ledger_id, first_at = f.created_at, first_title = f.title
      FROM unnest(${touched.map((row) => row.session_id)}::uuid[]) AS q(id) CROSS JOIN LATERAL (
        SELECT ledger_id, created_at, title FROM decisions d WHERE d.session_id = q.id ORDER BY created_at, ledger_id LIMIT 1) f
      WHERE s.session_id = q.id`
    const createdPerAgent = new Map<string, number>()
    for (const { agent_id, created } of touched) {
      if (created) createdPerAgent.set(agent_id, (createdPerAgent.get(agent_id) ?? 0) + 1)
    }
    // sessions that already existed: summarise them again from their stored rollup and first decision
    const grown = touched.filter((row) => !row.created).map((row) => row.session_id)
    if (grown.length > 0) {
      const current = yield* sql<{
        session_id: string
        decision_count: string
        error_count: string
        total_cost_usd: number
        total_tokens: string
        started_at: Date
        ended_at: Date
        first_ledger_id: string
        first_title: string
        first_at: Date
      }>`
        SELECT session_id, decision_count, error_count, total_cost_usd, total_tokens, started_at, ended_at,
          first_ledger_id, first_title, first_at
        FROM sessions WHERE session_id IN ${sql.in(grown)}`
      const summaries = current.map((row) => ({
        session_id: row.session_id,
        summary: sessionSummary({
          decision_count: Number(row.decision_count),
          error_count: Number(row.error_count),
          total_cost_usd: row.total_cost_usd,
          total_tokens: Number(row.total_tokens),
          started_at: row.started_at.getTime(),
          ended_at: row.ended_at.getTime(),
          first: { at: row.first_at.getTime(), ledger_id: row.first_ledger_id, title: row.first_title }
        })
      }))
      yield* sql`UPDATE sessions s SET summary = t.summary
        FROM jsonb_to_recordset(${JSON.stringify(summaries)}::jsonb) AS t(session_id uuid, summary text)
        WHERE s.session_id = t.session_id`
    }

    const agents = [...rollUp(rows, (row) => row.capture.agent_id)].sort(byId).map(([agent_id, a]) => ({
      agent_id,
      agent_name: a.agent_name,
      decision_count: a.decisions,
      session_count: createdPerAgent.get(agent_id) ?? 0,
      error_count: a.errors,
      total_cost_usd: a.cost,
      total_tokens: a.tokens,
      confidence_sum: a.confidence,
      first_seen_at: new Date(a.start).toISOString(),
      last_seen_at: new Date(a.end).toISOString()
    }))
    yield* sql`
      INSERT INTO agents AS a (tenant_id, workspace_id, agent_id, agent_name, decision_count, session_count, error_count,
        total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, agent_id, agent_name, decision_count, session_count, error_count,
        total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at
      FROM jsonb_to_recordset(${JSON.stringify(agents)}::jsonb) AS t(agent_id text, agent_name text, decision_count int8,
        session_count int8, error_count int8, total_cost_usd float8, total_tokens int8, confidence_sum float8,
        first_seen_at timestamptz, last_seen_at timestamptz)
      ON CONFLICT (tenant_id, workspace_id, agent_id) DO UPDATE SET
        agent_name = coalesce(EXCLUDED.agent_name, a.agent_name),
        decision_count = a.decision_count + EXCLUDED.decision_count, session_count = a.session_count + EXCLUDED.session_count,
        error_count = a.error_count + EXCLUDED.error_count, total_cost_usd = a.total_cost_usd + EXCLUDED.total_cost_usd,
        total_tokens = a.total_tokens + EXCLUDED.total_tokens,
        confidence_sum = a.confidence_sum + EXCLUDED.confidence_sum,
        first_seen_at = least(a.first_seen_at, EXCLUDED.first_seen_at), last_seen_at = greatest(a.last_seen_at, EXCLUDED.last_seen_at)`
    return rows.length
  })

/**
 * Inserts decisions (any tenants and workspaces), each workspace's in one builder-role transaction as the builder
 * writes them; returns how many were new. Rows already stored (same ledger_id) are skipped and change no rollup.
 */
export const insertDecisions = (rows: ReadonlyArray<SeedDecision>) =>
  Effect.gen(function*() {
    const tenantSql = yield* TenantSql
    let inserted = 0
    for (const { scope, items } of byWorkspace(rows, (row) => row.capture)) {
      inserted += yield* tenantSql.write(scope, insertWorkspaceRows(items))
    }
    return inserted
  })
