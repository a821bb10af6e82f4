/**
 * Keyset pages. Each list order is (sort key, id) in one direction, and a page continues strictly after the last
 * row of the previous one, so rows arriving meanwhile neither repeat nor shift what is left to read. The position
 * travels in a signed cursor (./cursor.ts) bound to the caller and the list's parameters.
 */
import { Effect } from "effect"
import type { Statement } from "effect/sql"
import type { Principal } from "../domain/principal.ts"
import { decodeCursor, encodeCursor } from "./cursor.ts"
import { checkOptional, invalidParam } from "./paramChecks.ts"
import { type AgentOrder, type DecisionOrder, DEFAULT_PAGE_LIMIT, PageCursor, PageLimit, type SessionOrder } from "./params.ts"

/** Postgres text of a timestamp with its microseconds, so a cursor positions exactly. */
const timestampText = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

interface Ordering {
  /** SQL of the sort key (a trusted constant, never input) */
  readonly sort: string
  /** SQL type the cursor's sort text is cast back to */
  readonly sortType: "timestamptz" | "float8"
  readonly id: string
  readonly idType: "uuid" | "text"
  readonly direction: "ASC" | "DESC"
}

const ordering = (sortType: Ordering["sortType"]) =>
(sort: string, id: string, idType: Ordering["idType"], direction: Ordering["direction"]): Ordering => ({
  sort,
  sortType,
  id,
  idType,
  direction
})
const byTime = ordering("timestamptz")
const byNumber = ordering("float8")

const sortText = (ordering: Ordering) =>
  ordering.sortType === "timestamptz" ? timestampText(ordering.sort) : `(${ordering.sort})::text`

export const AGENT_ORDERS: Record<AgentOrder, Ordering> = {
  recent: byTime("last_seen_at", "agent_id", "text", "DESC"),
  cost: byNumber("total_cost_usd", "agent_id", "text", "DESC"),
  decisions: byNumber("decision_count", "agent_id", "text", "DESC")
}
export const SESSION_ORDERS: Record<SessionOrder, Ordering> = {
  recent: byTime("ended_at", "session_id", "uuid", "DESC"),
  cost: byNumber("total_cost_usd", "session_id", "uuid", "DESC")
}
export const DECISION_ORDERS: Record<DecisionOrder, Ordering> = {
  newest: byTime("created_at", "ledger_id", "uuid", "DESC"),
  oldest: byTime("created_at", "ledger_id", "uuid", "ASC"),
  // cost_rank = coalesce(cost_usd, -1) (a stored column): unpriced decisions sort after every priced one
  cost: byNumber("cost_rank", "ledger_id", "uuid", "DESC"),
  quality: byNumber("quality", "ledger_id", "uuid", "ASC")
}

/** A row selected with `keyset(...).k AS k`. */
export interface Keyed {
  /** the sort key's Postgres text, for the next cursor */
  readonly k: string
}

export interface PageRequest {
  readonly limit: number
  /** what the cursor is bound to: the caller's scope, the list, and every parameter except the page size */
  readonly binding: string
  readonly after: { readonly sort: string; readonly id: string } | undefined
}

const binding = (principal: Principal, list: string, params: object) =>
  JSON.stringify([principal.tenant_id, principal.workspace_id, principal.user_id, principal.role, list, params])

/** The page asked for: its size, and where the cursor (if any) says the previous page ended. */
export const pageRequest = Effect.fnUntraced(function*(key: Uint8Array, principal: Principal, list: string, params: object, raw: {
  readonly limit?: unknown
  readonly cursor?: unknown
}) {
  const limit = (yield* checkOptional(PageLimit, "limit", raw.limit)) ?? DEFAULT_PAGE_LIMIT
  const cursor = yield* checkOptional(PageCursor, "cursor", raw.cursor)
  const bound = binding(principal, list, params)
  const after = cursor === undefined ? undefined : decodeCursor(key, bound, cursor)
  if (cursor !== undefined && after === undefined) {
    return yield* invalidParam("cursor", "not a cursor issued for this list with these parameters (pass next_cursor unchanged)")
  }
  return { limit, binding: bound, after } satisfies PageRequest
})

/** The keyset condition and ORDER BY of a page, and `k`, the sort key's text to select for the next cursor. */
export const keyset = (sql: Statement.Constructor, ordering: Ordering, request: PageRequest) => {
  const operator = ordering.direction === "DESC" ? "<" : ">"
  const after = request.after === undefined
    ? sql`TRUE`
    : sql`(${sql.literal(ordering.sort)}, ${sql.literal(ordering.id)}) ${sql.literal(operator)}
        (${request.after.sort}::${sql.literal(ordering.sortType)}, ${request.after.id}::${sql.literal(ordering.idType)})`
  const orderBy = sql.literal(`${ordering.sort} ${ordering.direction}, ${ordering.id} ${ordering.direction}`)
  return { after, orderBy, k: sql.literal(sortText(ordering)) }
}

/** A page from `limit + 1` rows: the extra row only says another page follows, from the last one shown. */
export const finishPage = <Row extends Keyed, A>(
  key: Uint8Array,
  rows: ReadonlyArray<Row>,
  request: Pick<PageRequest, "limit" | "binding">,
  id: (row: Row) => string,
  to: (row: Row) => A
) => {
  const more = rows.length > request.limit
  const items = more ? rows.slice(0, request.limit) : rows
  const last = items.at(-1)
  return {
    data: items.map(to),
    next_cursor: more && last !== undefined ? encodeCursor(key, request.binding, { sort: last.k, id: id(last) }) : null
  }
}
