/**
 * Typed array parameters, sent in PostgreSQL's binary format: `UNNEST` needs element types the driver cannot infer
 * from mixed or all-NULL values, and a binary array costs the server far less to read than the same values as JSON
 * or array text (docs/ARCHITECTURE.md, "Analytics").
 */
import { PgTypes } from "@effect/sql-pg"
import { Result } from "effect"
import type { Statement } from "effect/sql"

const array = (values: ReadonlyArray<unknown>, oid: number) => Result.getOrThrow(PgTypes.array(values, oid))

export const texts = (values: ReadonlyArray<string | null>) => array(values, PgTypes.OID.text)
export const uuids = (values: ReadonlyArray<string | null>) => array(values, PgTypes.OID.uuid)
export const ints = (values: ReadonlyArray<number | null>) => array(values, PgTypes.OID.int4)
/** float8 also carries the bigint rollups (exact to 2^53; assignment casts them to bigint) */
export const floats = (values: ReadonlyArray<number | null>) => array(values, PgTypes.OID.float8)
/** float4 (`real`) elements */
export const reals = (values: ReadonlyArray<number>) => array(values, PgTypes.OID.float4)
export const bools = (values: ReadonlyArray<boolean>) => array(values, PgTypes.OID.bool)
/** bytea elements, sent as they are (no hex text to print here and decode there) */
export const byteas = (values: ReadonlyArray<Uint8Array>) => array(values, PgTypes.OID.bytea)
/** timestamptz elements from epoch milliseconds */
export const times = (values: ReadonlyArray<number | null>) =>
  array(values.map((ms) => (ms === null ? null : new Date(ms))), PgTypes.OID.timestamptz)

/**
 * Rows zipped from parallel arrays, for `FROM ${zipped(sql, { a: …, b: … })} AS v`: `(SELECT unnest($1) AS a,
 * unnest($2) AS b, …)`, the same rows as `UNNEST($1, $2, …) AS v(a, b, …)` (a shorter array pads with NULLs in both).
 * In the select list PostgreSQL streams the elements row by row; in FROM it first copies every array into a tuplestore,
 * which cost it a quarter to a third more per decision inserted (bench/notes/ingest.md, "One consumer per shard, and
 * arrays zipped in the select list").
 */
export const zipped = (sql: Statement.Constructor, columns: Readonly<Record<string, unknown>>) =>
  sql`(SELECT ${
    sql.join(", ", false)(Object.entries(columns).map(([name, values]) => sql`unnest(${values}) AS ${sql(name)}`))
  })`
