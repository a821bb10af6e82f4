/**
 * Similar decisions (docs/ARCHITECTURE.md, "Analytics"), on stock PostgreSQL or with pgvector, with local vectors or
 * model embeddings.
 *
 * Candidates first, then an exact score:
 * - pgvector (when the extension and its HNSW indexes exist): nearest neighbours of the query vector.
 * - otherwise full text: the decisions sharing the query's rarest terms (document frequencies of the workspace,
 *   `search_terms`; postings by lexeme, `search_postings`), most shared terms first; when every term is common,
 *   the newest decisions having any of them.
 * Each candidate is then scored by the cosine of its vector and the query's (model embeddings when both have them
 * for the configured model, the local hashed vectors otherwise), in [0,1].
 */
import { Effect, Option } from "effect"
import type { DecisionFilters } from "../query/LedgerQuery.ts"
import { type SummaryRow, toSummary } from "../query/rows.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { currentSessionId } from "../store/sessionAliases.ts"
import type { SimilarDecision, SimilarResult } from "./schema.ts"
import { similarity } from "./text.ts"

/** Candidates scored per query; more when filters will drop some. */
const CANDIDATES = 300
const FILTERED_CANDIDATES = 3_000
/** Rare terms are used while their document frequencies add up to at most this. */
const TERM_BUDGET = 2_000
const MAX_QUERY_TERMS = 12

export interface SimilarQuery {
  /** the query's lexemes (Postgres `english` stems) */
  readonly lexemes: ReadonlyArray<string>
  readonly localVector: ReadonlyArray<number>
  /** the query's model embedding, when a model is configured and answered */
  readonly embedding: Option.Option<{ readonly model: string; readonly vector: ReadonlyArray<number> }>
  readonly excludeLedgerId: string | undefined
  readonly filters: DecisionFilters
  readonly limit: number
  readonly minScore: number
  readonly pgvector: boolean
  /**
   * A restricted member may not read the workspace's term statistics and postings (aggregates of everyone's
   * decisions): its candidates are the newest of the few decisions it may see.
   */
  readonly restricted: boolean
}

interface CandidateRow extends SummaryRow {
  readonly local_vector: Array<number>
  readonly embedding: Array<number> | null
  readonly embedding_model: string | null
  readonly lexemes: Array<string>
}

const CANDIDATE_COLUMNS = `d.ledger_id::text AS ledger_id, d.session_id::text AS session_id, d.agent_id, d.execution_id,
  d.created_at, d.provider, d.model, d.title, d.intent, d.outcome, d.cost_usd, d.quality, d.confidence, d.latency_ms,
  d.status, d.usage, s.local_vector, s.embedding, s.embedding_model, tsvector_to_array(s.document) AS lexemes`

/** The lexemes of a text, as the documents were indexed. */
export const lexemesOf = (text: string) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const rows = yield* sql<{ lexeme: string }>`SELECT lexeme FROM unnest(to_tsvector('english', ${text}))`
    return rows.map((row) => row.lexeme)
  })

/** What a stored decision is searched by: its lexemes and vectors; undefined when it is unknown or not analysed yet. */
export const representationOf = (ledgerId: string) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const [row] = yield* sql<{ lexemes: Array<string>; local_vector: Array<number>; embedding: Array<number> | null; embedding_model: string | null }>`
      SELECT tsvector_to_array(s.document) AS lexemes, s.local_vector, s.embedding, s.embedding_model
      FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id WHERE s.ledger_id = ${ledgerId}::uuid`
    return row
  })

/** Whether pgvector and its indexes are installed (the migration creates them when the server has the extension). */
export const hasPgvector = Effect.gen(function*() {
  const sql = yield* ScopedSql
  const rows = yield* sql`SELECT 1 FROM pg_indexes WHERE indexname = 'decision_search_local_hnsw'`
  return rows.length > 0
})

const isFiltered = (filters: DecisionFilters) => Object.values(filters).some((value) => value !== undefined)

const filterConditions = (sql: ScopedSql["Service"], filters: DecisionFilters) => [
  filters.since === undefined ? sql`TRUE` : sql`d.created_at >= ${filters.since}::timestamptz`,
  filters.until === undefined ? sql`TRUE` : sql`d.created_at < ${filters.until}::timestamptz`,
  filters.outcomes === undefined ? sql`TRUE` : sql`d.outcome = ANY(${[...filters.outcomes]}::text[])`,
  filters.intents === undefined ? sql`TRUE` : sql`d.intent = ANY(${[...filters.intents]}::text[])`,
  filters.min_cost_usd === undefined ? sql`TRUE` : sql`d.cost_usd >= ${filters.min_cost_usd}`,
  filters.max_cost_usd === undefined ? sql`TRUE` : sql`d.cost_usd <= ${filters.max_cost_usd}`,
  filters.min_quality === undefined ? sql`TRUE` : sql`d.quality >= ${filters.min_quality}`,
  filters.max_quality === undefined ? sql`TRUE` : sql`d.quality <= ${filters.max_quality}`,
  filters.agent_id === undefined ? sql`TRUE` : sql`d.agent_id = ${filters.agent_id}`,
  filters.session_id === undefined ? sql`TRUE` : sql`d.session_id = ${currentSessionId(sql, filters.session_id)}`,
  filters.model === undefined ? sql`TRUE` : sql`d.model = ${filters.model}`
]

const vectorLiteral = (vector: ReadonlyArray<number>) => `[${vector.join(",")}]`

