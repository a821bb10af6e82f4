import { run } from "./sql.ts"

/**
 * Analytics at the edges:
 * - the lexical index's text search configuration, `ledger_english`: English stems like `english`, but no word is a
 *   stopword, so a phrase is matched with every word it has ("each until", "their transport");
 * - a search row carries its decision's routed model (`provider/model`), so a detector pass reads its new decisions
 *   from `decision_search` alone;
 * - the background embedder keeps its own cursor (the search row it has embedded up to, and for which model), so
 *   ingest and lexical search never wait for an embeddings model.
 */
export const analyticsEdges = run([
  `CREATE TEXT SEARCH DICTIONARY ledger_english_stem (TEMPLATE = snowball, Language = english)`,
  `CREATE TEXT SEARCH CONFIGURATION ledger_english (COPY = english)`,
  `ALTER TEXT SEARCH CONFIGURATION ledger_english ALTER MAPPING REPLACE english_stem WITH ledger_english_stem`,
  `ALTER TABLE decision_search ADD COLUMN model text`,
  `UPDATE decision_search s SET model = d.provider || '/' || d.model FROM decisions d WHERE d.ledger_id = s.ledger_id`,
  `ALTER TABLE analytics_progress ADD COLUMN embedded_seq bigint NOT NULL DEFAULT 0, ADD COLUMN embedded_model text`
])
