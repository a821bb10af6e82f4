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
import { Effect, Schema } from "effect"
import { describeIssues, jsonSchemaOf, type ReadError } from "../../views/arguments.ts"
import type { Principal } from "../../domain/principal.ts"

/** Every ledger tool only reads the caller's own ledger. */
export const READ_ONLY_ANNOTATIONS = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false
} as const

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
  readonly run: (principal: Principal, args: In["Type"]) => Effect.Effect<Out["Type"], ReadError, R>
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

const errorResult = (text: string): CallToolResult => ({ isError: true, content: [{ type: "text", text }] })

const describeArgumentError = (tool: AnyTool, error: Schema.SchemaError) => {
  const problems = describeIssues(error)
  const known = Object.keys((jsonSchemaOf(tool.input, { closed: true }).properties ?? {}) as object)
  return `Invalid arguments for ${tool.name}: ${problems.join("; ")}. ` +
    `Accepted parameters: ${known.length > 0 ? known.join(", ") : "none"} (see the tool's inputSchema).`
}

const describeReadError = (tool: AnyTool, error: ReadError): string => {
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
  readonly error: ReadError["_tag"] | "InvalidArguments" | "InternalError" | undefined
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
          Effect.catch((error: ReadError) =>
            Effect.succeed<ToolOutcome>({ result: errorResult(describeReadError(tool, error)), error: error._tag })
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
