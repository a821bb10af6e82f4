/**
 * `POST /v1/responses` (the OpenAI Responses API: Codex, the OpenAI Agents SDK).
 *
 * A bare model goes to OpenAI; `azure/` and named upstreams speak the API themselves and get the caller's body as it
 * came. `anthropic/`, `gemini/` and `bedrock/` are reached through the chat form, and since they store nothing, the
 * gateway keeps their chains (ResponseChains): a turn naming a `previous_response_id` is sent with the turns before
 * it, and its capture carries them.
 */
import type { ProviderType } from "../../domain/capture.ts"
import { gatewayError } from "../GatewayServer.ts"
import { adapterFor, type CallContext, type ProviderAdapter, type ProviderError } from "../../providers/index.ts"
import { responsesViaChat } from "../responses/translated.ts"
import { responsesToAzure, responsesToOpenAI } from "../responses/openai.ts"
import { inputItems, type ResponseItem, type ResponsesRequest } from "../responses/request.ts"
import type { ResponseChains } from "../responses/ResponseChains.ts"
import { type CallPlan, callContext, isObject, openAIErrorText, optionalBoolean, type PlanInput, routed, type Surface } from "./surface.ts"

export const RESPONSES = "POST /v1/responses"

const PASSED_THROUGH: Partial<Record<ProviderType, ProviderAdapter<ResponsesRequest>>> = {
  openai: responsesToOpenAI,
  openai_compatible: responsesToOpenAI,
  azure: responsesToAzure
}

/** The checks the gateway makes itself; the rest is the provider's to judge. */
const validate = (request: Record<string, unknown>): ProviderError | undefined => {
  const input = request.input
  if (input !== undefined && typeof input !== "string" && !Array.isArray(input)) {
    return gatewayError(400, "input must be a string or an array of items", "invalid_parameter", "input")
  }
  if (Array.isArray(input)) {
    const bad = input.findIndex((item) => !isObject(item))
    if (bad !== -1) return gatewayError(400, `input[${bad}] must be an object (an item)`, "invalid_parameter", `input[${bad}]`)
  }
  const previous = request.previous_response_id
  if (previous !== undefined && previous !== null && (typeof previous !== "string" || previous === "")) {
    return gatewayError(400, "previous_response_id must be a response id", "invalid_parameter", "previous_response_id")
  }
  if (request.tools !== undefined && request.tools !== null) {
    if (!Array.isArray(request.tools)) return gatewayError(400, "tools must be an array", "invalid_parameter", "tools")
    const bad = request.tools.findIndex((tool) => !isObject(tool))
    if (bad !== -1) return gatewayError(400, `tools[${bad}] must be an object (a tool)`, "invalid_parameter", `tools[${bad}]`)
  }
  return undefined
}

export const notFoundResponse = (id: string): ProviderError =>
  gatewayError(400, `Previous response with id '${id.slice(0, 200)}' not found.`, "previous_response_not_found", "previous_response_id", "invalid_request_error")

/**
 * The adapter and chain of a call: pass-through for the providers that speak Responses; for the others, the turns
 * before it from the gateway's own chain, and its answer kept for the next turn.
 */
export const responsesPlan = (
  request: ResponsesRequest,
  route: CallPlan["route"],
  ctx: CallContext,
  chains: ResponseChains["Service"]
): CallPlan | ProviderError => {
  const passedThrough = PASSED_THROUGH[route.type]
  if (passedThrough !== undefined) return { route, adapter: passedThrough, request, ctx }
  const previous = request.previous_response_id ?? undefined
  const earlier: ReadonlyArray<ResponseItem> | undefined = previous === undefined ? [] : chains.get(previous)
  if (earlier === undefined) return notFoundResponse(previous!)
  const input = inputItems(request)
  const context = earlier.length === 0 ? undefined : JSON.stringify(earlier)
  return {
    route,
    adapter: responsesViaChat(request, earlier, adapterFor(route.type), route.type),
    request,
    ctx,
    context,
    answered: (text) => {
      const response = JSON.parse(text) as { id?: string; status?: string; output?: ReadonlyArray<ResponseItem> }
      if (response.id === undefined || (response.status !== "completed" && response.status !== "incomplete")) return
      const bytes = (context?.length ?? 0) + (ctx.requestText?.length ?? 0) + text.length
      chains.put(response.id, [...earlier, ...input, ...(response.output ?? [])], bytes)
    }
  }
}

export const responsesSurface = (chains: ResponseChains["Service"]): Surface => ({
  route: RESPONSES,
  api: "responses",
  apiKeyHeader: false,
  shape: "the Responses shape",
  errorText: openAIErrorText,
  plan(body, input: PlanInput) {
    const checked = routed(body, input, "openai", validate)
    if ("status" in checked) return checked
    const stream = optionalBoolean(checked.request, "stream")
    if (typeof stream !== "boolean") return stream
    const { request, target } = checked
    return responsesPlan(request as unknown as ResponsesRequest, target.route, callContext(target, input, { stream }), chains)
  }
})
