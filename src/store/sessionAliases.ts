/**
 * Session ids after merges: a session the builder folded into another stays an alias of it (session_aliases,
 * migration 0010), so every read that takes a session id resolves it first.
 */
import type { SqlClient } from "effect/sql"

/** The session an id names now, as a SQL expression: the id itself, or the session it was folded into. */
export const currentSessionId = (sql: SqlClient.SqlClient, id: string) =>
  sql`coalesce((SELECT a.merged_into FROM session_aliases a WHERE a.session_id = ${id}::uuid), ${id}::uuid)`
