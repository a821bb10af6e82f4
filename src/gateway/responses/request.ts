/**
 * The OpenAI Responses request, as far as the gateway reads it: routing, validation, chains, and translation for
 * providers that do not speak it. Everything else passes through untouched to OpenAI-wire providers; Codex's own
 * item and tool types among it.
 */

/** An input or output item: discriminated by `type` (a message may leave it out). */
export interface ResponseItem {
  readonly type?: string
  readonly [key: string]: unknown
}

export interface ResponsesTool {
  readonly type: string
  readonly name?: string
  readonly description?: string
  readonly parameters?: object
  readonly format?: { readonly type: string; readonly syntax?: string; readonly definition?: string }
  /** a namespace's tools */
  readonly tools?: ReadonlyArray<ResponsesTool>
  readonly execution?: string
}

export interface ResponsesRequest {
  readonly model: string
  readonly input?: string | ReadonlyArray<ResponseItem>
  readonly instructions?: string | null
  readonly previous_response_id?: string | null
  readonly stream?: boolean | null
  readonly store?: boolean | null
  readonly tools?: ReadonlyArray<ResponsesTool>
  readonly tool_choice?: string | { readonly type: string; readonly name?: string }
  readonly parallel_tool_calls?: boolean | null
  readonly max_output_tokens?: number | null
  readonly temperature?: number | null
  readonly top_p?: number | null
  readonly reasoning?: { readonly effort?: string | null; readonly summary?: string | null } | null
  readonly text?: { readonly format?: { readonly type: string; readonly name?: string; readonly schema?: object } }
  readonly include?: ReadonlyArray<string>
  readonly user?: string
  readonly safety_identifier?: string
  /** WebSocket mode: prepare the conversation without generating (Codex's warm-up) */
  readonly generate?: boolean
}

/** The input as items (a string is one user message). */
export const inputItems = (request: Pick<ResponsesRequest, "input">): ReadonlyArray<ResponseItem> =>
  typeof request.input === "string" ? [{ type: "message", role: "user", content: request.input }] : request.input ?? []
