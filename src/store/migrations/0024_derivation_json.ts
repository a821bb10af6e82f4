import { lz4OnEveryPartition, run } from "./sql.ts"

/**
 * A decision's derivation is stored as `json` (its text, checked as JSON) rather than `jsonb`. The builder writes it
 * whole and readers take it whole or pick a few keys from it; no index or filter looks inside it. Converting ~1–2 KB
 * of text into jsonb's binary form cost PostgreSQL 6–8 µs a decision more than `json`'s check, a sixth of its CPU for
 * each short decision inserted (bench/notes/builder.md, "The derivation as json"), and reading it whole now sends the text
 * as stored instead of printing jsonb back to text.
 *
 * Changing the type rewrites every partition of the table and its indexes under an exclusive lock (~2 s for 60,000
 * decisions on the benchmarks' machine): on a large ledger, run `ledger migrate` in a maintenance window. A new type
 * forgets the column's compression, and setting it on the partitioned table does not reach its partitions: the
 * rewrite compresses with lz4 as the default, then each partition gets it back (migration 0002; PGlite has only pglz).
 */
export const derivationJson = run([
  `DO $$
  DECLARE part regclass;
  BEGIN
    BEGIN
      SET LOCAL default_toast_compression = 'lz4';
    EXCEPTION WHEN invalid_parameter_value THEN NULL;
    END;
    ALTER TABLE decisions ALTER COLUMN derivation TYPE json USING derivation::json;
    ${lz4OnEveryPartition("derivation")}
  END $$`
])
