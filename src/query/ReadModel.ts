/**
 * The read model behind `LedgerQuery`: SQL over agents, sessions and decisions, always inside
 * `TenantSql.read(principal, ...)` so row-level security scopes every statement to the caller. Parameters are
 * checked (./paramChecks.ts) before any SQL runs; lists are keyset pages (./paging.ts); a restricted member reads
 * figures aggregated from their own decisions (./visibility.ts); rows map to the served shapes in ./rows.ts.
 */
import { Clock, type Context, Effect, Layer } from "effect"
import type { Statement } from "effect/sql"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { Intent, Outcome } from "../domain/decision.ts"
import { DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import type { SessionDetail } from "../domain/ledger.ts"
import type { Principal } from "../domain/principal.ts"
import { currentSessionId } from "../store/sessionAliases.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { CursorSecret } from "./cursor.ts"
import { HEALTH_WINDOW, type HealthSample, sessionHealth } from "./health.ts"
import {
  type AgentListParams,
  type DecisionListParams,
  type DecisionPage,
  LedgerQuery,
  type SessionListParams
} from "./LedgerQuery.ts"
import { AGENT_ORDERS, DECISION_ORDERS, finishPage, type Keyed, keyset, type PageRequest, pageRequest, SESSION_ORDERS } from "./paging.ts"
import { type CheckedFilters, checkDecisionFilters, checkOptional, checkRequired, checkTime } from "./paramChecks.ts"
import { AgentId, AgentOrder, LedgerUuid, SessionOrder } from "./params.ts"
import {
  AGENT_COLUMNS,
  type AgentRow,
  type Count,
  DECISION_COLUMNS,
  type DecisionRow,
  SUMMARY_COLUMNS,
  type SessionRow,
  type SummaryRow,
  toAgent,
  toDecision,
  toSession,
  toSummary
} from "./rows.ts"
import { agentsSource, isRestricted, ownDecisions, sessionColumns, sessionsSource } from "./visibility.ts"

/** how many of its latest decisions the single-session view embeds */
export const SESSION_VIEW_DECISIONS = 20
/** a read that takes longer than this is treated as the database being unavailable */
const READ_TIMEOUT_MS = 10_000

const makeLedgerQuery = Effect.gen(function*() {
  const tenantSql = yield* TenantSql
  const { key } = yield* CursorSecret
  const { sessionGapMinutes } = yield* LedgerConfig

  /** Runs reads as the caller; SQL failures and stalls are the database being unavailable (503). */
  const read = <A, E>(principal: Principal, effect: Effect.Effect<A, E, ScopedSql>) =>
    tenantSql.read(principal, effect).pipe(
      Effect.timeoutOrElse({
        duration: READ_TIMEOUT_MS,
        orElse: () => Effect.fail(new DatabaseUnavailable({ message: "database did not answer in time" }))
      })
    )

  const notFound = (what: string, id: string) => new NotFound({ message: `${what} ${id} not found` })

  // --- agents

  const listAgents = Effect.fn("LedgerQuery.listAgents")(function*(principal: Principal, params: AgentListParams) {
    const order = (yield* checkOptional(AgentOrder, "order", params.order)) ?? "recent"
    const activeSince = yield* checkTime("active_since", params.active_since)
    const activeUntil = yield* checkTime("active_until", params.active_until)
    const request = yield* pageRequest(key, principal, "agents", { order, activeSince, activeUntil }, params)
    return yield* read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const { after, orderBy, k } = keyset(sql, AGENT_ORDERS[order], request)
      const rows = yield* sql<AgentRow & Keyed>`
        SELECT ${sql.literal(AGENT_COLUMNS)}, ${k} AS k
        FROM ${agentsSource(sql, principal)}
        WHERE ${
        sql.and([
          activeSince === undefined ? sql`TRUE` : sql`last_seen_at >= ${activeSince}::timestamptz`,
          activeUntil === undefined ? sql`TRUE` : sql`last_seen_at < ${activeUntil}::timestamptz`,
          after
        ])
      }
        ORDER BY ${orderBy} LIMIT ${request.limit + 1}`
      return finishPage(key, rows, request, (row) => row.agent_id, toAgent)
    }))
  })

  // --- sessions

  const agentVisible = (sql: Statement.Constructor, agentId: string) =>
    Effect.map(sql`SELECT 1 FROM agents WHERE agent_id = ${agentId} LIMIT 1`, (rows) => rows.length > 0)

  const listAgentSessions = Effect.fn("LedgerQuery.listAgentSessions")(
    function*(principal: Principal, agentId: string, params: SessionListParams) {
      const agent = yield* checkRequired(AgentId, "agent_id", agentId)
      const order = (yield* checkOptional(SessionOrder, "order", params.order)) ?? "recent"
      const since = yield* checkTime("since", params.since)
      const until = yield* checkTime("until", params.until)
      const request = yield* pageRequest(key, principal, `sessions:${agent}`, { order, since, until }, params)
      return yield* read(
        principal,
        Effect.gen(function*() {
          const sql = yield* ScopedSql
          if (!(yield* agentVisible(sql, agent))) return yield* notFound("agent", agent)
          const { after, orderBy, k } = keyset(sql, SESSION_ORDERS[order], request)
          const rows = yield* sql<SessionRow & Keyed>`
            SELECT ${sql.literal(sessionColumns(principal))}, ${k} AS k
            FROM ${sessionsSource(sql, principal, sql`agent_id = ${agent}`)}
            WHERE ${
            sql.and([
              since === undefined ? sql`TRUE` : sql`ended_at >= ${since}::timestamptz`,
              until === undefined ? sql`TRUE` : sql`started_at <= ${until}::timestamptz`,
              after
            ])
          }
            ORDER BY ${orderBy} LIMIT ${request.limit + 1}`
          return finishPage(key, rows, request, (row) => row.session_id, toSession)
        })
      )
    }
  )

  const getSession = Effect.fn("LedgerQuery.getSession")(function*(principal: Principal, sessionId: string) {
    const id = yield* checkRequired(LedgerUuid, "session_id", sessionId)
    const now = yield* Clock.currentTimeMillis
    return yield* read(
      principal,
      Effect.gen(function*() {
        const sql = yield* ScopedSql
        // an id merged into another session answers with that session (its own session_id)
        const [row] = yield* sql<SessionRow>`
          SELECT ${sql.literal(sessionColumns(principal))}
          FROM ${sessionsSource(sql, principal, sql`session_id = ${currentSessionId(sql, id)}`)}`
        if (row === undefined) return yield* notFound("session", id)
        const mix = yield* sql<{ outcome: Outcome; intent: Intent; n: Count }>`
          SELECT outcome, intent, count(*) AS n FROM decisions WHERE session_id = ${row.session_id} GROUP BY outcome, intent`
        const latest = yield* sql<SummaryRow & { last_step: string | null; prompt_tokens: number | null }>`
          SELECT ${sql.literal(SUMMARY_COLUMNS)}, derivation->'logic_trace'->-1->>'text' AS last_step,
            (usage->>'prompt_tokens')::float8 AS prompt_tokens
          FROM decisions WHERE session_id = ${row.session_id}
          ORDER BY created_at DESC, ledger_id DESC LIMIT ${HEALTH_WINDOW}`
        const outcomes: Record<string, number> = {}
        const intents: Record<string, number> = {}
        for (const { outcome, intent, n } of mix) {
          outcomes[outcome] = (outcomes[outcome] ?? 0) + Number(n)
          intents[intent] = (intents[intent] ?? 0) + Number(n)
        }
        const session = toSession(row)
        const window: Array<HealthSample> = latest.map((decision) => ({
          created_at: decision.created_at,
          outcome: decision.outcome,
          latency_ms: decision.latency_ms,
          prompt_tokens: decision.prompt_tokens,
          model: decision.model,
          last_step: decision.last_step
        })).reverse()
        return {
          ...session,
          health: sessionHealth({
            window,
            started_at: row.started_at,
            ended_at: row.ended_at,
            total_cost_usd: session.total_cost_usd,
            now,
            sessionGapMinutes
          }),
          outcomes,
          intents,
          decisions: latest.slice(0, SESSION_VIEW_DECISIONS).map(toSummary),
          decisions_truncated: session.decision_count > SESSION_VIEW_DECISIONS
        } satisfies SessionDetail
      })
    )
  })

  // --- decisions

  const decisionPage = Effect.fnUntraced(function*(principal: Principal, filters: CheckedFilters, request: PageRequest) {
    const sql = yield* ScopedSql
    const { after, orderBy, k } = keyset(sql, DECISION_ORDERS[filters.order], request)
    const conditions: Array<Statement.Fragment> = [after]
    if (isRestricted(principal)) conditions.push(ownDecisions(sql, principal))
    if (filters.session_id !== undefined) conditions.push(sql`session_id = ${currentSessionId(sql, filters.session_id)}`)
    if (filters.agent_id !== undefined) conditions.push(sql`agent_id = ${filters.agent_id}`)
    if (filters.since !== undefined) conditions.push(sql`created_at >= ${filters.since}::timestamptz`)
    if (filters.until !== undefined) conditions.push(sql`created_at < ${filters.until}::timestamptz`)
    if (filters.outcomes !== undefined) conditions.push(sql.in("outcome", filters.outcomes))
    if (filters.intents !== undefined) conditions.push(sql.in("intent", filters.intents))
    // on cost_rank (unpriced = -1, so bounds ≥ 0 leave unpriced decisions out), which the cost order's index bounds
    if (filters.min_cost_usd !== undefined) conditions.push(sql`cost_rank >= ${filters.min_cost_usd}::float8`)
    if (filters.max_cost_usd !== undefined) {
      conditions.push(sql`cost_rank >= 0`, sql`cost_rank <= ${filters.max_cost_usd}::float8`)
    }
    if (filters.min_quality !== undefined) conditions.push(sql`quality >= ${filters.min_quality}::float8`)
    if (filters.max_quality !== undefined) conditions.push(sql`quality <= ${filters.max_quality}::float8`)
    if (filters.model !== undefined) conditions.push(sql`model = ${filters.model}`)
    const rows = yield* sql<SummaryRow & Keyed>`
      SELECT ${sql.literal(SUMMARY_COLUMNS)}, ${k} AS k FROM decisions
      WHERE ${sql.and(conditions)}
      ORDER BY ${orderBy} LIMIT ${request.limit + 1}`
    return finishPage(key, rows, request, (row) => row.ledger_id, toSummary) satisfies DecisionPage
  })

  const listDecisions = Effect.fn("LedgerQuery.listDecisions")(function*(principal: Principal, params: DecisionListParams) {
    const filters = yield* checkDecisionFilters(params)
    const request = yield* pageRequest(key, principal, "decisions", filters, params)
    return yield* read(principal, decisionPage(principal, filters, request))
  })

  const listSessionDecisions = Effect.fn("LedgerQuery.listSessionDecisions")(
    function*(principal: Principal, sessionId: string, params: DecisionListParams) {
      const id = yield* checkRequired(LedgerUuid, "session_id", sessionId)
      const filters = { ...(yield* checkDecisionFilters(params)), session_id: id }
      const request = yield* pageRequest(key, principal, `session-decisions:${id}`, filters, params)
      return yield* read(
        principal,
        Effect.gen(function*() {
          const sql = yield* ScopedSql
          const visible = yield* sql`SELECT 1 FROM sessions WHERE session_id = ${currentSessionId(sql, id)}`
          if (visible.length === 0) return yield* notFound("session", id)
          return yield* decisionPage(principal, filters, request)
        })
      )
    }
  )

  const getDecision = Effect.fn("LedgerQuery.getDecision")(
    function*(principal: Principal, ledgerId: string, sessionId?: string) {
      const id = yield* checkRequired(LedgerUuid, "ledger_id", ledgerId)
      const session = yield* checkOptional(LedgerUuid, "session_id", sessionId)
      return yield* read(
        principal,
        Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [row] = yield* sql<DecisionRow>`
            SELECT ${sql.literal(DECISION_COLUMNS)} FROM decisions
            WHERE ledger_id = ${id}::uuid ${session === undefined ? sql`` : sql`AND session_id = ${currentSessionId(sql, session)}`}`
          if (row === undefined) return yield* notFound("decision", id)
          return toDecision(row)
        })
      )
    }
  )

  return {
    listAgents,
    listAgentSessions,
    getSession,
    listSessionDecisions,
    getDecision,
    listDecisions
  } satisfies Context.Service.Shape<typeof LedgerQuery>
})

/**
 * The read model as the `LedgerQuery` service, on the tenant-scoped client it is given (needs TenantSql, CursorSecret
 * and LedgerConfig): the API role gives it the read replica's when there is one (layers/Api.ts).
 */
export const ReadModelLive = Layer.effect(LedgerQuery, makeLedgerQuery)

/** The read model with its cursor secret, both on the same tenant-scoped client. */
export const LedgerQueryLive = ReadModelLive.pipe(Layer.provide(CursorSecret.layer))
