/**
 * The shape of one MCP tool (docs/ARCHITECTURE.md, "Surfaces"). Each tool is a module under src/mcp/tools/ exporting
 * a `LedgerTool` made with `defineTool`, and ./index.ts lists them; the server derives everything the protocol needs
 * from it:
 *
 * - `input` / `output` are Effect schemas — the `inputSchema` / `outputSchema` JSON Schemas are generated from them
 *   (so they say what the code checks), arguments are decoded with `input` (unknown parameters refused), and
 *   `structuredContent` is what `run` returns: the REST payload shape for the same data.
 * - `run` executes under the caller's principal; its domain errors become `isError` results with the message.
 * - `text` is the concise rendering that goes in `content` for clients (and models) that read text.
 */
import type { CallToolResult, Tool as ToolDefinition } from "@modelcontextprotocol/sdk/types.js"
import { Effect, type JsonSchema, Schema, SchemaIssue } from "effect"
import type { BadRequest, DatabaseUnavailable, NotFound } from "../../domain/errors.ts"
import type { Principal } from "../../domain/principal.ts"

/** Every ledger tool only reads the caller's own ledger. */
export const READ_ONLY_ANNOTATIONS = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false
} as const

export type ToolError = BadRequest | NotFound | DatabaseUnavailable

export interface LedgerTool<In extends Schema.Decoder<unknown>, Out extends Schema.Top, R> {
  readonly name: string
  readonly title: string
  /** written for a model choosing among tools: what it answers, when to use it, what to call next */
  readonly description: string
  readonly input: In
  /** the shape of `structuredContent`; must be an object schema */
  readonly output: Out
  /** protocol `_meta` of the tool (render_ui: the MCP App resource) */
  readonly meta?: Record<string, unknown> | undefined
  readonly run: (principal: Principal, args: In["Type"]) => Effect.Effect<Out["Type"], ToolError, R>
  readonly text: (result: Out["Type"], args: In["Type"]) => string
}

export type AnyTool = LedgerTool<any, any, any>

/** The services a list of tools needs. */
export type ToolServices<T> = T extends LedgerTool<any, any, infer R> ? R : never

export const defineTool = <In extends Schema.Decoder<unknown>, Out extends Schema.Top, R>(
  tool: LedgerTool<In, Out, R>
): LedgerTool<In, Out, R> => tool

// ---------------------------------------------------------------------------------------------------------------
// JSON Schema from Effect schemas

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

/** The `tools/list` entry of a tool. */
export const toolDefinition = (tool: AnyTool): ToolDefinition => ({
  name: tool.name,
  title: tool.title,
  description: tool.description,
  inputSchema: jsonSchemaOf(tool.input, { closed: true }) as ToolDefinition["inputSchema"],
  outputSchema: jsonSchemaOf(tool.output, { closed: false }) as ToolDefinition["outputSchema"],
  annotations: { title: tool.title, ...READ_ONLY_ANNOTATIONS },
  ...(tool.meta === undefined ? {} : { _meta: tool.meta })
})

// ---------------------------------------------------------------------------------------------------------------
// Calling

const issueFormatter = SchemaIssue.makeFormatterStandardSchemaV1()

const errorResult = (text: string): CallToolResult => ({ isError: true, content: [{ type: "text", text }] })

/** Each problem of a decoding failure as `path: message`. */
export const describeIssues = (error: Schema.SchemaError): Array<string> =>
  issueFormatter(error.issue).issues.map((issue) =>
    issue.path !== undefined && issue.path.length > 0 ? `${issue.path.map(String).join(".")}: ${issue.message}` : issue.message
  )

const describeArgumentError = (tool: AnyTool, error: Schema.SchemaError) => {
  const problems = describeIssues(error)
  const known = Object.keys((jsonSchemaOf(tool.input, { closed: true }).properties ?? {}) as object)
  return `Invalid arguments for ${tool.name}: ${problems.join("; ")}. ` +
    `Accepted parameters: ${known.length > 0 ? known.join(", ") : "none"} (see the tool's inputSchema).`
}

const describeToolError = (tool: AnyTool, error: ToolError): string => {
  switch (error._tag) {
    case "BadRequest":
      return `${tool.name}: ${error.message}${error.param ? ` (parameter ${error.param})` : ""}. Fix the argument and call again.`
    case "NotFound":
      return `${tool.name}: ${error.message}. Check the id — list_agents, list_agent_sessions and list_decisions return the ids you can use.`
    case "DatabaseUnavailable":
      return `${tool.name}: the ledger database is unavailable right now; retry in a few seconds.`
  }
}

export interface ToolOutcome {
  readonly result: CallToolResult
  /** why the call was refused, for the call's log line */
  readonly error: ToolError["_tag"] | "InvalidArguments" | "InternalError" | undefined
}

/** Decodes the arguments, runs the tool under the principal, and shapes the result (errors become `isError`). */
export const callTool = <R>(tool: LedgerTool<any, any, R>, principal: Principal, args: unknown): Effect.Effect<ToolOutcome, never, R> =>
  Schema.decodeUnknownEffect(tool.input)(args ?? {}, { onExcessProperty: "error", errors: "all" }).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.succeed<ToolOutcome>({ result: errorResult(describeArgumentError(tool, error)), error: "InvalidArguments" }),
      onSuccess: (decoded) =>
        tool.run(principal, decoded).pipe(
          Effect.map((output): ToolOutcome => ({
            result: { content: [{ type: "text", text: tool.text(output, decoded) }], structuredContent: output },
            error: undefined
          })),
          Effect.catch((error: ToolError) =>
            Effect.succeed<ToolOutcome>({ result: errorResult(describeToolError(tool, error)), error: error._tag })
          )
        )
    }),
    // a bug must not take the connection down: the caller gets an error result, the log gets the cause
    Effect.catchCause((cause) =>
      Effect.as(
        Effect.logError("mcp tool failed", cause).pipe(Effect.annotateLogs({ tool: tool.name })),
        { result: errorResult(`${tool.name}: internal error (logged on the server); try again or report it.`), error: "InternalError" } as const
      )
    )
  )
