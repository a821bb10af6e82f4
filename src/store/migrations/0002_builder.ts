import { run } from "./sql.ts"

/**
 * Decision builder (src/builder): what reconstruction adds to a decision (its subjects, and the capture fields
 * `ledger rebuild` needs to re-derive it), the agent token rollup, and the pipeline's throughput record.
 */
export const builder = run([
  // subjects the decision is about (extractSubjects): the analytics graph and features are built on them
  `ALTER TABLE decisions ADD COLUMN subjects jsonb NOT NULL DEFAULT '[]'::jsonb`,
  // capture fields the derivation reads that no other column keeps
  `ALTER TABLE decisions ADD COLUMN aborted boolean NOT NULL DEFAULT false`,
  `ALTER TABLE decisions ADD COLUMN upstream_ms integer`,
  `ALTER TABLE agents ADD COLUMN total_tokens bigint NOT NULL DEFAULT 0`,
  // a late capture that falls between two sessions merges them: the builder folds one into the other
  `GRANT DELETE ON sessions TO ledger_builder`,
  // decisions built per second and builder (no tenant data: counts only), for `ledger status`; kept for an hour
  `CREATE TABLE pipeline_throughput (
    second timestamptz NOT NULL,
    consumer text NOT NULL,
    decisions integer NOT NULL,
    PRIMARY KEY (second, consumer)
  )`,
  `GRANT SELECT, INSERT, UPDATE, DELETE ON pipeline_throughput TO ledger_builder`,
  `GRANT SELECT ON pipeline_throughput TO ledger_control`,
  // lz4 compresses the large columns several times faster than the default pglz, a sizeable share of an insert's
  // cost; a server built without lz4 (PGlite) keeps pglz
  ...["raw_request", "raw_response", "derivation", "subjects"].map((column) =>
    `DO $$ BEGIN ALTER TABLE decisions ALTER COLUMN ${column} SET COMPRESSION lz4; EXCEPTION WHEN feature_not_supported THEN NULL; END $$`
  )
])
