/**
 * The analytics read model (docs/ARCHITECTURE.md, "Analytics"): graph, similar decisions, features and merge
 * suggestions, insights, pulse. Like `LedgerQuery`, every query runs through `TenantSql.read(principal, ...)`, so RLS
 * scopes each answer to the caller; parameters are checked against the schemas of ./schema.ts before any SQL runs
 * (bad input is a BadRequest, never a 5xx); lists page with the install's signed keyset cursors.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import type { Statement } from "effect/sql"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { CursorSecret, decodeCursor } from "../query/cursor.ts"
import { DEFAULT_PAGE_LIMIT } from "../query/params.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { sessionIdsOf } from "../store/sessionAliases.ts"
import { agentNetwork, traverse } from "./Graph.ts"
import { ModelCalls } from "./ModelCalls.ts"
import { toUtc } from "../query/paramChecks.ts"
import { periodOf, pulseFigures, windowOverlaps } from "./Pulse.ts"
import { computeRoi, type RoiSettings, workspaceRoiSettings } from "./Roi.ts"
import { FEATURE_QUIET_HOURS, LINKING_RULE, MERGE_RULE, STATUS_RULE, SUCCESS_OUTCOMES } from "./rules.ts"
import {
  EDGE_TYPES,
  type Feature,
  type FeatureDetail,
  FeatureGetParams,
  FeatureListParams,
  type FeaturePage,
  type FeatureStatus,
  GraphParams,
  type GraphResult,
  type Insight,
  InsightListParams,
  type InsightPage,
  type MergeSuggestion,
  type MergeSuggestionPage,
  MergeSuggestionParams,
  PulseParams,
  type PulseReport,
  type NodeType,
  SimilarParams,
  type SimilarResult,
  START_PARAMS
} from "./schema.ts"
import { hasPgvector, lexemesOf, representationOf, searchSimilar } from "./Similarity.ts"
import { localVector } from "./text.ts"
import { finishPage } from "../query/paging.ts"

/** A read slower than this is treated as the database being unavailable. */
const READ_TIMEOUT_MS = 10_000
const FEATURE_SESSIONS_SHOWN = 100
const MAX_RANGE_DAYS = 366
const NEW_INSIGHTS_SHOWN = 10
const DELIVERED_SHOWN = 10

export type AnalyticsError = BadRequest | NotFound | DatabaseUnavailable

const START_TYPES: Record<typeof START_PARAMS[number], NodeType> = {
  agent_id: "agent",
  session_id: "session",
  ledger_id: "decision",
  subject: "subject",
  source: "source"
}

const invalid = (param: string, message: string) => new BadRequest({ param, message: `${param}: ${message}` })

/** Checks parameters against their schema (every surface gets the same checks; unknown fields are ignored). */
/** The time parameters of the analytics tools: a time without an offset is UTC, as in the decision lists. */
const TIME_PARAMS = ["since", "until", "date", "as_of"] as const

const checked = <S extends Schema.Codec<any, any, never, never>>(schema: S, params: unknown): Effect.Effect<S["Type"], BadRequest> =>
  Schema.decodeUnknownEffect(schema)(params).pipe(
    Effect.map((decoded: Record<string, unknown>) => {
      const times = TIME_PARAMS.filter((key) => typeof decoded[key] === "string")
      return times.length === 0 ? decoded : { ...decoded, ...Object.fromEntries(times.map((key) => [key, toUtc(decoded[key] as string)])) }
    }),
    Effect.mapError((error) => new BadRequest({ message: error.message.replace(/\s*\n\s*/g, " ") }))
  )

const HOUR_MS = 3_600_000
const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

interface FeatureRow {
  readonly feature_id: string
  readonly title: string
  readonly subjects: Feature["subjects"]
  readonly agents: Array<string>
  readonly session_count: number
  readonly decision_count: number
  readonly success_count: number
  readonly error_count: number
  readonly cost_usd: number
  readonly first_at: Date
  readonly last_at: Date
  readonly last_outcome: Feature["last_outcome"]
  readonly successes_by_intent: Record<string, number>
  readonly k: string
}

