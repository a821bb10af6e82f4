/**
 * Embeddings (the OpenAI API's shape) on each provider family that has them: the OpenAI family as they are; Gemini
 * (`batchEmbedContents`) and Bedrock's Titan and Cohere models (InvokeModel) translated both ways.
 *
 * The caller gets the vectors; the capture never does. It keeps what was embedded — the request — and a summary of
 * the answer: how many vectors, of how many dimensions, and the usage the provider reported.
 */
import { fromOpenAIUsage, type OpenAIUsage } from "../../domain/usage.ts"
import { bedrock } from "../../providers/bedrock.ts"
import { opensObject, withModel } from "../../providers/body.ts"
import { gemini } from "../../providers/gemini.ts"
import { type Answer, type CallContext, type ProviderAdapter, UnsupportedRequest, type UpstreamHeaders } from "../../providers/index.ts"
import { bearerAuth, openAIWireError } from "../../providers/openai.ts"

export interface EmbeddingsRequest {
  readonly model: string
  readonly input: string | ReadonlyArray<string> | ReadonlyArray<number> | ReadonlyArray<ReadonlyArray<number>>
  readonly dimensions?: number
  readonly encoding_format?: string
  readonly user?: string
}

/** What the capture keeps of an answer. */
const summary = (model: string, vectors: number, dimensions: number | undefined, usage: OpenAIUsage | undefined): string =>
  JSON.stringify({ object: "list", model, data: vectors, ...(dimensions === undefined ? {} : { dimensions }), ...(usage === undefined ? {} : { usage }) })

/**
 * A translated answer in the OpenAI shape (vectors as base64 float32 where the caller asked for that encoding, as the
 * OpenAI SDKs do by default), and its summary.
 */
const answerOf = (
  request: EmbeddingsRequest,
  model: string,
  vectors: ReadonlyArray<ReadonlyArray<number>>,
  tokens: number | undefined
): Answer => {
  const usage = tokens === undefined ? undefined : { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens }
  const encode = (vector: ReadonlyArray<number>) =>
    request.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector
  return {
    text: JSON.stringify({
      object: "list",
      data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding: encode(embedding) })),
      model,
      ...(usage === undefined ? {} : { usage: { prompt_tokens: tokens, total_tokens: tokens } })
    }),
    usage: fromOpenAIUsage(usage),
    captured: summary(model, vectors.length, vectors[0]?.length, usage)
  }
}

/**
 * The summary of an OpenAI embeddings answer, read without parsing the vectors (a batch's answer runs to megabytes):
 * the vectors are counted by their `"index"`, the dimensions from the first float array, the usage parsed alone.
 */
const summarise = (text: string, ctx: CallContext): string => {
  const vectors = text.match(/"index"\s*:/g)?.length ?? 0
  const first = /"embedding"\s*:\s*\[([^\]]*)\]/.exec(text)
  const usage = /"usage"\s*:\s*(\{[^{}]*\})/.exec(text)
  let parsed: OpenAIUsage | undefined
  try {
    parsed = usage === null ? undefined : JSON.parse(usage[1]!) as OpenAIUsage
  } catch {
    parsed = undefined
  }
  const model = /"model"\s*:\s*"([^"]*)"/.exec(text)?.[1] ?? ctx.model
  return summary(model, vectors, first === null ? undefined : first[1]!.split(",").length, parsed)
}

/** Embeddings are never streamed. */
const noStream = (): never => {
  throw new Error("embeddings are not streamed")
}

const passThrough = (url: (ctx: CallContext) => string, authHeaders: (key: string) => Record<string, string>): ProviderAdapter<EmbeddingsRequest> => ({
  prepare: (request, ctx) => ({
    url: url(ctx),
    headers: { "content-type": "application/json", accept: "application/json", ...(ctx.apiKey ? authHeaders(ctx.apiKey) : {}) },
    body: withModel(ctx, request.model) ?? JSON.stringify({ ...request, model: ctx.model })
  }),
  response: (text, ctx) => {
    if (!opensObject(text)) throw new Error("the answer is not a JSON object")
    // the usage stays in the summary for the builder to read
    return { text, usage: null, captured: summarise(text, ctx) }
  },
  stream: noStream,
  error: openAIWireError
})

