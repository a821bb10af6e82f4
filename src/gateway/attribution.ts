/**
 * Who a gateway call is for: the agent, its display name and the execution (run) it belongs to.
 *
 * From the query parameters `agent_id`, `agent_name`, `execution_id`, or else from the headers `x-ledger-agent-id`,
 * `x-ledger-agent-name`, `x-ledger-execution-id` (clients that can add headers but not query parameters: Claude
 * Code's ANTHROPIC_CUSTOM_HEADERS, Codex's http_headers). Coding agents are recognised by the session they send:
 * without an execution id, their own session id groups their calls (`x-claude-code-session-id`, the `session_id` of
 * Codex's `x-codex-turn-metadata`), and without an agent id they are the agent `claude-code` or `codex`.
 */
import type { IncomingHttpHeaders } from "node:http"
import { CONTROL_CHARACTERS, MAX_ID_LENGTH } from "../domain/identifiers.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError } from "../providers/index.ts"

export interface Attribution {
  readonly agentId: string
  readonly agentName: string | null
  readonly executionId: string | null
}

const HEADERS = { agent_id: "x-ledger-agent-id", agent_name: "x-ledger-agent-name", execution_id: "x-ledger-execution-id" } as const
type Field = keyof typeof HEADERS

const headerValue = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : undefined
}

/** A value from the query or its header: absent (null), valid, or the error to answer. */
const field = (params: URLSearchParams | undefined, headers: IncomingHttpHeaders, name: Field): string | null | ProviderError => {
  const fromQuery = params?.get(name)
  const [value, where] = fromQuery !== undefined && fromQuery !== null && fromQuery !== ""
    ? [fromQuery, `query parameter ${name}`]
    : [headerValue(headers, HEADERS[name]), `header ${HEADERS[name]}`]
  if (value === undefined || value === "") return null
  if (value.length > MAX_ID_LENGTH) return gatewayError(400, `${where} is longer than ${MAX_ID_LENGTH} characters`, "invalid_parameter", name)
  if (CONTROL_CHARACTERS.test(value)) return gatewayError(400, `${where} contains control characters`, "invalid_parameter", name)
  return value
}

/** A coding agent's own session: the client it is and its session id. */
interface AgentSession {
  readonly client: "claude-code" | "codex"
  readonly sessionId: string | null
}

const validId = (value: unknown): string | null =>
  typeof value === "string" && value !== "" && value.length <= MAX_ID_LENGTH && !CONTROL_CHARACTERS.test(value) ? value : null

const agentSession = (headers: IncomingHttpHeaders): AgentSession | undefined => {
  const claude = headerValue(headers, "x-claude-code-session-id")
  if (claude !== undefined) return { client: "claude-code", sessionId: validId(claude) }
  const codex = headerValue(headers, "x-codex-turn-metadata")
  if (codex === undefined) return undefined
  try {
    return { client: "codex", sessionId: validId((JSON.parse(codex) as { session_id?: unknown } | null)?.session_id) }
  } catch {
    return { client: "codex", sessionId: null }
  }
}

export const isError = (value: unknown): value is ProviderError =>
  typeof value === "object" && value !== null && "body" in value && "status" in value

/** The call's attribution, or the 400 to answer. `params` is undefined when the URL has no query. */
export const attribution = (params: URLSearchParams | undefined, headers: IncomingHttpHeaders): Attribution | ProviderError => {
  const agentId = field(params, headers, "agent_id")
  if (isError(agentId)) return agentId
  const agentName = field(params, headers, "agent_name")
  if (isError(agentName)) return agentName
  const executionId = field(params, headers, "execution_id")
  if (isError(executionId)) return executionId
  if (agentId !== null && executionId !== null) return { agentId, agentName, executionId }
  const session = agentSession(headers)
  const agent = agentId ?? session?.client
  if (agent === undefined) {
    return gatewayError(
      400,
      "agent_id is required (the agent making the call): the query parameter agent_id or the header x-ledger-agent-id",
      "missing_parameter",
      "agent_id"
    )
  }
  return { agentId: agent, agentName, executionId: executionId ?? session?.sessionId ?? null }
}
