/**
 * The read model's check of its parameters, against the same schemas REST and MCP declare them with (./params.ts
 * and `DecisionFilters`). Those surfaces decode first and answer bad input in their own words, so through them
 * these checks always pass; they are what every other caller gets: a `BadRequest` naming the parameter, before
 * any SQL runs, never a 5xx.
 */
import { Effect, Schema } from "effect"
import { BadRequest } from "../domain/errors.ts"
import { DecisionFilters, type DecisionListParams } from "./LedgerQuery.ts"
import { DecisionOrder, IsoDateTime } from "./params.ts"

type Checkable = Schema.Codec<any, any, never, never>

export const invalidParam = (param: string, message: string) => new BadRequest({ param, message: `${param}: ${message}` })

/** A parameter that must be given, checked against its schema. */
export const checkRequired = <S extends Checkable>(schema: S, name: string, value: unknown) =>
  Schema.decodeUnknownEffect(schema)(value).pipe(
    Effect.mapError((error) => invalidParam(name, error.message))
  ) as Effect.Effect<S["Type"], BadRequest>

/** An optional parameter (all list parameters are): undefined stays undefined, anything else is checked. */
export const checkOptional = <S extends Checkable>(schema: S, name: string, value: unknown) =>
  value === undefined ? Effect.succeed(undefined) : checkRequired(schema, name, value)

/** A checked ISO 8601 time as UTC: a time without an offset is UTC, whatever the server's time zone. */
export const toUtc = (iso: string | undefined) => {
  if (iso === undefined) return undefined
  const explicitZone = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(iso) || !/[T ]\d/i.test(iso)
  const utc = new Date(explicitZone ? iso : `${iso}Z`)
  return (Number.isNaN(utc.getTime()) ? new Date(iso) : utc).toISOString()
}

export const checkTime = (name: string, value: unknown) => Effect.map(checkOptional(IsoDateTime, name, value), toUtc)

/** A decision list's order and filters once checked; the key order is part of what a cursor is bound to. */
export type CheckedFilters = { readonly order: DecisionOrder } & DecisionFilters

/** Each filter against its field of `DecisionFilters`, in the order the schema lists them; times made UTC. */
export const checkDecisionFilters = Effect.fnUntraced(function*(params: DecisionListParams) {
  const order = (yield* checkOptional(DecisionOrder, "order", params.order)) ?? "newest"
  const filters: Record<string, unknown> = {}
  for (const [name, field] of Object.entries(DecisionFilters.fields)) {
    // the field's own schema, not its `optional` wrapper, so a message never mentions `undefined`
    filters[name] = yield* checkOptional(field.schema.members[0], name, params[name as keyof DecisionFilters])
  }
  const checked = filters as DecisionFilters
  return { order, ...checked, since: toUtc(checked.since), until: toUtc(checked.until) } satisfies CheckedFilters
})
