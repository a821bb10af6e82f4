/**
 * Search rows of fresh decisions: their lexical documents and local vectors, the postings (a block per lexeme and
 * batch) and the per-workspace term counts. Model embeddings are added later, in the background (`Embedder.ts`).
 */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

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

/** Inserts the search rows; yields the decisions that were not materialised before (the batch's real work). */
export const insertSearchRows = (
  scope: WorkspaceScope,
  analyses: ReadonlyArray<DecisionAnalysis>
) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const records = analyses.map((a) => ({
      ledger_id: a.decision.ledger_id,
      session_id: a.decision.session_id,
      agent_id: a.decision.agent_id,
      created_at: a.decision.created_at.toISOString(),
      lexical_text: a.lexicalText,
      // an array literal: as JSON numbers, PostgreSQL parsed every element as numeric when binding the parameter
      local_vector: `{${a.vector.join(",")}}`,
      model: `${a.decision.provider}/${a.decision.model}`,
      call_signature: a.signature
    }))
    // one JSON parameter: no parameter limit, and nullable columns need no array type inference. The postings and
    // term counts are written from what the insert returns: reading the new rows back by id let a planner without
    // statistics on a young table scan (and unnest) every document of the workspace, 1.3 s a batch. The batch's new
    // decisions make one posting block per lexeme (postings.ts); a decision's postings are written only with its new
    // search row, so they cannot be there already.
    const { tenant_id, workspace_id } = scope
    const unposted = [...UNPOSTED_LEXEMES]
    const rows = yield* sql<{ ledger_id: string }>`
      WITH fresh AS (
        INSERT INTO decision_search (ledger_id, tenant_id, workspace_id, session_id, agent_id, created_at, document,
          local_vector, model, call_signature)
        SELECT t.ledger_id, ${tenant_id}::uuid, ${workspace_id}::uuid, t.session_id, t.agent_id, t.created_at,
          to_tsvector(${LEXICAL_CONFIG}::regconfig, t.lexical_text), t.local_vector::real[], t.model, t.call_signature
        FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb) AS t(ledger_id uuid, session_id uuid, agent_id text,
          created_at timestamptz, lexical_text text, local_vector text, model text, call_signature text)
        ON CONFLICT (ledger_id) DO NOTHING
        RETURNING ledger_id, created_at, document
      ), postings AS (
        INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, u.lexeme, max(f.created_at), min(f.created_at),
          (array_agg(f.ledger_id ORDER BY f.created_at DESC, f.ledger_id DESC))[1],
          array_agg(f.ledger_id ORDER BY f.created_at DESC, f.ledger_id DESC),
          array_agg(f.created_at ORDER BY f.created_at DESC, f.ledger_id DESC)
        FROM fresh f, unnest(f.document) u
        WHERE u.lexeme <> ALL(${unposted}::text[]) GROUP BY u.lexeme
      ), terms AS (
        INSERT INTO search_terms (tenant_id, workspace_id, lexeme, doc_count)
        SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, u.lexeme, count(*) FROM fresh f, unnest(f.document) u
        WHERE u.lexeme <> ALL(${unposted}::text[]) GROUP BY u.lexeme
        ON CONFLICT (tenant_id, workspace_id, lexeme) DO UPDATE SET doc_count = search_terms.doc_count + EXCLUDED.doc_count
      )
      SELECT ledger_id::text AS ledger_id FROM fresh`
    const inserted = new Set(rows.map((row) => row.ledger_id))
    return analyses.filter((a) => inserted.has(a.decision.ledger_id))
  })
