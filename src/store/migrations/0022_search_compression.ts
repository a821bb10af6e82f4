import { run } from "./sql.ts"

/**
 * The search rows' large columns compress with lz4, as the decisions' do (migration 0002): a row past PostgreSQL's
 * TOAST threshold (a long document with its 1 KB vector) had its vector and document tried with pglz, and the search
 * rows' statement took 10 % longer for it (bench/notes/analytics.md, "Postings in blocks"). A server built without lz4
 * (PGlite) keeps pglz; rows written before keep how they were compressed.
 */
export const searchCompression = run(
  ["document", "local_vector", "embedding"].map((column) =>
    `DO $$ BEGIN ALTER TABLE decision_search ALTER COLUMN ${column} SET COMPRESSION lz4; EXCEPTION WHEN feature_not_supported THEN NULL; END $$`
  )
)
