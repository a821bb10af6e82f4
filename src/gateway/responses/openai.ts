/**
 * The Responses API to providers that speak it (OpenAI, Azure OpenAI's v1 API, OpenAI-compatible upstreams): the
 * caller's body goes as it came (only a routing prefix is taken off the model) — Codex's own items and tools
 * (`custom_tool_call`, `tool_search_*`, namespaces, reasoning with `encrypted_content`) included, never re-parsed —
 * and the answer comes back as the provider sent it, events relayed as they arrive.
 */
import { opensObject, withModel } from "../../providers/body.ts"
import { providerError } from "../../providers/errors.ts"
import type { CallContext, ProviderAdapter, ProviderError, StreamAnswer } from "../../providers/index.ts"
import { bearerAuth, openAIWireError } from "../../providers/openai.ts"
import { SseDecoder } from "../../providers/sse.ts"
import { EventRelay, parsedEvents, trailingUsage } from "../../providers/stream.ts"
import type { ResponsesRequest } from "./request.ts"

/** One server-sent event as OpenAI frames Responses events: its type named on the `event:` line too. */
export const responsesEvent = (type: string, data: string): string => `event: ${type}\ndata: ${data}\n\n`

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"])

/** An event's type, from its `event:` line or, without one, from its data. */
const typeOf = (event: string, data: string): string => event || (/"type"\s*:\s*"([^"]+)"/.exec(data)?.[1] ?? "")

/** What a relay keeps of a final event too large to keep (past the capture limit): its usage. */
const USAGE_ONLY = "ledger.usage"

interface Event {
  type?: string
  usage?: unknown
  delta?: string
  response?: Record<string, unknown> & { output?: Array<unknown>; error?: { code?: string; message?: string } | null }
  item?: unknown
  output_index?: number
  error?: { code?: string | null; message?: string; type?: string; param?: string | null }
  code?: string | null
  message?: string
}

/** The error of a failed stream, as the caller got it. */
const eventError = (event: Event): ProviderError => {
  const error = event.error ?? event.response?.error ?? { code: event.code ?? null, message: event.message }
  return providerError(500, error?.message ?? "the provider failed mid-stream", (error as { type?: string } | undefined)?.type ?? "api_error", error?.code ?? null)
}

/**
 * The response a stream's events describe: the terminal event carries it whole; a stream cut before it is assembled
 * from the created response and the items that were done. Past the capture limit (`truncated`), the items whose done
 * event was not kept are assembled from their text deltas, with the usage of the final event.
 */
const assemble = (events: ReadonlyArray<string>, truncated = false): { response: Record<string, unknown> | null; error: ProviderError | null } => {
  let created: Record<string, unknown> | null = null
  const items: Array<unknown> = []
  const texts: Array<string> = []
  let usage: unknown = undefined
  let error: ProviderError | null = null
  for (const event of parsedEvents<Event>(events)) {
    switch (event.type) {
      case "response.created":
        created = event.response ?? null
        break
      case "response.output_item.done":
        items[event.output_index ?? items.length] = event.item
        break
      case "response.output_text.delta":
        if (truncated) texts[event.output_index ?? 0] = (texts[event.output_index ?? 0] ?? "") + (event.delta ?? "")
        break
      case USAGE_ONLY:
        usage = event.usage
        break
      case "response.completed":
      case "response.incomplete":
        return { response: event.response ?? null, error }
      case "response.failed":
        return { response: event.response ?? null, error: eventError(event) }
      case "error":
        error = eventError(event)
        break
    }
  }
  if (created === null) return { response: null, error }
  texts.forEach((text, index) => {
    items[index] ??= { type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text, annotations: [] }] }
  })
  const output = items.filter((item) => item !== undefined)
  return { response: { ...created, status: "incomplete", output, ...(usage === undefined ? {} : { usage }) }, error }
}

/** Relays a Responses event stream as it arrives; the events are assembled for the capture only when it asks. */
export class ResponsesRelay extends EventRelay {
  constructor() {
    super((onEvent) => new SseDecoder(onEvent))
  }

  protected override oversized(data: string): string | undefined {
    const usage = trailingUsage(data)
    return usage === undefined ? undefined : JSON.stringify({ type: USAGE_ONLY, usage })
  }

  protected relay(event: string, data: string): void {
    if (data === "[DONE]") return
    const type = typeOf(event, data)
    this.keep(data)
    this.emit(responsesEvent(type, data))
    if (TERMINAL.has(type)) this.complete = true
  }

  /** An error event (the OpenAI clients raise it) and the failed response Codex waits for. */
  fail(error: ProviderError): string {
    const body = { code: error.body.error.code ?? error.body.error.type, message: error.body.error.message }
    const errorEvent = JSON.stringify({ type: "error", error: { type: error.body.error.type, ...body, param: null } })
    const created = assemble(this.kept(), this.tail !== undefined).response ?? {}
    const failed = JSON.stringify({ type: "response.failed", response: { ...created, status: "failed", error: body } })
    this.keep(errorEvent, failed)
    return responsesEvent("error", errorEvent) + responsesEvent("response.failed", failed)
  }

  assembled(): StreamAnswer {
    const { response, error } = assemble(this.kept(), this.tail !== undefined)
    return { text: response === null ? "" : JSON.stringify(response), usage: null, error }
  }
}

/** Where a Responses provider is reached and how the caller's key is presented. */
interface ResponsesEndpoint {
  url(ctx: CallContext): string
  authHeaders(apiKey: string): Record<string, string>
}

const passThrough = (endpoint: ResponsesEndpoint): ProviderAdapter<ResponsesRequest> => ({
  prepare(request, ctx) {
    const body = withModel(ctx, request.model) ?? JSON.stringify({ ...request, model: ctx.model })
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "text/event-stream" : "application/json",
      ...(ctx.apiKey ? endpoint.authHeaders(ctx.apiKey) : {})
    }
    return { url: endpoint.url(ctx), headers, body }
  },
  // relayed as received; the builder reads the usage from it
  response: (bodyText) => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },
  stream: () => new ResponsesRelay(),
  error: openAIWireError
})

/** OpenAI and OpenAI-compatible upstreams: `{base}/responses` (the base ends with `/v1`). */
export const responsesToOpenAI = passThrough({ url: (ctx) => `${ctx.baseUrl}/responses`, authHeaders: bearerAuth })

/** Azure OpenAI's v1 API: `{resource}/openai/v1/responses`, the deployment as the model, the key in `api-key`. */
export const responsesToAzure = passThrough({ url: (ctx) => `${ctx.baseUrl}/openai/v1/responses`, authHeaders: (apiKey) => ({ "api-key": apiKey }) })
