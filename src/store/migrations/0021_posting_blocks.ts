import { indexableTenantScope, notRestricted, run } from "./sql.ts"

/** Entries per block when existing postings are regrouped (a materialiser batch makes blocks of at most its size). */
const REGROUPED_BLOCK = 200

/**
 * The lexical index's postings in blocks: a row per lexeme and materialiser batch, holding that batch's decisions
 * with the lexeme, instead of a row per lexeme and decision. The decisions of a batch share most of their lexemes, so
 * there are about a twelfth as many rows; writing a row per posting was a fifth of PostgreSQL's work per decision in
 * the materialiser, and the table was larger than the search rows themselves (bench/notes/analytics.md,
 * "Postings in blocks"). Existing postings are regrouped, newest first, into blocks of REGROUPED_BLOCK per lexeme.
 *
 * A block's entries are newest first; `newest` and `oldest` bound their times, and `head` (its newest decision) tells
 * apart blocks of one lexeme that end at the same moment. A decision is in at most one block per lexeme.
 */
export const postingBlocks = run([
  `CREATE TABLE search_posting_blocks (
    tenant_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    lexeme text NOT NULL,
    newest timestamptz NOT NULL,
    oldest timestamptz NOT NULL,
    head uuid NOT NULL,
    ledger_ids uuid[] NOT NULL,
    created_ats timestamptz[] NOT NULL,
    PRIMARY KEY (tenant_id, workspace_id, lexeme, newest, head)
  )`,
  // the owner reads the old table whole (its rows are otherwise visible to the runtime roles only); it goes next
  `ALTER TABLE search_postings NO FORCE ROW LEVEL SECURITY`,
  `INSERT INTO search_posting_blocks (tenant_id, workspace_id, lexeme, newest, oldest, head, ledger_ids, created_ats)
    SELECT tenant_id, workspace_id, lexeme, max(created_at), min(created_at),
      (array_agg(ledger_id ORDER BY created_at DESC, ledger_id DESC))[1],
      array_agg(ledger_id ORDER BY created_at DESC, ledger_id DESC), array_agg(created_at ORDER BY created_at DESC, ledger_id DESC)
    FROM (
      SELECT p.*, (row_number() OVER (PARTITION BY tenant_id, workspace_id, lexeme ORDER BY created_at DESC, ledger_id DESC) - 1)
        / ${REGROUPED_BLOCK} AS block
      FROM search_postings p
    ) p
    GROUP BY tenant_id, workspace_id, lexeme, block`,
  `DROP TABLE search_postings`,
  // isolated like every analytics table (migration 0005): a restricted member reads none of it
  `ALTER TABLE search_posting_blocks ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE search_posting_blocks FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY search_posting_blocks_tenant ON search_posting_blocks TO ledger_reader, ledger_builder
    USING (${indexableTenantScope}) WITH CHECK (${indexableTenantScope})`,
  `CREATE POLICY search_posting_blocks_restricted ON search_posting_blocks AS RESTRICTIVE TO ledger_reader USING (${notRestricted})`,
  `GRANT SELECT ON search_posting_blocks TO ledger_reader`,
  `GRANT SELECT, INSERT, UPDATE, DELETE ON search_posting_blocks TO ledger_builder`
])
