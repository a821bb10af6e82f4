/**
 * What the MCP tools and the views (which take the same arguments) share about their arguments: the errors a read
 * answers with, the JSON Schema clients are shown, and decoding problems described as `path: message`.
 */
import { type JsonSchema, Schema, SchemaIssue } from "effect"
import type { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"

/** What a read of the ledger may fail with. */
export type ReadError = BadRequest | NotFound | DatabaseUnavailable

type Json = JsonSchema.JsonSchema

/** Effect's JSON codec accepts "NaN"/"Infinity" strings for numbers; the ledger never emits them. */
const isNonFiniteNumberBranch = (schema: Json) =>
  schema.type === "string" && Array.isArray(schema.enum) && schema.enum.includes("NaN")

/**
 * Tidies the generated document for clients: drops the non-finite number branches and the `null` branch that the
 * JSON codec adds to optional properties (an omitted parameter is how a caller says "not given"), and unwraps
 * single-branch `anyOf`s.
 */
const tidy = (schema: Json, optional = false): Json => {
  const out: Json = { ...schema }
  if (out.properties !== undefined) {
    const required = new Set<string>(Array.isArray(out.required) ? out.required : [])
    out.properties = Object.fromEntries(
      Object.entries(out.properties as Record<string, Json>).map(([key, value]) => [key, tidy(value, !required.has(key))])
    )
  }
  if (out.items !== undefined && !Array.isArray(out.items)) out.items = tidy(out.items as Json)
  if (typeof out.additionalProperties === "object") out.additionalProperties = tidy(out.additionalProperties as Json)
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = out[key] as Array<Json> | undefined
    if (branches === undefined) continue
    const kept = branches
      .filter((branch) => !isNonFiniteNumberBranch(branch) && !(optional && branch.type === "null"))
      .map((branch) => tidy(branch))
    if (kept.length === 1) {
      delete out[key]
      return { ...kept[0], ...out }
    }
    out[key] = kept
  }
  return out
}

/** The JSON Schema (draft 2020-12) of a schema's JSON form; `closed` refuses properties the schema does not name. */
export const jsonSchemaOf = (schema: Schema.Top, options: { readonly closed: boolean }): Json => {
  const document = Schema.toJsonSchemaDocument(schema, { onExcessProperty: options.closed ? "error" : "ignore" })
  const root = tidy(document.schema)
  return Object.keys(document.definitions).length > 0 ? { ...root, $defs: document.definitions } : root
}

const issueFormatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Each problem of a decoding failure as `path: message`. */
export const describeIssues = (error: Schema.SchemaError): Array<string> =>
  issueFormatter(error.issue).issues.map((issue) =>
    issue.path !== undefined && issue.path.length > 0 ? `${issue.path.map(String).join(".")}: ${issue.message}` : issue.message
  )
