/**
 * render_ui: the MCP App tool (extension `io.modelcontextprotocol/ui`). It loads a view's payload under the caller's
 * principal and returns it as `structuredContent` (drawn by the App resource the tool's `_meta.ui.resourceUri`
 * names) with the view's text rendering in `content` for hosts that do not draw Apps.
 *
 * Its parameters are the union of the views' (./ui/views): `view` picks one, and only that view's parameters are
 * accepted. A parameter name shared by views must mean the same thing in each (checked when this module loads).
 */
import { RESOURCE_URI_META_KEY } from "@modelcontextprotocol/ext-apps/server"
import { Schema } from "effect"
import { loadView, viewsByName } from "../../views/loadView.ts"
import { UI_RESOURCE_URI } from "../appResource.ts"
import { views } from "../../views/index.ts"
import { defineTool } from "./Tool.ts"
import { jsonSchemaOf } from "../../views/arguments.ts"

type Json = Record<string, unknown>

const viewNames = views.map((view) => view.name) as unknown as readonly [string, ...Array<string>]

/** Each view's parameters as JSON Schema properties, to merge them and to describe where each is used. */
const viewProperties = views.map((view) => {
  const schema = jsonSchemaOf(view.params, { closed: true })
  const required = new Set((schema.required ?? []) as Array<string>)
  return { view, properties: (schema.properties ?? {}) as Record<string, Json>, required }
})

const withoutDescription = ({ description: _, ...rest }: Json) => JSON.stringify(rest)

const mergedFields: Record<string, Schema.Top> = {}
const usage = new Map<string, { description: string; shape: string; views: Array<string> }>()
for (const { view, properties, required } of viewProperties) {
  for (const [key, property] of Object.entries(properties)) {
    const seen = usage.get(key)
    const use = `${view.name}${required.has(key) ? " (required)" : ""}`
    if (seen === undefined) {
      usage.set(key, { description: String(property.description ?? ""), shape: withoutDescription(property), views: [use] })
      const field = (view.params.fields as Record<string, Schema.Top>)[key]!
      mergedFields[key] = required.has(key) ? Schema.optional(field) : field
    } else if (seen.shape !== withoutDescription(property)) {
      throw new Error(`render_ui: views disagree on parameter ${key} (${view.name} vs ${seen.views.join(", ")})`)
    } else {
      seen.views.push(use)
    }
  }
}
for (const [key, { description, views: users }] of usage) {
  mergedFields[key] = mergedFields[key]!.annotate({ description: `${description} Views: ${users.join(", ")}.`.trim() })
}

const Input = Schema.Struct({
  view: Schema.Literals(viewNames).annotate({ description: "Which view to draw; each view's parameters are listed in the tool description." }),
  ...mergedFields
})

const Output = Schema.Struct({
  view: Schema.Literals(viewNames),
  /** the kind of view, e.g. "Session timeline" */
  view_title: Schema.String,
  /** what this payload shows, e.g. the agent's name */
  title: Schema.String,
  generated_at: Schema.String,
  /** the view's parameters as applied */
  params: Schema.Record(Schema.String, Schema.Unknown),
  data: Schema.Union(views.map((view) => view.data) as unknown as readonly [Schema.Top, ...Array<Schema.Top>])
})

export const renderUi = defineTool({
  name: "render_ui",
  title: "Show ledger views",
  description:
    "Draw an interactive view of the ledger for the user (an MCP App: charts, sortable and filterable tables, " +
    "drill-down from agents to sessions to decisions). Hosts without MCP Apps get the same data as text. Views:\n" +
    views.map((view) => `- ${view.description}`).join("\n") +
    "\nUse it when the user wants to see or explore the data; use the list_/get_ tools when you need the data yourself.",
  input: Input,
  output: Output,
  meta: { ui: { resourceUri: UI_RESOURCE_URI }, [RESOURCE_URI_META_KEY]: UI_RESOURCE_URI },
  run: (principal, { view: name, ...rest }) => loadView(principal, viewsByName.get(name)!, rest),
  text: (result) => viewsByName.get(result.view)!.text(result.data, result.params)
})
