/** The postings as rows (tenant_id, workspace_id, lexeme, ledger_id, created_at), for tests that count or compare them. */
export const POSTING_ROWS = `(SELECT b.tenant_id, b.workspace_id, b.lexeme, u.ledger_id, u.created_at
  FROM search_posting_blocks b, unnest(b.ledger_ids, b.created_ats) AS u(ledger_id, created_at))`
