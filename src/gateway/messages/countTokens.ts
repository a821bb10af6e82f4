/**
 * `POST /v1/messages/count_tokens`: forwarded to the provider's own token count — Anthropic's, Bedrock's CountTokens
 * for Anthropic models, Gemini's countTokens — and answered as Anthropic does, `{"input_tokens": N}`. Where the
 * provider has none the answer is a 404, never a made-up count: Claude Code then estimates itself, and a wrong count
 * (LiteLLM's `0`) would stop it from ever compacting its context.
 */
import { anthropicError } from "../../providers/anthropic.ts"
import { bedrock, bedrockModelIsClaude } from "../../providers/bedrock.ts"
import { opensObject, withModel } from "../../providers/body.ts"
import { gemini, requestBody } from "../../providers/gemini.ts"
import { type ProviderAdapter, UnsupportedRequest } from "../../providers/index.ts"
import type { ProviderType } from "../../domain/capture.ts"
import { anthropicHeaders } from "./anthropic.ts"
import { messagesToChat } from "./translated.ts"
import type { MessagesRequest } from "./request.ts"

/** Count answers are never streamed. */
const noStream = (): never => {
  throw new Error("token counts are not streamed")
}

/** A provider's count, `{"<field>": N}`, as Anthropic's answer. */
const countAnswer = (field: string) => (bodyText: string) => {
  const count = (JSON.parse(bodyText) as Record<string, unknown>)[field]
  if (typeof count !== "number") throw new Error(`the answer has no ${field}`)
  return { text: JSON.stringify({ input_tokens: count }), usage: null }
}

const anthropicCount: ProviderAdapter<MessagesRequest> = {
  prepare: (request, ctx) => ({
    url: `${ctx.baseUrl}/v1/messages/count_tokens`,
    headers: anthropicHeaders({ ...ctx, stream: false }, (key) => ({ "x-api-key": key })),
    body: withModel(ctx, request.model) ?? JSON.stringify({ ...request, model: ctx.model })
  }),
  response: (bodyText) => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },
  stream: noStream,
  error: anthropicError
}

/** Bedrock counts for foundation models only: an inference profile (`us.anthropic.…`) is counted by its model. */
const foundationModel = (model: string) => model.slice(model.lastIndexOf("/") + 1).replace(/^(?:us|eu|apac|global|us-gov|ca|jp|au)\./, "")

const bedrockCount: ProviderAdapter<MessagesRequest> = {
  prepare(request, ctx) {
    if (!bedrockModelIsClaude(ctx.model)) {
      throw new UnsupportedRequest(`bedrock/${ctx.model} is not an Anthropic model: /v1/messages/count_tokens counts for Anthropic models on Bedrock`, "model")
    }
    const { model: _model, ...rest } = request
    // InvokeModel's body, which requires max_tokens; a count request has none
    const invoke = { anthropic_version: "bedrock-2023-05-31", max_tokens: 1, ...rest }
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (ctx.apiKey) headers.authorization = `Bearer ${ctx.apiKey}`
    return {
      url: `${ctx.baseUrl}/model/${encodeURIComponent(foundationModel(ctx.model))}/count-tokens`,
      headers,
      body: JSON.stringify({ input: { invokeModel: { body: Buffer.from(JSON.stringify(invoke)).toString("base64") } } })
    }
  },
  response: countAnswer("inputTokens"),
  stream: noStream,
  error: bedrock.error
}

const geminiCount: ProviderAdapter<MessagesRequest> = {
  prepare(request, ctx) {
    const chat = messagesToChat(request, { ...ctx, stream: false })
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (ctx.apiKey) headers["x-goog-api-key"] = ctx.apiKey
    const model = encodeURIComponent(ctx.model)
    return {
      url: `${ctx.baseUrl}/v1beta/models/${model}:countTokens`,
      headers,
      // system instructions and tools are counted only inside a whole generateContent request
      body: JSON.stringify({ generateContentRequest: { model: `models/${ctx.model}`, ...requestBody(chat) } })
    }
  },
  response: countAnswer("totalTokens"),
  stream: noStream,
  error: gemini.error
}

/** The token count of a provider family, or undefined where it has none. */
export const countTokensAdapter = (type: ProviderType): ProviderAdapter<MessagesRequest> | undefined => {
  switch (type) {
    case "anthropic":
      return anthropicCount
    case "bedrock":
      return bedrockCount
    case "gemini":
      return geminiCount
    default:
      return undefined
  }
}