const FEATURE_COLUMNS = `feature_id::text AS feature_id, title, subjects, agents, session_count::int AS session_count,
  decision_count::int AS decision_count, success_count::int AS success_count, error_count::int AS error_count, cost_usd,
  first_at, last_at, last_outcome, successes_by_intent`

const SUCCESS: ReadonlySet<string> = new Set(SUCCESS_OUTCOMES)

/** STATUS_RULE applied to one feature. */
const statusOf = (row: Pick<FeatureRow, "last_at" | "last_outcome">, asOf: Date): { status: FeatureStatus; reason: string } => {
  const quiet = (asOf.getTime() - row.last_at.getTime()) / HOUR_MS
  // the rule on the exact time (as the status filter and the pulse apply it), rounded only for the reason
  const quietHours = round(quiet, 1)
  if (quiet < FEATURE_QUIET_HOURS) {
    return { status: "in_progress", reason: `last activity ${Math.max(0, quietHours)} h before as_of (< ${FEATURE_QUIET_HOURS} h)` }
  }
  return SUCCESS.has(row.last_outcome)
    ? { status: "delivered", reason: `quiet for ${quietHours} h (≥ ${FEATURE_QUIET_HOURS} h) after a ${row.last_outcome}` }
    : { status: "stalled", reason: `quiet for ${quietHours} h (≥ ${FEATURE_QUIET_HOURS} h) after an ${row.last_outcome}` }
}

const toFeature = (row: FeatureRow, asOf: Date, roi: RoiSettings): Feature => {
  const { reason, status } = statusOf(row, asOf)
  return {
    feature_id: row.feature_id,
    title: row.title,
    status,
    status_reason: reason,
    subjects: row.subjects,
    session_count: row.session_count,
    decision_count: row.decision_count,
    agent_count: row.agents.length,
    agents: row.agents,
    cost_usd: round(row.cost_usd, 6),
    started_at: row.first_at.toISOString(),
    last_activity_at: row.last_at.toISOString(),
    time_span_hours: round((row.last_at.getTime() - row.first_at.getTime()) / HOUR_MS, 2),
    success_rate: row.decision_count === 0 ? 0 : round(row.success_count / row.decision_count, 4),
    last_outcome: row.last_outcome,
    roi: computeRoi(roi, row.successes_by_intent, row.cost_usd)
  }
}

interface InsightRow {
  readonly insight_id: string
  readonly type: Insight["type"]
  readonly severity: Insight["severity"]
  readonly title: string
  readonly evidence: Record<string, unknown>
  readonly window_start: Date
  readonly window_end: Date
  readonly agent_ids: Array<string>
  readonly session_ids: Array<string>
  readonly ledger_ids: Array<string>
  readonly detected_at: Date
  readonly updated_at: Date
  readonly k: string
}

const INSIGHT_COLUMNS = `insight_id::text AS insight_id, type, severity, title, evidence, window_start, window_end, agent_ids,
  session_ids, ledger_ids, detected_at, updated_at`

