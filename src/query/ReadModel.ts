/**
 * The read model behind `LedgerQuery`: SQL over agents, sessions and decisions, always inside
 * `TenantSql.read(principal, ...)` so row-level security scopes every statement to the caller.
 *
 * Lists are keyset-paginated: each order is (sort key, id) in one direction, and a page continues strictly after
 * the last row of the previous one, so rows arriving meanwhile neither repeat nor shift what is left to read.
 * Restricted members see only their own decisions (RLS); their agent and session figures are aggregated from
 * those decisions here instead of read from the stored rollups, which count everyone's.
 */
import { Clock, type Context, Effect, Schema } from "effect"
import type { Statement } from "effect/sql"
import { sessionSummary } from "../builder/sessions.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { type Decision, type DecisionSummary, Intent, Outcome } from "../domain/decision.ts"
import { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import type { Agent, Session, SessionDetail } from "../domain/ledger.ts"
import type { Principal } from "../domain/principal.ts"
import { ScopedSql, TenantSql, unavailable } from "../store/TenantSql.ts"
import { currentSessionId } from "../store/sessionAliases.ts"
import { CursorSecret, decodeCursor, encodeCursor } from "./cursor.ts"
import { HEALTH_WINDOW, type HealthSample, sessionHealth } from "./health.ts"
import type {
  AgentListParams,
  DecisionListParams,
  DecisionPage,
  LedgerQuery,
  SessionListParams
} from "./LedgerQuery.ts"
import {
  AgentId,
  AgentOrder,
  DecisionOrder,
  DEFAULT_PAGE_LIMIT,
  IsoDateTime,
  LedgerUuid,
  PageCursor,
  PageLimit,
  SessionOrder,
  UnitScore,
  UsdAmount
} from "./params.ts"

/** how many of its latest decisions the single-session view embeds */
export const SESSION_VIEW_DECISIONS = 20
/** a read that takes longer than this is treated as the database being unavailable */
const READ_TIMEOUT_MS = 10_000

// ---------------------------------------------------------------------------------------------------------
// Parameters

const invalid = (param: string, message: string) => new BadRequest({ param, message: `${param}: ${message}` })

/** Checks one parameter against its schema; undefined stays undefined (every parameter is optional). */
const param = <S extends Schema.Codec<any, any, never, never>>(schema: S, name: string, value: unknown) =>
  value === undefined
    ? Effect.succeed(undefined)
    : Schema.decodeUnknownEffect(schema)(value).pipe(
      Effect.mapError((error) => invalid(name, error.message))
    ) as Effect.Effect<S["Type"], BadRequest>

/** A checked ISO 8601 time as UTC: a time without an offset is UTC, whatever the server's time zone. */
const time = (name: string, value: unknown) =>
  Effect.map(param(IsoDateTime, name, value), (iso) => {
    if (iso === undefined) return undefined
    const explicitZone = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(iso) || !/[T ]\d/i.test(iso)
    const utc = new Date(explicitZone ? iso : `${iso}Z`)
    return (Number.isNaN(utc.getTime()) ? new Date(iso) : utc).toISOString()
  })

const required = <S extends Schema.Codec<any, any, never, never>>(schema: S, name: string, value: unknown) =>
  Schema.decodeUnknownEffect(schema)(value).pipe(
    Effect.mapError((error) => invalid(name, error.message))
  ) as Effect.Effect<S["Type"], BadRequest>

// ---------------------------------------------------------------------------------------------------------
// Keyset ordering

/** Postgres text of a timestamp with its microseconds, so a cursor positions exactly. */
const timestampText = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

interface Ordering {
  /** SQL of the sort key (a trusted constant, never input) */
  readonly sort: string
  /** SQL type the cursor's sort text is cast back to */
  readonly sortType: "timestamptz" | "float8"
  readonly id: string
  readonly idType: "uuid" | "text"
  readonly direction: "ASC" | "DESC"
}

const byTime = (column: string, id: string, idType: Ordering["idType"], direction: Ordering["direction"]): Ordering => ({
  sort: column,
  sortType: "timestamptz",
  id,
  idType,
  direction
})
const byNumber = (expression: string, id: string, idType: Ordering["idType"], direction: Ordering["direction"]): Ordering => ({
  sort: expression,
  sortType: "float8",
  id,
  idType,
  direction
})

const sortText = (ordering: Ordering) =>
  ordering.sortType === "timestamptz" ? timestampText(ordering.sort) : `(${ordering.sort})::text`

const AGENT_ORDERS: Record<AgentOrder, Ordering> = {
  recent: byTime("last_seen_at", "agent_id", "text", "DESC"),
  cost: byNumber("total_cost_usd", "agent_id", "text", "DESC"),
  decisions: byNumber("decision_count", "agent_id", "text", "DESC")
}
const SESSION_ORDERS: Record<SessionOrder, Ordering> = {
  recent: byTime("ended_at", "session_id", "uuid", "DESC"),
  cost: byNumber("total_cost_usd", "session_id", "uuid", "DESC")
}
const DECISION_ORDERS: Record<DecisionOrder, Ordering> = {
  newest: byTime("created_at", "ledger_id", "uuid", "DESC"),
  oldest: byTime("created_at", "ledger_id", "uuid", "ASC"),
  // cost_rank = coalesce(cost_usd, -1) (a stored column): unpriced decisions sort after every priced one
  cost: byNumber("cost_rank", "ledger_id", "uuid", "DESC"),
  quality: byNumber("quality", "ledger_id", "uuid", "ASC")
}

// ---------------------------------------------------------------------------------------------------------
// Rows

const SUMMARY_COLUMNS = `ledger_id, session_id, agent_id, execution_id, created_at, provider, model, title, intent,
  outcome, cost_usd, quality, confidence, latency_ms, status, usage`

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

interface DecisionRow extends SummaryRow {
  readonly api: Decision["api"]
  readonly response_id: string | null
  readonly previous_ledger_id: string | null
  readonly source: Decision["source"]
  readonly stream: boolean
  readonly first_token_ms: number | null
  readonly derivation: Record<string, any> | null
  readonly error: { readonly type?: string; readonly code?: string | null; readonly message?: string } | null
}

/** count columns are bigint, which the driver returns as text */
type Count = number | string

interface AgentRow {
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

interface SessionRow {
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

interface Keyed {
  /** the sort key's Postgres text, for the next cursor */
  readonly k: string
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

/** The stored derivation completes the columns; parts missing from an older row degrade to empty, never fail. */
const toDecision = (row: DecisionRow): Decision => {
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
    artifacts: asArray(derivation.artifacts)
  }
}

const toAgent = (row: AgentRow): Agent => {
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

const toSession = (row: SessionRow): Session => {
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

const AGENT_COLUMNS = `agent_id, agent_name, decision_count, session_count, error_count, total_cost_usd, confidence_sum,
  first_seen_at, last_seen_at`
const SESSION_COLUMNS = `session_id, agent_id, execution_id, started_at, ended_at, decision_count, error_count,
  total_cost_usd, total_tokens, summary`
/** the restricted view also carries its first decision, to summarise the session from what the member may see */
const VISIBLE_SESSION_COLUMNS = `${SESSION_COLUMNS}, first_ledger_id, first_title`

/**
 * Restricted members: RLS already limits decisions to their own; naming their user id again lets the planner
 * read them through the `decisions_user` index instead of filtering the whole workspace.
 */
const ownDecisions = (sql: Statement.Constructor, principal: Principal) => sql`user_id = ${principal.user_id}::uuid`

/** A restricted member's agents, aggregated from the decisions they may see. */
const visibleAgents = (sql: Statement.Constructor, principal: Principal) =>
  sql`(SELECT v.*, (SELECT a.agent_name FROM agents a WHERE a.agent_id = v.agent_id) AS agent_name
    FROM (SELECT agent_id, count(*) AS decision_count, count(DISTINCT session_id) AS session_count,
            count(*) FILTER (WHERE outcome = 'error') AS error_count, coalesce(sum(cost_usd), 0) AS total_cost_usd,
            coalesce(sum(confidence), 0) AS confidence_sum, min(created_at) AS first_seen_at, max(created_at) AS last_seen_at
          FROM decisions WHERE ${ownDecisions(sql, principal)} GROUP BY agent_id) v) agents`

/** A restricted member's sessions (within `scope`), aggregated from the decisions they may see. */
const visibleSessions = (sql: Statement.Constructor, principal: Principal, scope: Statement.Fragment) =>
  sql`(SELECT v.*, (SELECT s.execution_id FROM sessions s WHERE s.session_id = v.session_id) AS execution_id,
      NULL::text AS summary
    FROM (SELECT session_id, min(agent_id) AS agent_id, min(created_at) AS started_at,
            max(created_at + latency_ms * interval '1 millisecond') AS ended_at, count(*) AS decision_count,
            count(*) FILTER (WHERE outcome = 'error') AS error_count, coalesce(sum(cost_usd), 0) AS total_cost_usd,
            coalesce(sum((usage->>'total_tokens')::bigint), 0) AS total_tokens,
            (array_agg(ledger_id::text ORDER BY created_at, ledger_id))[1] AS first_ledger_id,
            (array_agg(title ORDER BY created_at, ledger_id))[1] AS first_title
          FROM decisions WHERE ${scope} AND ${ownDecisions(sql, principal)} GROUP BY session_id) v) sessions`

// ---------------------------------------------------------------------------------------------------------

export const makeLedgerQuery = Effect.gen(function*() {
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

  const isRestricted = (principal: Principal) => principal.role === "restricted"

  /** What a cursor is bound to: the caller's scope, the list, and every parameter except the page size. */
  const binding = (principal: Principal, list: string, params: object) =>
    JSON.stringify([principal.tenant_id, principal.workspace_id, principal.user_id, principal.role, list, params])

  interface PageRequest {
    readonly limit: number
    readonly binding: string
    readonly after: { readonly sort: string; readonly id: string } | undefined
  }

  const pageRequest = Effect.fnUntraced(function*(principal: Principal, list: string, params: object, raw: {
    readonly limit?: unknown
    readonly cursor?: unknown
  }) {
    const limit = (yield* param(PageLimit, "limit", raw.limit)) ?? DEFAULT_PAGE_LIMIT
    const cursor = yield* param(PageCursor, "cursor", raw.cursor)
    const bound = binding(principal, list, params)
    const after = cursor === undefined ? undefined : decodeCursor(key, bound, cursor)
    if (cursor !== undefined && after === undefined) {
      return yield* invalid("cursor", "not a cursor issued for this list with these parameters (pass next_cursor unchanged)")
    }
    return { limit, binding: bound, after } satisfies PageRequest
  })

  /** The keyset condition and ORDER BY of a page. */
  const keyset = (sql: Statement.Constructor, ordering: Ordering, request: PageRequest) => {
    const operator = ordering.direction === "DESC" ? "<" : ">"
    const after = request.after === undefined
      ? sql`TRUE`
      : sql`(${sql.literal(ordering.sort)}, ${sql.literal(ordering.id)}) ${sql.literal(operator)}
          (${request.after.sort}::${sql.literal(ordering.sortType)}, ${request.after.id}::${sql.literal(ordering.idType)})`
    const orderBy = sql.literal(`${ordering.sort} ${ordering.direction}, ${ordering.id} ${ordering.direction}`)
    return { after, orderBy, k: sql.literal(sortText(ordering)) }
  }

  const finishPage = <Row extends Keyed, A>(rows: ReadonlyArray<Row>, request: PageRequest, id: (row: Row) => string, to: (row: Row) => A) => {
    const more = rows.length > request.limit
    const items = more ? rows.slice(0, request.limit) : rows
    const last = items.at(-1)
    return {
      data: items.map(to),
      next_cursor: more && last !== undefined ? encodeCursor(key, request.binding, { sort: last.k, id: id(last) }) : null
    }
  }

  const notFound = (what: string, id: string) => new NotFound({ message: `${what} ${id} not found` })

  // --- agents

  const listAgents = Effect.fn("LedgerQuery.listAgents")(function*(principal: Principal, params: AgentListParams) {
    const order = (yield* param(AgentOrder, "order", params.order)) ?? "recent"
    const activeSince = yield* time("active_since", params.active_since)
    const activeUntil = yield* time("active_until", params.active_until)
    const request = yield* pageRequest(principal, "agents", { order, activeSince, activeUntil }, params)
    return yield* read(principal, Effect.gen(function*() {
      const sql = yield* ScopedSql
      const { after, orderBy, k } = keyset(sql, AGENT_ORDERS[order], request)
      const rows = yield* sql<AgentRow & Keyed>`
        SELECT ${sql.literal(AGENT_COLUMNS)}, ${k} AS k
        FROM ${isRestricted(principal) ? visibleAgents(sql, principal) : sql.literal("agents")}
        WHERE ${
        sql.and([
          activeSince === undefined ? sql`TRUE` : sql`last_seen_at >= ${activeSince}::timestamptz`,
          activeUntil === undefined ? sql`TRUE` : sql`last_seen_at < ${activeUntil}::timestamptz`,
          after
        ])
      }
        ORDER BY ${orderBy} LIMIT ${request.limit + 1}`
      return finishPage(rows, request, (row) => row.agent_id, toAgent)
    }).pipe(Effect.mapError(unavailable)))
  })

  // --- sessions

  /** The caller's view of sessions within `scope` (a condition on `agent_id` / `session_id`). */
  const sessionColumns = (principal: Principal) =>
    isRestricted(principal) ? VISIBLE_SESSION_COLUMNS : SESSION_COLUMNS

  const sessionsSource = (sql: Statement.Constructor, principal: Principal, scope: Statement.Fragment) =>
    isRestricted(principal)
      ? visibleSessions(sql, principal, scope)
      : sql`(SELECT ${sql.literal(SESSION_COLUMNS)} FROM sessions WHERE ${scope}) sessions`

  const agentVisible = (sql: Statement.Constructor, agentId: string) =>
    Effect.map(sql`SELECT 1 FROM agents WHERE agent_id = ${agentId} LIMIT 1`, (rows) => rows.length > 0)

  const listAgentSessions = Effect.fn("LedgerQuery.listAgentSessions")(
    function*(principal: Principal, agentId: string, params: SessionListParams) {
      const agent = yield* required(AgentId, "agent_id", agentId)
      const order = (yield* param(SessionOrder, "order", params.order)) ?? "recent"
      const since = yield* time("since", params.since)
      const until = yield* time("until", params.until)
      const request = yield* pageRequest(principal, `sessions:${agent}`, { order, since, until }, params)
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
          return finishPage(rows, request, (row) => row.session_id, toSession)
        }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(unavailable(error))))
      )
    }
  )

  const getSession = Effect.fn("LedgerQuery.getSession")(function*(principal: Principal, sessionId: string) {
    const id = yield* required(LedgerUuid, "session_id", sessionId)
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
      }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(unavailable(error))))
    )
  })

  // --- decisions

  interface CheckedFilters {
    readonly order: DecisionOrder
    readonly since: string | undefined
    readonly until: string | undefined
    readonly outcomes: ReadonlyArray<Outcome> | undefined
    readonly intents: ReadonlyArray<Intent> | undefined
    readonly min_cost_usd: number | undefined
    readonly max_cost_usd: number | undefined
    readonly min_quality: number | undefined
    readonly max_quality: number | undefined
    readonly agent_id: string | undefined
    readonly session_id: string | undefined
    readonly model: string | undefined
  }

  const checkFilters = Effect.fnUntraced(function*(params: DecisionListParams) {
    return {
      order: (yield* param(DecisionOrder, "order", params.order)) ?? "newest",
      since: yield* time("since", params.since),
      until: yield* time("until", params.until),
      outcomes: yield* param(Schema.Array(Outcome), "outcomes", params.outcomes),
      intents: yield* param(Schema.Array(Intent), "intents", params.intents),
      min_cost_usd: yield* param(UsdAmount, "min_cost_usd", params.min_cost_usd),
      max_cost_usd: yield* param(UsdAmount, "max_cost_usd", params.max_cost_usd),
      min_quality: yield* param(UnitScore, "min_quality", params.min_quality),
      max_quality: yield* param(UnitScore, "max_quality", params.max_quality),
      agent_id: yield* param(AgentId, "agent_id", params.agent_id),
      session_id: yield* param(LedgerUuid, "session_id", params.session_id),
      model: yield* param(Schema.String, "model", params.model)
    } satisfies CheckedFilters
  })

  const decisionPage = (principal: Principal, filters: CheckedFilters, request: PageRequest) =>
    Effect.gen(function*() {
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
      return finishPage(rows, request, (row) => row.ledger_id, toSummary) satisfies DecisionPage
    }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(unavailable(error))))

  const listDecisions = Effect.fn("LedgerQuery.listDecisions")(function*(principal: Principal, params: DecisionListParams) {
    const filters = yield* checkFilters(params)
    const request = yield* pageRequest(principal, "decisions", filters, params)
    return yield* read(principal, decisionPage(principal, filters, request))
  })

  const listSessionDecisions = Effect.fn("LedgerQuery.listSessionDecisions")(
    function*(principal: Principal, sessionId: string, params: DecisionListParams) {
      const id = yield* required(LedgerUuid, "session_id", sessionId)
      const filters = { ...(yield* checkFilters(params)), session_id: id }
      const request = yield* pageRequest(principal, `session-decisions:${id}`, filters, params)
      return yield* read(
        principal,
        Effect.gen(function*() {
          const sql = yield* ScopedSql
          const visible = yield* sql`SELECT 1 FROM sessions WHERE session_id = ${currentSessionId(sql, id)}`
          if (visible.length === 0) return yield* notFound("session", id)
          return yield* decisionPage(principal, filters, request)
        }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(unavailable(error))))
      )
    }
  )

  const getDecision = Effect.fn("LedgerQuery.getDecision")(
    function*(principal: Principal, ledgerId: string, sessionId?: string) {
      const id = yield* required(LedgerUuid, "ledger_id", ledgerId)
      const session = yield* param(LedgerUuid, "session_id", sessionId)
      return yield* read(
        principal,
        Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [row] = yield* sql<DecisionRow>`
            SELECT ${sql.literal(SUMMARY_COLUMNS)}, api, response_id, previous_ledger_id::text AS previous_ledger_id, source, stream,
              first_token_ms, derivation, error FROM decisions
            WHERE ledger_id = ${id}::uuid ${session === undefined ? sql`` : sql`AND session_id = ${currentSessionId(sql, session)}`}`
          if (row === undefined) return yield* notFound("decision", id)
          return toDecision(row)
        }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(unavailable(error))))
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
