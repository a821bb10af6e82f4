import { run } from "./sql.ts"

/**
 * A decision's `raw_context` (the earlier turns of a Responses chain the gateway kept itself, migration 0013) compresses
 * with lz4 like the other raw texts (migration 0002); it was left to the server's default, pglz. A chain's context
 * grows with every turn: a 250 KB one cost PostgreSQL 5.3 ms to store with pglz and 2.9 ms with lz4, at the same size
 * (bench/RESULTS.md, "The index of answers' ids without chat completions"). Set on every partition as well as on the
 * partitioned table, which partitions made later copy; existing values stay as they are. A server built without lz4
 * (PGlite) keeps pglz.
 */
export const contextCompression = run([
  `DO $$
  DECLARE part regclass;
  BEGIN
    FOR part IN SELECT relid FROM pg_partition_tree('decisions') LOOP
      BEGIN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN raw_context SET COMPRESSION lz4', part);
      EXCEPTION WHEN feature_not_supported THEN NULL;
      END;
    END LOOP;
  END $$`
])
