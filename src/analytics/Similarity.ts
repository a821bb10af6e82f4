/**
 * Similar decisions (docs/ARCHITECTURE.md, "Analytics"): what is literally there first, then by meaning.
 *
 * Candidates come from three places:
 * - by words (a text query): the decisions holding every word of the query (the rarest term's postings,
 *   `search_posting_blocks`, whose documents hold the others), newest first — so a decision holding the query is always
 *   a candidate;
 * - by meaning: pgvector's nearest neighbours when the extension and its HNSW indexes exist, otherwise the decisions
 *   sharing the query's rarest terms (`search_terms` document frequencies), or, when every term is common, the newest
 *   decisions having any of them;
 * - decisions built after the materialiser's cursor (the newest UNANALYSED of them): their text is read from the
 *   decision itself, so a decision is found by its words the moment it is visible.
 *
 * Scores are calibrated in tiers (SimilarDecision.score in schema.ts):
 * - 0.95–1: the decision holds the query's text as written (a query of several words; case and spacing aside);
 *   0.95 + 0.05 × similarity;
 * - 0.9–0.95: it holds the query as a phrase — every word of it in order, as the lexical index matches them
 *   (lowercase, English stems: "providers depend" for "provider depends"); 0.9 + 0.05 × similarity;
 * - 0.5–0.89: it holds every word of the query, not in that order; 0.5 + 0.39 × similarity;
 * - below: by meaning alone, the similarity (at most 0.89): the cosine of the two vectors (model embeddings when
 *   both have them for the configured model, the local hashed vectors otherwise), in [0,1].
 * A search by `ledger_id` scores by similarity alone (there is no phrase to hold).
 */
import { Effect, Option } from "effect"
import type { DecisionFilters } from "../query/LedgerQuery.ts"
import { type SummaryRow, toSummary } from "../query/rows.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { currentSessionId } from "../store/sessionAliases.ts"
import { analyseDecision, type BuiltDecision } from "./analyse.ts"
import { BUILT_COLUMNS } from "./materialize/cursor.ts"
import { LEXICAL_CONFIG, UNPOSTED_LEXEMES } from "./materialize/search.ts"
import { ENTRIES, newestFirst, newestHolding, type Posting } from "./postings.ts"
import type { SimilarDecision, SimilarMatch, SimilarResult } from "./schema.ts"
import { localVector, similarity } from "./text.ts"

/** Candidates scored per query; more when filters will drop some. */
const CANDIDATES = 300
const FILTERED_CANDIDATES = 3_000
/** Rare terms are used while their document frequencies add up to at most this. */
const TERM_BUDGET = 2_000
const MAX_QUERY_TERMS = 12
/** A text of more terms than this is not looked for word for word (a pasted page): only by meaning. */
const MAX_LEXICAL_TERMS = 64
/** Decisions holding every word of the query looked at, newest first. */
const LEXICAL_CANDIDATES = 1_000
/**
 * Decisions looked through for the query's words, newest first, when postings cannot be used: a restricted member's
 * own, or anyone's for a query of stopwords only.
 */
const SCAN_WITHOUT_POSTINGS = 20_000
/** Decisions built but not analysed yet that are looked through, newest first. */
const UNANALYSED = 500
/** Tier bounds of the score (see the header). */
const EXACT_FLOOR = 0.95
const PHRASE_FLOOR = 0.9
const ALL_TERMS_FLOOR = 0.5
const MEANING_CAP = 0.89

