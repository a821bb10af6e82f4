/**
 * The MCP server behind `POST /mcp` (docs/ARCHITECTURE.md, "Surfaces"): tools, the render_ui App resource and
 * logging, over the SDK's web-standard streamable HTTP transport in stateless mode — a new SDK server and transport
 * per HTTP request, bound to the caller's principal, so every tool call runs under the caller's tenant, workspace and
 * user and no state is shared between callers. Tool definitions (JSON Schemas) are computed once.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type InitializeRequest,
  InitializeRequestSchema,
  type InitializeResult,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  type LoggingLevel,
  McpError,
  ErrorCode,
  ReadResourceRequestSchema,
  SetLevelRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server"
import { Context, Duration, Effect, Layer } from "effect"
import type { Principal } from "../domain/principal.ts"
import { tools } from "./tools/index.ts"
import { callTool, toolDefinition, type ToolServices } from "./tools/Tool.ts"
import { uiResources } from "./appResource.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

export const SERVER_INFO = { name: "agent-decision-ledger", title: "Agent Decision Ledger", version: "0.1.0" }

const INSTRUCTIONS =
  "Read-only access to the Agent Decision Ledger: every model call your AI agents made, rebuilt as an auditable " +
  "decision (agent → session → decision). Start with list_agents or list_decisions, drill down with " +
  "list_agent_sessions, list_session_decisions and get_decision; render_ui shows the same data as interactive views."

/** Severity order of MCP log levels (RFC 5424). */
const LOG_SEVERITY: ReadonlyArray<LoggingLevel> = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
const DEFAULT_LOG_LEVEL: LoggingLevel = "info"
const LOG_LEVELS_MAX = 10_000

/**
 * The SDK parses a request against its handler's schema before the handler runs and answers a mismatch with -32603
 * Internal error (modelcontextprotocol/typescript-sdk#2284). A malformed request is the caller's mistake: handlers
 * are registered behind `dispatchOn(schema)`, which checks only the method, and `checked` answers the rest with
 * -32602 Invalid params, saying what is wrong.
 */
const dispatchOn = <S extends RequestSchema>(schema: S) => schema.pick({ method: true }).loose()

type RequestSchema =
  | typeof InitializeRequestSchema
  | typeof CallToolRequestSchema
  | typeof SetLevelRequestSchema
  | typeof ListToolsRequestSchema
  | typeof ListResourcesRequestSchema
  | typeof ReadResourceRequestSchema

const checked = <T, E, R>(
  schema: { safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } } },
  handler: (request: T, extra: E) => R
) =>
(request: unknown, extra: E): R => {
  const parsed = schema.safeParse(request)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.map(String).join(".") || "request"}: ${issue.message}`)
    throw new McpError(ErrorCode.InvalidParams, `Invalid request: ${problems.join("; ")}`)
  }
  return handler(parsed.data, extra)
}

export class McpServer extends Context.Service<McpServer, {
  /** Answers one streamable-HTTP request of an authenticated caller. */
  handle(principal: Principal, request: Request): Effect.Effect<Response>
}>()("ledger/mcp/McpServer") {
  static readonly layer = Layer.effect(
    McpServer,
    Effect.gen(function*() {
      const services = yield* Effect.context<ToolServices<typeof tools[number]>>()
      const definitions = tools.map(toolDefinition)
      const byName = new Map(tools.map((tool) => [tool.name, tool]))
      // stateless transport: the level a caller sets is remembered per credential, so it filters later requests
      const logLevels = new BoundedMap<string, LoggingLevel>(LOG_LEVELS_MAX)

      const build = (principal: Principal) => {
        const server = new Server(SERVER_INFO, {
          capabilities: {
            tools: {},
            resources: {},
            logging: {},
            extensions: { [EXTENSION_ID]: {} }
          },
          instructions: INSTRUCTIONS
        })
        const levelOf = () => logLevels.get(principal.token_id) ?? DEFAULT_LOG_LEVEL

        // The SDK registers `initialize` itself, behind the same -32603 for a malformed request (an `initialize`
        // without params, found by the MCP fuzz test): registered again behind `checked`, answered by the SDK's own.
        const initialize = (server as unknown as { _oninitialize(request: InitializeRequest): Promise<InitializeResult> })._oninitialize.bind(server)
        server.setRequestHandler(dispatchOn(InitializeRequestSchema), checked(InitializeRequestSchema, initialize))

        server.setRequestHandler(dispatchOn(SetLevelRequestSchema), checked(SetLevelRequestSchema, (request) => {
          logLevels.set(principal.token_id, request.params.level)
          return {}
        }))
        server.setRequestHandler(dispatchOn(ListToolsRequestSchema), checked(ListToolsRequestSchema, () => ({ tools: definitions })))
        server.setRequestHandler(dispatchOn(CallToolRequestSchema), checked(CallToolRequestSchema, async (request, extra) => {
          const tool = byName.get(request.params.name)
          if (tool === undefined) {
            throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${request.params.name}; call tools/list for the tool names`)
          }
          const [elapsed, outcome] = await Effect.runPromiseWith(services)(
            Effect.timed(callTool(tool, principal, request.params.arguments)).pipe(
              Effect.tap(([elapsed, outcome]) =>
                Effect.logInfo("mcp tool call").pipe(Effect.annotateLogs({
                  tool: tool.name,
                  error: outcome.error ?? null,
                  duration_ms: Duration.toMillis(elapsed),
                  tenant_id: principal.tenant_id,
                  workspace_id: principal.workspace_id,
                  user_id: principal.user_id,
                  credential: principal.kind
                }))
              )
            )
          )
          if (LOG_SEVERITY.indexOf("debug") >= LOG_SEVERITY.indexOf(levelOf())) {
            await extra.sendNotification({
              method: "notifications/message",
              params: {
                level: "debug",
                logger: "ledger",
                data: { tool: tool.name, duration_ms: Duration.toMillis(elapsed), error: outcome.error ?? null }
              }
            })
          }
          return outcome.result
        }))
        server.setRequestHandler(dispatchOn(ListResourcesRequestSchema), checked(ListResourcesRequestSchema, () => ({
          resources: uiResources.map(({ uri, name, title, description, mimeType, meta }) => ({
            uri,
            name,
            title,
            description,
            mimeType,
            _meta: meta
          }))
        })))
        server.setRequestHandler(dispatchOn(ReadResourceRequestSchema), checked(ReadResourceRequestSchema, (request) => {
          const resource = uiResources.find((r) => r.uri === request.params.uri)
          if (resource === undefined) {
            throw new McpError(ErrorCode.InvalidParams, `Unknown resource ${request.params.uri}; call resources/list`)
          }
          return { contents: [{ uri: resource.uri, mimeType: resource.mimeType, text: resource.text, _meta: resource.meta }] }
        }))
        return server
      }

      const handle = Effect.fn("McpServer.handle")(function*(principal: Principal, request: Request) {
        const server = build(principal)
        const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
        yield* Effect.promise(() => server.connect(transport))
        return yield* Effect.promise(() => transport.handleRequest(request))
      })

      return McpServer.of({ handle })
    })
  )
}
