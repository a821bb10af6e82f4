/**
 * Typed array parameters, sent in PostgreSQL's binary format: `UNNEST` needs element types the driver cannot infer
 * from mixed or all-NULL values, and a binary array costs the server far less to read than the same values as JSON
 * or array text (docs/ARCHITECTURE.md, "Analytics").
 */
import { PgTypes } from "@effect/sql-pg"
import { Result } from "effect"

const array = (values: ReadonlyArray<unknown>, oid: number) => Result.getOrThrow(PgTypes.array(values, oid))

export const texts = (values: ReadonlyArray<string | null>) => array(values, PgTypes.OID.text)
export const uuids = (values: ReadonlyArray<string | null>) => array(values, PgTypes.OID.uuid)
export const ints = (values: ReadonlyArray<number | null>) => array(values, PgTypes.OID.int4)
/** float8 also carries the bigint rollups (exact to 2^53; assignment casts them to bigint) */
export const floats = (values: ReadonlyArray<number | null>) => array(values, PgTypes.OID.float8)
/** float4 (`real`) elements */
export const reals = (values: ReadonlyArray<number>) => array(values, PgTypes.OID.float4)
export const bools = (values: ReadonlyArray<boolean>) => array(values, PgTypes.OID.bool)
/** timestamptz elements from epoch milliseconds */
export const times = (values: ReadonlyArray<number | null>) =>
  array(values.map((ms) => (ms === null ? null : new Date(ms))), PgTypes.OID.timestamptz)