const toInsight = ({ k: _k, ...row }: InsightRow): Insight => ({
  ...row,
  window_start: row.window_start.toISOString(),
  window_end: row.window_end.toISOString(),
  detected_at: row.detected_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

interface SuggestionRow {
  readonly feature_a: string
  readonly feature_b: string
  readonly title_a: string
  readonly title_b: string
  readonly score: number
  readonly reasons: { readonly signals: MergeSuggestion["signals"]; readonly reason: string }
  readonly k: string
}

const toSuggestion = (row: SuggestionRow): MergeSuggestion => ({
  feature_a: { feature_id: row.feature_a, title: row.title_a },
  feature_b: { feature_id: row.feature_b, title: row.title_b },
  score: row.score,
  signals: row.reasons.signals,
  reason: row.reasons.reason
})

const timestampText = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

export class AnalyticsQuery extends Context.Service<AnalyticsQuery, {
  queryGraph(principal: Principal, params: GraphParams): Effect.Effect<GraphResult, AnalyticsError>
  searchSimilarDecisions(principal: Principal, params: SimilarParams): Effect.Effect<SimilarResult, AnalyticsError>
  listFeatures(principal: Principal, params: FeatureListParams): Effect.Effect<FeaturePage, AnalyticsError>
  getFeature(principal: Principal, params: FeatureGetParams): Effect.Effect<FeatureDetail, AnalyticsError>
  listFeatureMergeSuggestions(principal: Principal, params: MergeSuggestionParams): Effect.Effect<MergeSuggestionPage, AnalyticsError>
  listInsights(principal: Principal, params: InsightListParams): Effect.Effect<InsightPage, AnalyticsError>
  getPulseReport(principal: Principal, params: PulseParams): Effect.Effect<PulseReport, AnalyticsError>
}>()("ledger/analytics/AnalyticsQuery") {
  static readonly layer = Layer.effect(
    AnalyticsQuery,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const { key } = yield* CursorSecret
      const config = yield* LedgerConfig
      const models = yield* ModelCalls

      const read = <A, E>(principal: Principal, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.read(principal, effect).pipe(
          Effect.timeoutOrElse({
            duration: READ_TIMEOUT_MS,
            orElse: () => Effect.fail(new DatabaseUnavailable({ message: "database did not answer in time" }))
          })
        )

      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      // --- paging

      const binding = (principal: Principal, list: string, params: object) =>
        JSON.stringify([principal.tenant_id, principal.workspace_id, principal.user_id, principal.role, list, params])

      const pageOf = (principal: Principal, list: string, params: { readonly limit?: number | undefined; readonly cursor?: string | undefined }, rest: object) => {
        const bound = binding(principal, list, rest)
        const after = params.cursor === undefined ? undefined : decodeCursor(key, bound, params.cursor)
        if (params.cursor !== undefined && after === undefined) {
          return Effect.fail(invalid("cursor", "not a cursor issued for this list with these parameters (pass next_cursor unchanged)"))
        }
        return Effect.succeed({ limit: params.limit ?? DEFAULT_PAGE_LIMIT, binding: bound, after })
      }

      const asOfParam = (asOf: string | undefined) => asOf === undefined ? now : Effect.succeed(new Date(asOf))

      // --- graph

      const queryGraph = Effect.fn("AnalyticsQuery.queryGraph")(function*(principal: Principal, raw: GraphParams) {
        const params = yield* checked(GraphParams, raw)
        const edgeTypes = params.edge_types === undefined || params.edge_types.length === 0 ? EDGE_TYPES : [...new Set(params.edge_types)]
        const limit = params.limit ?? 100
        if ((params.mode ?? "traverse") === "agent_network") {
          return yield* read(principal, agentNetwork({ limit, minWeight: params.min_weight ?? 1, edgeTypes }))
        }
        const starts = START_PARAMS.filter((name) => params[name] !== undefined)
        if (starts.length !== 1) {
          return yield* invalid(starts[1] ?? "agent_id", `give exactly one start node (${START_PARAMS.join(", ")}), or use mode agent_network`)
        }
        const start = starts[0]!
        return yield* read(principal, traverse({
          type: START_TYPES[start],
          id: start === "session_id" || start === "ledger_id" ? params[start]!.toLowerCase() : params[start]!,
          edgeTypes,
          direction: params.direction ?? "both",
          depth: params.depth ?? 2,
          limit
        }))
      })

      // --- similar decisions

      const searchSimilarDecisions = Effect.fn("AnalyticsQuery.searchSimilarDecisions")(function*(principal: Principal, raw: SimilarParams) {
        const params = yield* checked(SimilarParams, raw)
        if ((params.text === undefined) === (params.ledger_id === undefined)) {
          return yield* invalid(params.text === undefined ? "text" : "ledger_id", "give exactly one of `text` or `ledger_id`")
        }
        const { ledger_id, limit, min_score, text, ...filters } = params
        const minScore = min_score ?? 0.3
        const modelEmbedding = Option.isSome(models.embeddingsModel) && text !== undefined
          ? yield* models.embed([text]).pipe(
            Effect.map((vectors) => Option.some({ model: Option.getOrThrow(models.embeddingsModel), vector: vectors[0]! })),
            Effect.catch((error) =>
              Effect.logWarning("query embedding failed; searching with local vectors", { error: error.message }).pipe(Effect.as(Option.none()))
            )
          )
          : Option.none()
        return yield* read(principal, Effect.gen(function*() {
          const pgvector = yield* hasPgvector
          let query: Parameters<typeof searchSimilar>[0]
          if (ledger_id !== undefined) {
            const stored = yield* representationOf(ledger_id)
            if (stored === undefined) {
              return yield* new NotFound({ message: `decision ${ledger_id} not found (or not analysed yet)` })
            }
            const embedding = stored.embedding !== null && stored.embedding_model !== null &&
                Option.contains(models.embeddingsModel, stored.embedding_model)
              ? Option.some({ model: stored.embedding_model, vector: stored.embedding })
              : Option.none()
            query = {
              text: undefined,
              lexemes: stored.lexemes,
              localVector: stored.local_vector,
              embedding,
              excludeLedgerId: ledger_id,
              filters,
              limit: limit ?? 10,
              minScore,
              pgvector,
              restricted: principal.role === "restricted"
            }
          } else {
            query = {
              text,
              lexemes: yield* lexemesOf(text!),
              localVector: localVector(text!),
              embedding: modelEmbedding,
              excludeLedgerId: undefined,
              filters,
              limit: limit ?? 10,
              minScore,
              pgvector,
              restricted: principal.role === "restricted"
            }
          }
          const { data, strategy } = yield* searchSimilar(query)
          return {
            query: { text: text ?? null, ledger_id: ledger_id ?? null },
            representation: Option.match(query.embedding, { onNone: () => "local", onSome: (e) => `embeddings:${e.model}` }),
            candidates: strategy,
            min_score: minScore,
            data
          } satisfies SimilarResult
        }))
      })

      // --- features

      const roiSettings = workspaceRoiSettings(config.analytics)

      const FEATURE_ORDERS = {
        recent: { sort: "last_at", k: timestampText("last_at"), type: "timestamptz" },
        cost: { sort: "cost_usd", k: "cost_usd::text", type: "float8" }
      } as const

      const statusCondition = (sql: ScopedSql["Service"], status: FeatureStatus | undefined, asOf: Date) => {
        const quietSince = new Date(asOf.getTime() - FEATURE_QUIET_HOURS * HOUR_MS).toISOString()
        switch (status) {
          case undefined:
            return sql`TRUE`
          case "in_progress":
            return sql`last_at > ${quietSince}::timestamptz`
          case "delivered":
            return sql`last_at <= ${quietSince}::timestamptz AND last_outcome = ANY(${[...SUCCESS_OUTCOMES]}::text[])`
          case "stalled":
            return sql`last_at <= ${quietSince}::timestamptz AND NOT (last_outcome = ANY(${[...SUCCESS_OUTCOMES]}::text[]))`
        }
      }

      const listFeatures = Effect.fn("AnalyticsQuery.listFeatures")(function*(principal: Principal, raw: FeatureListParams) {
        const params = yield* checked(FeatureListParams, raw)
        const { cursor: _c, limit: _l, ...rest } = params
        const asOf = yield* asOfParam(params.as_of)
        const page = yield* pageOf(principal, "features", params, { ...rest, as_of: asOf.toISOString() })
        const order = FEATURE_ORDERS[params.order ?? "recent"]
        return yield* read(principal, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const after = page.after === undefined
            ? sql`TRUE`
            : sql`(${sql.literal(order.sort)}, feature_id) < (${page.after.sort}::${sql.literal(order.type)}, ${page.after.id}::uuid)`
          const rows = yield* sql<FeatureRow>`
            SELECT ${sql.literal(FEATURE_COLUMNS)}, ${sql.literal(order.k)} AS k FROM features
            WHERE ${
            sql.and([
              statusCondition(sql, params.status, asOf),
              params.agent_id === undefined ? sql`TRUE` : sql`${params.agent_id} = ANY(agents)`,
              params.since === undefined ? sql`TRUE` : sql`last_at >= ${params.since}::timestamptz`,
              params.until === undefined ? sql`TRUE` : sql`first_at < ${params.until}::timestamptz`,
              after
            ])
          }
            ORDER BY ${sql.literal(order.sort)} DESC, feature_id DESC LIMIT ${page.limit + 1}`
          const roi = yield* roiSettings
          return {
            ...finishPage(key, rows, page, (row) => row.feature_id, (row) => toFeature(row, asOf, roi)),
            as_of: asOf.toISOString(),
            rules: { status_rule: STATUS_RULE, linking_rule: LINKING_RULE }
          } satisfies FeaturePage
        }))
      })

      const suggestionsQuery = (sql: ScopedSql["Service"], condition: Statement.Fragment, limit: number) =>
        sql<SuggestionRow>`
          SELECT m.feature_a::text AS feature_a, m.feature_b::text AS feature_b, fa.title AS title_a, fb.title AS title_b,
            m.score, m.reasons, m.score::text AS k
          FROM feature_merge_suggestions m
          JOIN features fa ON fa.feature_id = m.feature_a
          JOIN features fb ON fb.feature_id = m.feature_b
          WHERE ${condition}
          ORDER BY m.score DESC, m.feature_a DESC, m.feature_b DESC LIMIT ${limit}`

      const getFeature = Effect.fn("AnalyticsQuery.getFeature")(function*(principal: Principal, raw: FeatureGetParams) {
        const params = yield* checked(FeatureGetParams, raw)
        const asOf = yield* asOfParam(params.as_of)
        return yield* read(principal, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const [row] = yield* sql<FeatureRow>`SELECT ${sql.literal(FEATURE_COLUMNS)}, '' AS k FROM features
            WHERE feature_id = ${params.feature_id}::uuid`
          if (row === undefined) return yield* new NotFound({ message: `feature ${params.feature_id} not found` })
          const sessions = yield* sql<{ session_id: string; agent_id: string; started_at: Date; ended_at: Date; decision_count: number; total_cost_usd: number; summary: string }>`
            SELECT s.session_id::text AS session_id, s.agent_id, s.started_at, s.ended_at, s.decision_count::int AS decision_count,
              s.total_cost_usd, s.summary
            FROM feature_sessions fs JOIN sessions s ON s.session_id = fs.session_id
            WHERE fs.feature_id = ${params.feature_id}::uuid ORDER BY s.started_at, s.session_id LIMIT ${FEATURE_SESSIONS_SHOWN}`
          const suggestions = yield* suggestionsQuery(
            sql,
            sql.and([sql`(m.feature_a = ${params.feature_id}::uuid OR m.feature_b = ${params.feature_id}::uuid)`]),
            DEFAULT_PAGE_LIMIT
          )
          return {
            ...toFeature(row, asOf, yield* roiSettings),
            sessions: sessions.map((s) => ({ ...s, started_at: s.started_at.toISOString(), ended_at: s.ended_at.toISOString() })),
            merge_suggestions: suggestions.map(toSuggestion)
          } satisfies FeatureDetail
        }))
      })

      const listFeatureMergeSuggestions = Effect.fn("AnalyticsQuery.listFeatureMergeSuggestions")(
        function*(principal: Principal, raw: MergeSuggestionParams) {
        const params = yield* checked(MergeSuggestionParams, raw)
          const { cursor: _c, limit: _l, ...rest } = params
          const page = yield* pageOf(principal, "merge-suggestions", params, rest)
          return yield* read(principal, Effect.gen(function*() {
            const sql = yield* ScopedSql
            // the cursor id is `feature_a|feature_b`
            const [afterA, afterB] = page.after?.id.split("|") ?? []
            const rows = yield* suggestionsQuery(
              sql,
              sql.and([
                params.feature_id === undefined
                  ? sql`TRUE`
                  : sql`(m.feature_a = ${params.feature_id}::uuid OR m.feature_b = ${params.feature_id}::uuid)`,
                params.min_score === undefined ? sql`TRUE` : sql`m.score >= ${params.min_score}`,
                page.after === undefined || afterA === undefined || afterB === undefined
                  ? sql`TRUE`
                  : sql`(m.score, m.feature_a, m.feature_b) < (${page.after.sort}::float8, ${afterA}::uuid, ${afterB}::uuid)`
              ]),
              page.limit + 1
            )
            return { ...finishPage(key, rows, page, (row) => `${row.feature_a}|${row.feature_b}`, toSuggestion), rule: MERGE_RULE } satisfies MergeSuggestionPage
          }))
        }
      )

      // --- insights

      const listInsights = Effect.fn("AnalyticsQuery.listInsights")(function*(principal: Principal, raw: InsightListParams) {
        const params = yield* checked(InsightListParams, raw)
        const { cursor: _c, limit: _l, ...rest } = params
        const page = yield* pageOf(principal, "insights", params, rest)
        return yield* read(principal, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = yield* sql<InsightRow>`
            SELECT ${sql.literal(INSIGHT_COLUMNS)}, ${sql.literal(timestampText("window_end"))} AS k FROM insights
            WHERE ${
            sql.and([
              params.types === undefined ? sql`TRUE` : sql`type = ANY(${[...params.types]}::text[])`,
              params.severities === undefined ? sql`TRUE` : sql`severity = ANY(${[...params.severities]}::text[])`,
              params.agent_id === undefined ? sql`TRUE` : sql`${params.agent_id} = ANY(agent_ids)`,
              params.session_id === undefined ? sql`TRUE` : sql`session_ids && ${sessionIdsOf(sql, params.session_id.toLowerCase())}`,
              windowOverlaps(sql, params.since, params.until),
              page.after === undefined
                ? sql`TRUE`
                : sql`(window_end, insight_id) < (${page.after.sort}::timestamptz, ${page.after.id}::uuid)`
            ])
          }
            ORDER BY window_end DESC, insight_id DESC LIMIT ${page.limit + 1}`
          return finishPage(key, rows, page, (row) => row.insight_id, toInsight) satisfies InsightPage
        }))
      })

      // --- pulse

      const getPulseReport = Effect.fn("AnalyticsQuery.getPulseReport")(function*(principal: Principal, raw: PulseParams) {
        const params = yield* checked(PulseParams, raw)
        const kind = params.period ?? "day"
        const at = yield* now
        let period: Parameters<typeof pulseFigures>[1]
        if (kind === "range") {
          if (params.since === undefined) return yield* invalid("since", "required when period is range")
          if (params.until === undefined) return yield* invalid("until", "required when period is range")
          const start = new Date(params.since)
          const end = new Date(params.until)
          if (end <= start) return yield* invalid("until", "must be after since")
          if (end.getTime() - start.getTime() > MAX_RANGE_DAYS * 24 * HOUR_MS) return yield* invalid("until", `a range spans at most ${MAX_RANGE_DAYS} days`)
          period = { kind, start, end }
        } else {
          if (params.since !== undefined || params.until !== undefined) {
            return yield* invalid(params.since !== undefined ? "since" : "until", "only with period range (use date for day, week and month)")
          }
          period = periodOf(kind, params.date === undefined ? at : new Date(params.date))
        }
        return yield* read(principal, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const figures = yield* pulseFigures(principal, period, at)
          const insights = yield* sql<InsightRow>`SELECT ${sql.literal(INSIGHT_COLUMNS)}, '' AS k FROM insights
            WHERE ${windowOverlaps(sql, period.start.toISOString(), period.end.toISOString())}
            ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, window_end DESC, insight_id
            LIMIT ${NEW_INSIGHTS_SHOWN}`
          // features whose last activity fell in the period and that are delivered as of now
          const quietSince = new Date(at.getTime() - FEATURE_QUIET_HOURS * HOUR_MS).toISOString()
          const delivered = yield* sql<FeatureRow>`SELECT ${sql.literal(FEATURE_COLUMNS)}, '' AS k FROM features
            WHERE last_at >= ${period.start.toISOString()}::timestamptz AND last_at < ${period.end.toISOString()}::timestamptz
              AND last_at <= ${quietSince}::timestamptz AND last_outcome = ANY(${[...SUCCESS_OUTCOMES]}::text[])
            ORDER BY last_at DESC, feature_id LIMIT ${DELIVERED_SHOWN}`
          const roi = yield* roiSettings
          return {
            ...figures,
            new_insights: insights.map(toInsight),
            features_delivered: delivered.map((row) => toFeature(row, at, roi))
          } satisfies PulseReport
        }))
      })

      return AnalyticsQuery.of({
        queryGraph,
        searchSimilarDecisions,
        listFeatures,
        getFeature,
        listFeatureMergeSuggestions,
        listInsights,
        getPulseReport
      })
    })
  ).pipe(Layer.provide(CursorSecret.layer))
}