export const embeddingsToOpenAI = passThrough((ctx) => `${ctx.baseUrl}/embeddings`, bearerAuth)

/** Azure OpenAI's v1 API: the deployment as the model, the key in `api-key`. */
export const embeddingsToAzure = passThrough((ctx) => `${ctx.baseUrl}/openai/v1/embeddings`, (key) => ({ "api-key": key }))

/** The inputs as texts; token arrays are the OpenAI family's own and have no translation. */
const texts = (request: EmbeddingsRequest, provider: string): ReadonlyArray<string> => {
  const input = request.input
  if (typeof input === "string") return [input]
  if (input.every((item) => typeof item === "string")) return input as ReadonlyArray<string>
  throw new UnsupportedRequest(`${provider} embeds texts: token arrays are for the OpenAI family`, "input")
}

/**
 * Gemini's batchEmbedContents: one request per input; the answer reports no usage, so the call stays unpriced.
 * One adapter per request: the answer is written in the encoding the request asked for.
 */
export const embeddingsToGemini = (request: EmbeddingsRequest): ProviderAdapter<EmbeddingsRequest> => ({
  prepare(_request, ctx) {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (ctx.apiKey) headers["x-goog-api-key"] = ctx.apiKey
    return {
      url: `${ctx.baseUrl}/v1beta/models/${encodeURIComponent(ctx.model)}:batchEmbedContents`,
      headers,
      body: JSON.stringify({
        requests: texts(request, "gemini").map((text) => ({
          model: `models/${ctx.model}`,
          content: { parts: [{ text }] },
          ...(request.dimensions === undefined ? {} : { outputDimensionality: request.dimensions })
        }))
      })
    }
  },
  response: (text, ctx) => {
    const body = JSON.parse(text) as { embeddings?: Array<{ values?: Array<number> }>; usageMetadata?: { promptTokenCount?: number } }
    return answerOf(request, ctx.model, (body.embeddings ?? []).map((embedding) => embedding.values ?? []), body.usageMetadata?.promptTokenCount)
  },
  stream: noStream,
  error: gemini.error
})

/** Bedrock counts the tokens of an InvokeModel call in a header (Cohere's body has no usage). */
const headerTokens = (headers: UpstreamHeaders | undefined): number | undefined => {
  const value = headers?.["x-amzn-bedrock-input-token-count"]
  const count = typeof value === "string" ? Number(value) : NaN
  return Number.isFinite(count) ? count : undefined
}

const isTitan = (model: string) => /(?:^|\.)amazon\.titan-embed/.test(model)

/** Titan (one text a call) or Cohere (up to 96 texts) through InvokeModel; one adapter per request, as for Gemini. */
export const embeddingsToBedrock = (request: EmbeddingsRequest): ProviderAdapter<EmbeddingsRequest> => ({
  prepare(_request, ctx) {
    const inputs = texts(request, "bedrock")
    let body: object
    if (isTitan(ctx.model)) {
      if (inputs.length !== 1) throw new UnsupportedRequest(`${ctx.model} embeds one input per call; send one text`, "input")
      body = { inputText: inputs[0], ...(request.dimensions === undefined ? {} : { dimensions: request.dimensions }), normalize: true }
    } else if (/(?:^|\.)cohere\.embed/.test(ctx.model)) {
      body = { texts: inputs, input_type: "search_document" }
    } else {
      throw new UnsupportedRequest(`bedrock/${ctx.model} is not an embeddings model the gateway knows (amazon.titan-embed-…, cohere.embed-…)`, "model")
    }
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (ctx.apiKey) headers.authorization = `Bearer ${ctx.apiKey}`
    return { url: `${ctx.baseUrl}/model/${encodeURIComponent(ctx.model)}/invoke`, headers, body: JSON.stringify(body) }
  },
  response: (text, ctx, headers) => {
    const body = JSON.parse(text) as { embedding?: Array<number>; inputTextTokenCount?: number; embeddings?: Array<Array<number>> }
    const vectors = isTitan(ctx.model) ? [body.embedding ?? []] : body.embeddings ?? []
    return answerOf(request, ctx.model, vectors, body.inputTextTokenCount ?? headerTokens(headers))
  },
  stream: noStream,
  error: bedrock.error
})
