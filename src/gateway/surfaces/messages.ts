/**
 * `POST /v1/messages` (Anthropic Messages: Claude Code, the Anthropic SDKs) and `POST /v1/messages/count_tokens`.
 *
 * A bare model goes to Anthropic, which gets the caller's body and headers as they came. `bedrock/` reaches Anthropic
 * models on Bedrock through InvokeModel, which takes the Messages body itself; Bedrock's other models, Gemini and the
 * OpenAI family are reached through the chat form. Errors are Anthropic's shape; the Gateway Key may come as
 * `x-api-key`, Anthropic clients' default.
 */
import type { ProviderType } from "../../domain/capture.ts"
import { gatewayError } from "../GatewayServer.ts"
import { messagesToAnthropic } from "../messages/anthropic.ts"
import { messagesToBedrock } from "../messages/bedrock.ts"
import { completionToMessage, MessagesSink, messagesToChat } from "../messages/translated.ts"
import { countTokensAdapter } from "../messages/countTokens.ts"
import { anthropicErrorBody } from "../messages/errors.ts"
import type { MessagesRequest } from "../messages/request.ts"
import { bedrockModelIsClaude } from "../../providers/bedrock.ts"
import { adapterFor, type ProviderAdapter, type ProviderError } from "../../providers/index.ts"
import { type ChatCodec, viaChat } from "../../providers/viaChat.ts"
import type { ProviderRoute } from "../../providers/routing.ts"
import { callContext, header, isObject, optionalBoolean, type PlanInput, routed, type Surface } from "./surface.ts"

export const MESSAGES = "POST /v1/messages"
export const COUNT_TOKENS = "POST /v1/messages/count_tokens"

const messagesCodec: ChatCodec<MessagesRequest> = {
  toChat: messagesToChat,
  fromCompletion: completionToMessage,
  sink: (ctx) => new MessagesSink(ctx)
}

const throughChat = new Map<ProviderType, ProviderAdapter<MessagesRequest>>(
  (["gemini", "bedrock", "openai", "azure", "openai_compatible"] as const).map((type) => [type, viaChat(messagesCodec, adapterFor(type))])
)

const messagesAdapter = (route: ProviderRoute, model: string): ProviderAdapter<MessagesRequest> => {
  if (route.type === "anthropic") return messagesToAnthropic
  if (route.type === "bedrock" && bedrockModelIsClaude(model)) return messagesToBedrock
  return throughChat.get(route.type)!
}

/** The checks the gateway makes itself; the rest is the provider's to judge. */
const validate = (request: Record<string, unknown>): ProviderError | undefined => {
  const messages = request.messages
  if (!Array.isArray(messages) || messages.length === 0) {
    return gatewayError(400, "messages must be a non-empty array", messages === undefined ? "missing_parameter" : "invalid_parameter", "messages")
  }
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as { role?: unknown; content?: unknown } | null
    if (!isObject(message) || typeof message.role !== "string") {
      return gatewayError(400, `messages.${i} must be an object with a string role`, "invalid_parameter", `messages.${i}`)
    }
    if (typeof message.content !== "string" && !Array.isArray(message.content)) {
      return gatewayError(400, `messages.${i}.content must be a string or an array of content blocks`, "invalid_parameter", `messages.${i}.content`)
    }
  }
  return undefined
}

/** `anthropic-version` and `anthropic-beta` go to Anthropic as the caller sent them. */
const passHeaders = (input: PlanInput): Record<string, string> => {
  const headers: Record<string, string> = {}
  const version = header(input.req, "anthropic-version")
  if (version !== undefined) headers["anthropic-version"] = version
  const beta = header(input.req, "anthropic-beta")
  if (beta !== undefined) headers["anthropic-beta"] = beta
  return headers
}

const plan = (body: unknown, input: PlanInput, count: boolean) => {
  const checked = routed(body, input, "anthropic", validate)
  if ("status" in checked) return checked
  const { request, target } = checked
  const stream = count ? false : optionalBoolean(request, "stream")
  if (typeof stream !== "boolean") return stream
  const adapter = count ? countTokensAdapter(target.route.type) : messagesAdapter(target.route, target.model)
  if (adapter === undefined) {
    return gatewayError(
      404,
      `${target.route.name} has no token count for Messages: count_tokens is available for anthropic, bedrock (Anthropic models) and gemini`,
      "not_found",
      "model",
      "not_found_error"
    )
  }
  const ctx = callContext(target, input, { stream, passHeaders: passHeaders(input) })
  return { route: target.route, adapter, request: request as unknown as MessagesRequest, ctx }
}

export const messagesSurface: Surface = {
  route: MESSAGES,
  api: "messages",
  apiKeyHeader: true,
  shape: "the Messages shape",
  errorText: anthropicErrorBody,
  plan: (body, input) => plan(body, input, false)
}

/** Counting tokens calls no model: forwarded, not recorded. */
export const countTokensSurface: Surface = {
  route: COUNT_TOKENS,
  api: null,
  apiKeyHeader: true,
  shape: "the Messages shape",
  errorText: anthropicErrorBody,
  plan: (body, input) => plan(body, input, true)
}