export interface SimilarQuery {
  /** the query's text (a text search); undefined for a search by `ledger_id` */
  readonly text: string | undefined
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

/** A candidate's key and time (`created_at` as Postgres wrote it): it is probed by both. */
interface Candidate {
  readonly ledger_id: string
  readonly at: string
}

interface CandidateRow extends SummaryRow {
  readonly local_vector: Array<number>
  readonly embedding: Array<number> | null
  readonly embedding_model: string | null
  readonly lexemes: Array<string>
  readonly phrase: boolean
  readonly all_terms: boolean
}

const CANDIDATE_COLUMNS = `d.ledger_id::text AS ledger_id, d.session_id::text AS session_id, d.agent_id, d.execution_id,
  d.created_at, d.provider, d.model, d.title, d.intent, d.outcome, d.cost_usd, d.quality, d.confidence, d.latency_ms,
  d.status, d.usage, s.local_vector, s.embedding, s.embedding_model, tsvector_to_array(s.document) AS lexemes`

/** The lexemes of a text, as the documents were indexed. */
export const lexemesOf = Effect.fnUntraced(function*(text: string) {
  const sql = yield* ScopedSql
  const rows = yield* sql<{ lexeme: string }>`SELECT lexeme FROM unnest(to_tsvector('english', ${text}))`
  return rows.map((row) => row.lexeme)
})

/** What a stored decision is searched by: its lexemes and vectors; undefined when it is unknown or not analysed yet. */
export const representationOf = Effect.fnUntraced(function*(ledgerId: string) {
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

/**
 * Document frequencies of terms in the workspace, rarest first (terms no decision has are absent). Probed term by
 * term: `lexeme = ANY(…)` next to the tenant policy was a filter over the workspace's whole index.
 */
const termCounts = Effect.fnUntraced(function*(terms: ReadonlyArray<string>) {
  const sql = yield* ScopedSql
  return yield* sql<{ lexeme: string; n: number }>`
    SELECT x.lexeme, x.n FROM unnest(${[...new Set(terms)]}::text[]) AS t(lexeme)
    CROSS JOIN LATERAL (SELECT lexeme, doc_count::float8 AS n FROM search_terms s WHERE s.lexeme = t.lexeme LIMIT 1) x
    ORDER BY x.n, x.lexeme`
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

/** The calibrated score of a text search (see the header); a search by id scores by similarity alone. */
export const scoreOf = (match: SimilarMatch, similarityScore: number, byText: boolean): number =>
  !byText
    ? similarityScore
    : match === "exact"
    ? round4(EXACT_FLOOR + (1 - EXACT_FLOOR) * similarityScore)
    : match === "phrase"
    ? round4(PHRASE_FLOOR + (EXACT_FLOOR - PHRASE_FLOOR) * similarityScore)
    : match === "all_terms"
    ? round4(ALL_TERMS_FLOOR + (MEANING_CAP - ALL_TERMS_FLOOR) * similarityScore)
    : Math.min(similarityScore, MEANING_CAP)

const round4 = (value: number) => Math.round(value * 1e4) / 1e4

interface Scored {
  readonly summary: SummaryRow
  readonly similarity: number
  readonly match: SimilarMatch
  readonly lexemes: ReadonlyArray<string>
}

/** Scores candidates, best first. */
const rank = (query: SimilarQuery, candidates: ReadonlyArray<Scored>): Array<SimilarDecision> => {
  const queryTerms = new Set(query.lexemes)
  const byText = query.text !== undefined
  return candidates
    .map((c): SimilarDecision => ({
      ...toSummary(c.summary),
      score: scoreOf(c.match, c.similarity, byText),
      similarity: c.similarity,
      match: byText ? c.match : "meaning",
      shared_terms: c.lexemes.filter((lexeme) => queryTerms.has(lexeme)).sort()
    }))
    .filter((result) => result.score >= query.minScore)
    .sort((a, b) => b.score - a.score || b.created_at.localeCompare(a.created_at) || a.ledger_id.localeCompare(b.ledger_id))
    .slice(0, query.limit)
}

const similarityOf = (query: SimilarQuery, row: CandidateRow) => {
  const model = Option.getOrUndefined(query.embedding)
  return model !== undefined && row.embedding !== null && row.embedding_model === model.model
    ? similarity(model.vector, row.embedding)
    : similarity(query.localVector, row.local_vector)
}

const matchOf = (row: { readonly phrase: boolean; readonly all_terms: boolean }, exact: boolean): SimilarMatch =>
  row.phrase ? (exact ? "exact" : "phrase") : row.all_terms ? "all_terms" : "meaning"

/** The query's text as written, for a literal match: lowercase, spaces collapsed; only a query of several words. */
const literalOf = (text: string | undefined) => {
  const literal = text?.trim().replace(/\s+/g, " ").toLowerCase() ?? ""
  return literal.includes(" ") ? literal : undefined
}

/** Of the decisions holding the phrase, those holding the query's text as written (their title, request or answer). */
const literalMatches = Effect.fnUntraced(function*(literal: string | undefined, rows: ReadonlyArray<{ readonly ledger_id: string; readonly created_at: Date }>) {
  if (literal === undefined || rows.length === 0) return new Set<string>()
  const sql = yield* ScopedSql
  const held = yield* sql<{ ledger_id: string }>`
    SELECT x.ledger_id FROM unnest(${rows.map((r) => r.ledger_id)}::uuid[], ${rows.map((r) => r.created_at.toISOString())}::timestamptz[]) AS c(id, at)
    CROSS JOIN LATERAL (SELECT d.ledger_id::text AS ledger_id FROM decisions d WHERE d.ledger_id = c.id AND d.created_at = c.at
      AND strpos(regexp_replace(lower(d.title || ' ' || d.raw_request || ' ' || coalesce(d.raw_response, '')), '\\s+', ' ', 'g'), ${literal}) > 0
      LIMIT 1) x`
  return new Set(held.map((row) => row.ledger_id))
})

/**
 * Decisions holding every word of the query, newest first: the rarest term's postings, each probed for the other
 * terms by key (stopwords have no postings: the documents found are matched with them in the candidates' probe). A
 * restricted member's own decisions are looked through instead (it may not read the postings), as are the newest
 * decisions for a query of stopwords only.
 */
const lexicalCandidates = Effect.fnUntraced(function*(query: SimilarQuery, wanted: number) {
  if (query.text === undefined) return []
  const sql = yield* ScopedSql
  // every word, as the lexical index holds them (stems, stopwords too)
  const terms = [...new Set((yield* sql<{ lexeme: string }>`
    SELECT lexeme FROM unnest(to_tsvector(${LEXICAL_CONFIG}::regconfig, ${query.text}))`).map((row) => row.lexeme))]
  if (terms.length === 0 || terms.length > MAX_LEXICAL_TERMS) return []
  const posted = terms.filter((term) => !UNPOSTED_LEXEMES.has(term))
  if (query.restricted) {
    // its own decisions, newest first (by the decisions' index: the search rows' policy probes each one)
    return yield* sql<Candidate>`
      SELECT d.ledger_id::text AS ledger_id, d.created_at::text AS at
      FROM (SELECT d.ledger_id, d.created_at FROM decisions d ORDER BY d.created_at DESC LIMIT ${SCAN_WITHOUT_POSTINGS}) d
      CROSS JOIN LATERAL (SELECT 1 FROM decision_search s WHERE s.ledger_id = d.ledger_id AND s.created_at = d.created_at
        AND s.document @@ plainto_tsquery(${LEXICAL_CONFIG}::regconfig, ${query.text}) LIMIT 1) m
      LIMIT ${wanted}`
  }
  if (posted.length === 0) {
    // stopwords only: the newest documents, matched one by one
    return yield* sql<Candidate>`
      SELECT s.ledger_id::text AS ledger_id, s.created_at::text AS at
      FROM (SELECT ledger_id, created_at, document FROM decision_search ORDER BY created_at DESC LIMIT ${SCAN_WITHOUT_POSTINGS}) s
      WHERE s.document @@ plainto_tsquery(${LEXICAL_CONFIG}::regconfig, ${query.text}) LIMIT ${wanted}`
  }
  const counts = yield* termCounts(posted)
  // a term no decision has: no decision holds them all
  if (counts.length < posted.length) return []
  const [rarest, ...others] = counts.map((row) => row.lexeme)
  return yield* newestHolding(rarest!, others, wanted)
})

/** Candidates by meaning (see the header); the strategy that found them. */
const meaningCandidates = Effect.fnUntraced(function*(query: SimilarQuery, conditions: ReturnType<ScopedSql["Service"]["and"]>, wanted: number) {
  const sql = yield* ScopedSql
  if (query.pgvector) {
    const byEmbedding = Option.isSome(query.embedding)
    const column = sql.literal(byEmbedding ? "s.embedding::vector(256)" : "s.local_vector::vector(256)")
    const vector = vectorLiteral(byEmbedding ? Option.getOrThrow(query.embedding).vector : query.localVector)
    // filtered nearest neighbours: keep scanning the index until enough rows pass the filters
    yield* sql`SELECT set_config('hnsw.ef_search', '400', true), set_config('hnsw.iterative_scan', 'relaxed_order', true)`
    const rows = yield* sql<Candidate>`
      SELECT d.ledger_id::text AS ledger_id, d.created_at::text AS at FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
      WHERE ${conditions} ${byEmbedding ? sql`AND s.embedding_model = ${Option.getOrThrow(query.embedding).model}` : sql``}
      ORDER BY ${column} <=> ${vector}::vector(256) LIMIT ${CANDIDATES}`
    return { strategy: "pgvector" as const, ids: rows }
  }
  if (query.lexemes.length === 0) return { strategy: "full_text" as const, ids: [] as Array<Candidate> }
  if (query.restricted) {
    const rows = yield* sql<Candidate>`
      SELECT d.ledger_id::text AS ledger_id, d.created_at::text AS at FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id
      WHERE ${conditions} ORDER BY s.created_at DESC LIMIT ${FILTERED_CANDIDATES}`
    return { strategy: "recent" as const, ids: rows }
  }
  const frequencies = yield* termCounts(query.lexemes)
  if (frequencies.length === 0) return { strategy: "full_text" as const, ids: [] as Array<Candidate> }
  const rare: Array<string> = []
  let budget = 0
  for (const term of frequencies) {
    if (rare.length >= MAX_QUERY_TERMS || (rare.length > 0 && budget + term.n > TERM_BUDGET)) break
    rare.push(term.lexeme)
    budget += term.n
  }
  if (budget <= TERM_BUDGET) {
    const rows = yield* sql<Candidate>`
      SELECT p.ledger_id::text AS ledger_id, max(p.created_at)::text AS at FROM unnest(${rare}::text[]) AS t(lexeme)
      -- LIMIT keeps the probe per term (flattened, a planner without statistics scanned every posting of the workspace)
      CROSS JOIN LATERAL (SELECT u.ledger_id, u.created_at FROM search_posting_blocks b, ${sql.literal(ENTRIES)}
        WHERE b.lexeme = t.lexeme LIMIT ${TERM_BUDGET}) p
      GROUP BY p.ledger_id ORDER BY count(*) DESC, max(p.created_at) DESC LIMIT ${wanted}`
    return { strategy: "full_text" as const, ids: rows }
  }
  // every term is common: the newest decisions that have any of them (each term's newest postings)
  const newest = new Map<string, Posting>()
  for (const term of frequencies.slice(0, MAX_QUERY_TERMS)) {
    for (const posting of yield* newestHolding(term.lexeme, [], wanted)) newest.set(posting.ledger_id, posting)
  }
  const rows: Array<Candidate> = [...newest.values()].sort(newestFirst).slice(0, wanted)
  return { strategy: "recent" as const, ids: rows }
})

/** Words of the query as they are written (any letters or digits): each must appear in a decision that holds it. */
const writtenWords = (text: string) => [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
const likePattern = (word: string) => `%${word.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/**
 * The newest decisions built but not analysed yet that hold the query: their text read from the decision itself
 * (the words as written first, then the phrase as the index would match it), scored against local vectors.
 */
const unanalysedMatches = Effect.fnUntraced(function*(query: SimilarQuery, conditions: ReturnType<ScopedSql["Service"]["and"]>) {
  if (query.text === undefined) return []
  const words = writtenWords(query.text)
  if (words.length === 0 || words.length > MAX_LEXICAL_TERMS) return []
  const sql = yield* ScopedSql
  // what the materialiser has read up to (a restricted member cannot see it: the newest of its own decisions)
  const [cursor] = yield* sql<{ at: string; id: string }>`
    SELECT built_cursor::text AS at, built_cursor_id::text AS id FROM analytics_progress WHERE built_cursor IS NOT NULL`
  const rows = yield* sql<BuiltDecision & SummaryRow>`
    SELECT ${sql.literal(BUILT_COLUMNS)}, d.confidence, d.usage FROM (
      SELECT d.ledger_id FROM decisions d
      WHERE (d.built_at, d.ledger_id) > (${cursor?.at ?? "-infinity"}::timestamptz, ${cursor?.id ?? "00000000-0000-0000-0000-000000000000"}::uuid)
      ORDER BY d.built_at DESC, d.ledger_id DESC LIMIT ${UNANALYSED}) n
    CROSS JOIN LATERAL (SELECT d.* FROM decisions d WHERE d.ledger_id = n.ledger_id LIMIT 1) d
    LEFT JOIN LATERAL (SELECT true AS done FROM decision_search s WHERE s.ledger_id = d.ledger_id LIMIT 1) s ON true
    WHERE s.done IS NULL AND ${conditions}
      AND (d.title || ' ' || d.raw_request || ' ' || coalesce(d.raw_response, '')) ILIKE ALL (${words.map(likePattern)}::text[])`
  if (rows.length === 0) return []
  const analyses = rows.map(analyseDecision)
  const flags = yield* sql<{ i: number; phrase: boolean; all_terms: boolean }>`
    SELECT t.i::int AS i, to_tsvector(${LEXICAL_CONFIG}::regconfig, t.text) @@ phraseto_tsquery(${LEXICAL_CONFIG}::regconfig, ${query.text}) AS phrase,
      to_tsvector(${LEXICAL_CONFIG}::regconfig, t.text) @@ plainto_tsquery(${LEXICAL_CONFIG}::regconfig, ${query.text}) AS all_terms
    FROM unnest(${analyses.map((a) => a.lexicalText)}::text[]) WITH ORDINALITY AS t(text, i)`
  const literal = literalOf(query.text)
  return flags.flatMap((flag): Array<Scored> => {
    const analysis = analyses[flag.i - 1]!
    const exact = literal !== undefined && analysis.lexicalText.replace(/\s+/g, " ").toLowerCase().includes(literal)
    return flag.all_terms
      ? [{
        summary: rows[flag.i - 1]!,
        similarity: similarity(query.localVector, localVector(analysis.searchText)),
        match: matchOf(flag, exact),
        lexemes: []
      }]
      : []
  })
})

export const searchSimilar = Effect.fnUntraced(function*(query: SimilarQuery) {
  const sql = yield* ScopedSql
  const conditions = sql.and([
    ...filterConditions(sql, query.filters),
    query.excludeLedgerId === undefined ? sql`TRUE` : sql`d.ledger_id <> ${query.excludeLedgerId}::uuid`
  ])
  // filters drop candidates after they are found: look further when there are some
  const wanted = isFiltered(query.filters) ? FILTERED_CANDIDATES : CANDIDATES
  const lexical = yield* lexicalCandidates(query, isFiltered(query.filters) ? FILTERED_CANDIDATES : LEXICAL_CANDIDATES)
  const { ids: byMeaning, strategy } = yield* meaningCandidates(query, conditions, wanted)
  const ids = [...new Map([...lexical, ...byMeaning].map((c) => [c.ledger_id, c])).values()]
  // one probe per id, by key and time (see the builder's store): `s.ledger_id = ANY(ids)` next to the tenant policy
  // was ANDed with a bitmap of the whole workspace's rows (50–90 ms at 400k decisions, against 2 ms); without the
  // time, a planner without statistics walked the workspace's search rows by time for each id

  const text = query.text ?? ""
  const candidates = ids.length === 0 ? [] : yield* sql<CandidateRow>`
    SELECT x.* FROM unnest(${ids.map((c) => c.ledger_id)}::uuid[], ${ids.map((c) => c.at)}::timestamptz[]) AS c(id, at)
    CROSS JOIN LATERAL (SELECT ${sql.literal(CANDIDATE_COLUMNS)},
        ${text} <> '' AND s.document @@ phraseto_tsquery(${LEXICAL_CONFIG}::regconfig, ${text}) AS phrase,
        ${text} <> '' AND s.document @@ plainto_tsquery(${LEXICAL_CONFIG}::regconfig, ${text}) AS all_terms
      FROM decision_search s JOIN decisions d ON d.ledger_id = s.ledger_id AND d.created_at = s.created_at
      WHERE s.ledger_id = c.id AND s.created_at = c.at AND ${conditions} LIMIT 1) x`
  const exact = yield* literalMatches(literalOf(query.text), candidates.filter((row) => row.phrase))
  const scored: Array<Scored> = candidates.map((row) => ({
    summary: row,
    similarity: similarityOf(query, row),
    match: matchOf(row, exact.has(row.ledger_id)),
    lexemes: row.lexemes
  }))
  const unanalysed = yield* unanalysedMatches(query, conditions)
  return { strategy: strategy satisfies SimilarResult["candidates"], data: rank(query, [...scored, ...unanalysed]) }
})