/** Scores candidates by cosine (model embeddings when both have them, local vectors otherwise), best first. */
const rank = (query: SimilarQuery, candidates: ReadonlyArray<CandidateRow>): Array<SimilarDecision> => {
  const queryTerms = new Set(query.lexemes)
  const scored = candidates.map((row): SimilarDecision => {
    const model = Option.getOrUndefined(query.embedding)
    const score = model !== undefined && row.embedding !== null && row.embedding_model === model.model
      ? similarity(model.vector, row.embedding)
      : similarity(query.localVector, row.local_vector)
    return {
      ...toSummary(row),
      score,
      shared_terms: row.lexemes.filter((lexeme) => queryTerms.has(lexeme)).sort()
    }
  })
  return scored.filter((result) => result.score >= query.minScore)
    .sort((a, b) => b.score - a.score || b.created_at.localeCompare(a.created_at) || a.ledger_id.localeCompare(b.ledger_id))
    .slice(0, query.limit)
}

export const searchSimilar = (query: SimilarQuery) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const conditions = sql.and([
      ...filterConditions(sql, query.filters),
      query.excludeLedgerId === undefined ? sql`TRUE` : sql`s.ledger_id <> ${query.excludeLedgerId}::uuid`
    ])
    let strategy: SimilarResult["candidates"]
    let candidates: ReadonlyArray<CandidateRow>
    if (query.pgvector) {
      strategy = "pgvector"
      const byEmbedding = Option.isSome(query.embedding)
      const column = sql.literal(byEmbedding ? "s.embedding::vector(256)" : "s.local_vector::vector(256)")
      const vector = vectorLiteral(byEmbedding ? Option.getOrThrow(query.embedding).vector : query.localVector)
      // filtered nearest neighbours: keep scanning the index until enough rows pass the filters
      yield* sql`SELECT set_config('hnsw.ef_search', '400', true), set_config('hnsw.iterative_scan', 'relaxed_order', true)`
      candidates = yield* sql<CandidateRow>`
        SELECT ${sql.literal(CANDIDATE_COLUMNS)} FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
        WHERE ${conditions} ${byEmbedding ? sql`AND s.embedding_model = ${Option.getOrThrow(query.embedding).model}` : sql``}
        ORDER BY ${column} <=> ${vector}::vector(256) LIMIT ${CANDIDATES}`
    } else {
      if (query.lexemes.length === 0) return { strategy: "full_text" as const, data: [] }
      if (query.restricted) {
        strategy = "recent"
        candidates = yield* sql<CandidateRow>`
          SELECT ${sql.literal(CANDIDATE_COLUMNS)} FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
          WHERE ${conditions} ORDER BY s.created_at DESC LIMIT ${FILTERED_CANDIDATES}`
        return { strategy, data: rank(query, candidates) }
      }
      const frequencies = yield* sql<{ lexeme: string; n: number }>`
        SELECT lexeme, doc_count::float8 AS n FROM search_terms WHERE lexeme = ANY(${[...new Set(query.lexemes)]}::text[])
        ORDER BY doc_count, lexeme`
      if (frequencies.length === 0) return { strategy: "full_text" as const, data: [] }
      const rare: Array<string> = []
      let budget = 0
      for (const term of frequencies) {
        if (rare.length >= MAX_QUERY_TERMS || (rare.length > 0 && budget + term.n > TERM_BUDGET)) break
        rare.push(term.lexeme)
        budget += term.n
      }
      // filters drop candidates after they are found: look further when there are some
      const wanted = isFiltered(query.filters) ? FILTERED_CANDIDATES : CANDIDATES
      let ids: ReadonlyArray<{ ledger_id: string }>
      if (budget <= TERM_BUDGET) {
        strategy = "full_text"
        ids = yield* sql<{ ledger_id: string }>`
          SELECT ledger_id::text AS ledger_id FROM search_postings WHERE lexeme = ANY(${rare}::text[])
          GROUP BY ledger_id ORDER BY count(*) DESC, max(created_at) DESC LIMIT ${wanted}`
      } else {
        // every term is common: the newest decisions that have any of them (each term's postings read newest first)
        strategy = "recent"
        ids = yield* sql<{ ledger_id: string }>`
          SELECT x.ledger_id::text AS ledger_id FROM unnest(${frequencies.slice(0, MAX_QUERY_TERMS).map((t) => t.lexeme)}::text[]) AS t(lexeme)
          CROSS JOIN LATERAL (SELECT p.ledger_id, p.created_at FROM search_postings p WHERE p.lexeme = t.lexeme
            ORDER BY p.created_at DESC LIMIT ${wanted}) x
          GROUP BY x.ledger_id ORDER BY max(x.created_at) DESC LIMIT ${wanted}`
      }
      // one primary-key probe per id (see the builder's store): `s.ledger_id = ANY(ids)` next to the tenant policy was
      // ANDed with a bitmap of the whole workspace's rows (50–90 ms at 400k decisions, against 2 ms)
      candidates = ids.length === 0 ? [] : yield* sql<CandidateRow>`
        SELECT x.* FROM unnest(${ids.map((row) => row.ledger_id)}::uuid[]) AS c(id)
        CROSS JOIN LATERAL (SELECT ${sql.literal(CANDIDATE_COLUMNS)} FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
          WHERE s.ledger_id = c.id AND ${conditions} LIMIT 1) x`
    }
    return { strategy, data: rank(query, candidates) }
  })
