/**
 * The parameters of the read model, as schemas: REST declares its query and path parameters with them (so the
 * OpenAPI document states the same limits), MCP derives tool input schemas from them, and the query layer
 * checks every call against them before any SQL runs — bad input is a 400 on every surface, never a 5xx.
 */
import { Schema } from "effect"
import { CallerIdentifier } from "../domain/identifiers.ts"

export const DEFAULT_PAGE_LIMIT = 20
export const MAX_PAGE_LIMIT = 100
/** the longest cursor accepted (the ones issued are far shorter) */
export const MAX_CURSOR_LENGTH = 1024

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i

export const PageLimit = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_PAGE_LIMIT })).annotate({
  description: `Page size, 1–${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT}).`
})

export const PageCursor = Schema.String.check(Schema.isMaxLength(MAX_CURSOR_LENGTH)).annotate({
  description: "Opaque cursor: the `next_cursor` of the previous page, with the same other parameters."
})

/** Ids the ledger mints (sessions, decisions): UUIDs. Any 8-4-4-4-12 hex string is accepted. */
export const LedgerUuid = Schema.String.check(
  Schema.isGUID({ expected: "a UUID", toJsonSchema: () => ({ format: "uuid" }) })
)

/** No NUL: PostgreSQL text cannot hold it, so no stored text contains it. */
export const withoutNul = Schema.makeFilter((value: string) => !value.includes("\u0000"), {
  expected: "text without NUL characters",
  toJsonSchema: () => ({ pattern: "^[^\\u0000]*$" })
})

/** Agent ids are chosen by callers at the gateway. */
export const AgentId = CallerIdentifier.annotate({
  description: "The agent id as sent to the gateway (`agent_id` query parameter)."
})

/** A model name as providers spell them. */
export const ModelName = CallerIdentifier

export const IsoDateTime = Schema.String.check(
  Schema.makeFilter((value: string) => ISO_DATE_TIME.test(value) && Number.isFinite(Date.parse(value)), {
    expected: "an ISO 8601 date-time, e.g. 2025-11-03T09:30:00Z",
    toJsonSchema: () => ({ format: "date-time" })
  })
)

export const UsdAmount = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))
export const UnitScore = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))

export const AgentOrder = Schema.Literals(["recent", "cost", "decisions"]).annotate({
  description: "`recent`: latest activity first (default); `cost`: highest total cost first; `decisions`: most decisions first."
})
export type AgentOrder = typeof AgentOrder.Type
export const SessionOrder = Schema.Literals(["recent", "cost"]).annotate({
  description: "`recent`: latest activity first (default); `cost`: highest total cost first."
})
export type SessionOrder = typeof SessionOrder.Type
export const DecisionOrder = Schema.Literals(["newest", "oldest", "cost", "quality"]).annotate({
  description:
    "`newest` (default) or `oldest` by creation time; `cost`: most expensive first (unpriced last); `quality`: lowest quality first."
})
export type DecisionOrder = typeof DecisionOrder.Type
