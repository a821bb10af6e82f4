/**
 * `POST /v1/chat/completions`: the gateway's common interface. The model is always `provider/model-name`; every
 * provider family is reached (OpenAI-wire providers as they are, the others translated).
 */
import { gatewayError } from "../GatewayServer.ts"
import type { ChatRequest, ProviderError } from "../../providers/index.ts"
import { callContext, isObject, openAIErrorText, optionalBoolean, type PlanInput, routed, type Surface } from "./surface.ts"

export const CHAT_COMPLETIONS = "POST /v1/chat/completions"

/** The checks the gateway makes itself; everything else is the provider's to judge. */
const validate = (request: Record<string, unknown>): ProviderError | undefined => {
  const messages = request.messages
  if (!Array.isArray(messages) || messages.length === 0) {
    return gatewayError(400, "messages must be a non-empty array", messages === undefined ? "missing_parameter" : "invalid_parameter", "messages")
  }
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as { role?: unknown } | null
    if (typeof message !== "object" || message === null || typeof message.role !== "string") {
      return gatewayError(400, `messages[${i}] must be an object with a string role`, "invalid_parameter", `messages[${i}]`)
    }
  }
  const stream = optionalBoolean(request, "stream")
  if (typeof stream !== "boolean") return stream
  const options = request.stream_options
  if (options !== undefined && options !== null && !isObject(options)) {
    return gatewayError(400, "stream_options must be an object", "invalid_parameter", "stream_options")
  }
  return undefined
}

export const chatSurface: Surface = {
  route: CHAT_COMPLETIONS,
  api: "chat",
  apiKeyHeader: false,
  shape: "the chat-completions shape",
  errorText: openAIErrorText,
  plan(body, input: PlanInput) {
    const checked = routed(body, input, undefined, validate)
    if ("status" in checked) return checked
    const { target } = checked
    const request = checked.request as unknown as ChatRequest
    const ctx = callContext(target, input, { stream: request.stream === true, includeUsage: request.stream_options?.include_usage === true })
    return { route: target.route, adapter: target.route.adapter, request, ctx }
  }
}
