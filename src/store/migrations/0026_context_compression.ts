import { lz4OnEveryPartition, run } from "./sql.ts"

/**
 * A decision's `raw_context` (the earlier turns of a Responses chain the gateway kept itself, migration 0013) compresses
 * with lz4 like the other raw texts (migration 0002); it was left to the server's default, pglz. A chain's context
 * grows with every turn: a 250 KB one cost PostgreSQL 5.3 ms to store with pglz and 2.9 ms with lz4, at the same size
 * (bench/notes/builder.md, "The index of answers' ids without chat completions"). Existing values stay as they are.
 */
export const contextCompression = run([
  `DO $$
  DECLARE part regclass;
  BEGIN
    ${lz4OnEveryPartition("raw_context")}
  END $$`
])
