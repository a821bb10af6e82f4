/**
 * Search rows of fresh decisions: their lexical documents and local vectors, the postings (a block per lexeme and
 * batch) and the per-workspace term counts. Model embeddings are added later, in the background (`Embedder.ts`).
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"
import { ints, reals, texts, times, uuids, zipped } from "../../store/arrays.ts"
import { newestFirst } from "../postings.ts"
import { VECTOR_DIMENSIONS } from "../text.ts"

/** The lexical index's text search configuration: English stems, no stopwords (migration 0015). */
export const LEXICAL_CONFIG = "ledger_english"

/**
 * Lexemes of PostgreSQL's English stopwords under LEXICAL_CONFIG. Documents hold them (a phrase is matched with every
 * word), but they get no postings: each is in nearly every decision, and their postings were a third of the
 * materialiser's writes. A query of nothing else is looked for among the newest decisions instead.
 */
export const UNPOSTED_LEXEMES: ReadonlySet<string> = new Set(
  ("a about abov after again against all am an and ani are as at be becaus been befor below between both but by can did " +
    "do doe don down dure each few for from further had has have he her here herself him himself his how i if in into is " +
    "it itself just me more most my myself no nor not now of off on onc onli or other our ourselv out over own s same she " +
    "should so some such t than that the their them themselv then there these they this those through to too under until " +
    "up veri was we were what when where whi which while who whom will with you your yourself yourselv").split(" ")
)

/** A batch's postings in runs: each lexeme's decisions newest first, one after another in `ids` and `ats`. */
interface PostingRuns {
  readonly lexemes: Array<string>
  readonly firsts: Array<number>
  readonly lasts: Array<number>
  readonly ids: Array<string>
  readonly ats: Array<number>
}

/**
 * The batch's postings, grouped here rather than by PostgreSQL: three ordered aggregates per lexeme cost the server
 * more than the rest of the postings' work (each sorts on its own), and a sorted input to plain aggregates is an order
 * the planner does not promise to keep.
 */
const postingRuns = (fresh: ReadonlyArray<{ readonly ledger_id: string; readonly us: number; readonly lexemes: ReadonlyArray<string> }>) => {
  const ordered = [...fresh].sort(newestFirst)
  const byLexeme = new Map<string, Array<number>>()
  ordered.forEach((row, at) => {
    for (const lexeme of row.lexemes) {
      if (UNPOSTED_LEXEMES.has(lexeme)) continue
      const holders = byLexeme.get(lexeme)
      if (holders === undefined) byLexeme.set(lexeme, [at])
      else holders.push(at)
    }
  })
  const runs: PostingRuns = { lexemes: [], firsts: [], lasts: [], ids: [], ats: [] }
  for (const [lexeme, holders] of byLexeme) {
    runs.lexemes.push(lexeme)
    runs.firsts.push(runs.ids.length + 1)
    for (const at of holders) {
      runs.ids.push(ordered[at]!.ledger_id)
      runs.ats.push(ordered[at]!.us / 1_000)
    }
    runs.lasts.push(runs.ids.length)
  }
  return runs
}

/** Inserts the search rows; yields the decisions that were not materialised before (the batch's real work). */
export const insertSearchRows = Effect.fnUntraced(function*(
  scope: WorkspaceScope,
  analyses: ReadonlyArray<DecisionAnalysis>
) {
  const sql = yield* ScopedSql
  const { tenant_id, workspace_id } = scope
  // binary arrays, the vectors end to end in one: as JSON or array text, parsing them was a fifth of the statement
  const vectors = new Array<number>(analyses.length * VECTOR_DIMENSIONS)
  analyses.forEach((a, i) => {
    for (let d = 0; d < VECTOR_DIMENSIONS; d++) vectors[i * VECTOR_DIMENSIONS + d] = a.vector[d]!
  })
  // a decision's postings are written only with its new search row, so they cannot be there already
  const inserted = yield* sql<{ ledger_id: string; lexemes: ReadonlyArray<string> }>`
    INSERT INTO decision_search (ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, document,
      local_vector, model, call_signature)
    SELECT t.ledger_id, ${tenant_id}::uuid, ${workspace_id}::uuid, t.session_id, t.agent_id, t.created_at,
      to_tsvector(${LEXICAL_CONFIG}::regconfig, t.lexical_text),
      ${reals(vectors)}[(t.n::int - 1) * ${VECTOR_DIMENSIONS} + 1 : t.n::int * ${VECTOR_DIMENSIONS}], t.model, t.call_signature
    FROM ${zipped(sql, {
      ledger_id: uuids(analyses.map((a) => a.decision.ledger_id)),
      session_id: uuids(analyses.map((a) => a.decision.session_id)),
      agent_id: texts(analyses.map((a) => a.decision.agent_id)),
      created_at: times(analyses.map((a) => a.decision.created_at.getTime())),
      lexical_text: texts(analyses.map((a) => a.lexicalText)),
      model: texts(analyses.map((a) => `${a.decision.provider}/${a.decision.model}`)),
      call_signature: texts(analyses.map((a) => a.signature)),
      n: ints(analyses.map((_, i) => i + 1))
    })} AS t
    ON CONFLICT (ledger_id) DO NOTHING
    RETURNING ledger_id::text AS ledger_id, tsvector_to_array(document) AS lexemes`
  if (inserted.length === 0) return []
  const fresh = new Map(inserted.map((row) => [row.ledger_id, row.lexemes]))
  const written = analyses.filter((a) => fresh.has(a.decision.ledger_id))
  const runs = postingRuns(written.map((a) => ({
    ledger_id: a.decision.ledger_id,
    us: a.decision.created_at.getTime() * 1_000,
    lexemes: fresh.get(a.decision.ledger_id)!
  })))
  if (runs.lexemes.length > 0) {
    yield* sql`
      WITH blocks AS (
        INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, r.lexeme, ats[r.first], ats[r.last], ids[r.first],
          ids[r.first : r.last], ats[r.first : r.last]
        FROM (SELECT ${uuids(runs.ids)}::uuid[] AS ids, ${times(runs.ats)}::timestamptz[] AS ats) AS batch,
          ${zipped(sql, { lexeme: texts(runs.lexemes), first: ints(runs.firsts), last: ints(runs.lasts) })} AS r
        RETURNING lexeme, cardinality(ledger_ids) AS doc_count
      )
      INSERT INTO search_terms (tenant_id, workspace_id, lexeme, doc_count)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, lexeme, doc_count FROM blocks
      ON CONFLICT (tenant_id, workspace_id, lexeme) DO UPDATE SET doc_count = search_terms.doc_count + EXCLUDED.doc_count`
  }
  return written
})
