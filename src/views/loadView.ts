/**
 * Loading a view's payload, for both hosts of the views (render_ui's MCP App and the app's web pages): the view's
 * parameters decoded strictly (a parameter the view does not take is refused, naming the ones it does), its data
 * loaded under the caller's principal, and the envelope the runtime draws.
 */
import { DateTime, Effect, Schema } from "effect"
import { BadRequest } from "../domain/errors.ts"
import type { Principal } from "../domain/principal.ts"
import { describeIssues, jsonSchemaOf, type ReadError } from "./arguments.ts"
import type { AnyView, ViewServices } from "./View.ts"
import { views } from "./index.ts"

export const viewsByName: ReadonlyMap<string, AnyView> = new Map<string, AnyView>(views.map((view) => [view.name, view]))

type Property = { readonly type?: string }

const propertiesOf = (view: AnyView): Record<string, Property> =>
  (jsonSchemaOf(view.params, { closed: true }).properties ?? {}) as Record<string, Property>

const properties = new Map(views.map((view) => [view.name, propertiesOf(view)]))

/** The parameter names each view takes. */
export const acceptedParams = (view: AnyView): ReadonlyArray<string> => Object.keys(properties.get(view.name)!)

/**
 * Arguments read from a URL (all text) as the view takes them: numbers and booleans where its parameter is one, a
 * single value as a list where it takes a list. Anything else stays text for the view's schema to judge.
 */
export const argumentsFromText = (view: AnyView, args: Record<string, string | ReadonlyArray<string>>): Record<string, unknown> => {
  const types = properties.get(view.name)!
  const typed: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(args)) {
    const type = types[key]?.type
    const one = (text: string): unknown =>
      (type === "integer" || type === "number") && /^-?\d+(\.\d+)?$/.test(text)
        ? Number(text)
        : type === "boolean" && (text === "true" || text === "false")
        ? text === "true"
        : text
    typed[key] = type === "array" ? (typeof value === "string" ? [value] : value) : typeof value === "string" ? one(value) : value
  }
  return typed
}

export interface ViewPayload {
  readonly view: string
  readonly view_title: string
  readonly title: string
  readonly generated_at: string
  readonly params: Record<string, unknown>
  readonly data: unknown
}

export type ViewsServices = ViewServices<typeof views[number]>

export const loadView = Effect.fnUntraced(function*(principal: Principal, view: AnyView, raw: Record<string, unknown>) {
  const params = yield* Schema.decodeUnknownEffect(view.params as Schema.Decoder<Record<string, unknown>>)(raw, { onExcessProperty: "error", errors: "all" }).pipe(
    Effect.mapError((error) => {
      const accepted = acceptedParams(view)
      return new BadRequest({
        message: `arguments for view "${view.name}": ${describeIssues(error).join("; ")}; ` +
          `this view takes ${accepted.length > 0 ? accepted.join(", ") : "no parameters besides view"}`
      })
    })
  )
  const data = yield* (view.load(principal, params) as Effect.Effect<unknown, ReadError, ViewsServices>)
  const now = yield* DateTime.now
  return {
    view: view.name,
    view_title: view.title,
    title: view.heading(data, params),
    generated_at: DateTime.formatIso(now),
    params,
    data
  } satisfies ViewPayload
})
