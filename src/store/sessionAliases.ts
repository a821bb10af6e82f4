/**
 * Session ids after merges: a session the builder folded into another stays an alias of it (session_aliases,
 * migration 0010), so every read that takes a session id resolves it first.
 */
import type { ScopedSql } from "./TenantSql.ts"

/**
 * The session an id names now, as a SQL expression: the id itself, or the session it was folded into. A sub-select
 * as a whole, so Postgres computes it once and compares `session_id` with a plain value: a bare coalesce() is not
 * leakproof, and under the ledger tables' restrictive policy the comparison then scanned the whole workspace
 * instead of using the index (60 ms against 0.2 ms on 200k decisions).
 */
export const currentSessionId = (sql: ScopedSql["Service"], id: string) =>
  sql`(SELECT coalesce((SELECT a.merged_into FROM session_aliases a WHERE a.session_id = ${id}::uuid), ${id}::uuid))`

/**
 * The ids a session has gone by, as a SQL text[]: its current id and every id folded into it. For records that keep
 * the session ids of their time (insights), so a filter by any of them finds them all.
 */
export const sessionIdsOf = (sql: ScopedSql["Service"], id: string) =>
  sql`ARRAY(SELECT s.id::text FROM (SELECT ${currentSessionId(sql, id)} AS id
    UNION SELECT a.session_id FROM session_aliases a WHERE a.merged_into = ${currentSessionId(sql, id)}) s)`
