/**
 * Google Gemini API (`{base}/v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`),
 * translated both ways. A streamed chunk has the same shape as a whole answer, so both go through one
 * translation (`translateChunk`).
 */
import { type Usage, usageFrom } from "../domain/usage.ts"
import {
  type ChatRequest,
  type FinishReason,
  maxTokensOf,
  parseArguments,
  parseDataUrl,
  resultObject,
  stopSequencesOf,
  systemTexts,
  type ToolChoice,
  toolCallId
} from "./chatCompletions.ts"
import { errorTypeFor, fallbackMessage, parseJsonBody, providerError, stringOrNull } from "./errors.ts"
import { SseDecoder } from "./sse.ts"
import { type AnswerSink, ChunkWriter, translatedAdapter, translatedStream, type TranslatedAdapter } from "./stream.ts"
import { type BlockWriter, toTurns } from "./turns.ts"
import type { CallContext, ProviderError, StreamTranslator } from "./types.ts"

/**
 * Gemini 3 refuses a replayed function call without the thought signature it was issued with. Callers that
 * dropped it (or histories from another model) get Google's documented placeholder, which skips the check.
 */
const SKIP_SIGNATURE = "skip_thought_signature_validator"

type Part =
  | { text: string }
  | { inlineData: { mimeType: string; data: string } }
  | { fileData: { fileUri: string; mimeType?: string } }
  | { functionCall: { name: string; args: object }; thoughtSignature: string }
  | { functionResponse: { name: string; response: object } }

const MIME_BY_EXTENSION: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  heic: "image/heic",
  heif: "image/heif",
  pdf: "application/pdf"
}

const mimeFromUrl = (url: string): string | undefined => {
  const path = url.split(/[?#]/, 1)[0]!
  return MIME_BY_EXTENSION[path.slice(path.lastIndexOf(".") + 1).toLowerCase()]
}

const parts: BlockWriter<Part> = {
  provider: "gemini",
  text: (text) => ({ text }),
  image: (url) => {
    const inline = parseDataUrl(url)
    if (inline) return { inlineData: { mimeType: inline.mediaType, data: inline.base64 } }
    const mimeType = mimeFromUrl(url)
    return { fileData: mimeType ? { fileUri: url, mimeType } : { fileUri: url } }
  },
  toolCall: (call) => ({
    functionCall: { name: call.function.name, args: parseArguments(call.function.arguments) },
    thoughtSignature: call.extra_content?.google?.thought_signature ?? SKIP_SIGNATURE
  }),
  toolResult: (_callId, name, text) => ({ functionResponse: { name, response: resultObject(text) } })
}

const functionCallingConfig = (choice: ToolChoice): object => {
  if (choice === "auto") return { mode: "AUTO" }
  if (choice === "required") return { mode: "ANY" }
  if (choice === "none") return { mode: "NONE" }
  return { mode: "ANY", allowedFunctionNames: [choice.function.name] }
}

const generationConfig = (request: ChatRequest): Record<string, unknown> => {
  const config: Record<string, unknown> = {}
  const maxTokens = maxTokensOf(request)
  if (maxTokens !== undefined) config.maxOutputTokens = maxTokens
  if (request.temperature != null) config.temperature = request.temperature
  if (request.top_p != null) config.topP = request.top_p
  const stop = stopSequencesOf(request)
  if (stop) config.stopSequences = stop
  if (request.seed != null) config.seed = request.seed
  if (request.presence_penalty != null) config.presencePenalty = request.presence_penalty
  if (request.frequency_penalty != null) config.frequencyPenalty = request.frequency_penalty
  const format = request.response_format
  if (format?.type === "json_object" || format?.type === "json_schema") {
    config.responseMimeType = "application/json"
    if (format.json_schema?.schema) config.responseJsonSchema = format.json_schema.schema
  }
  const budget = THINKING_BUDGET[request.reasoning_effort ?? ""]
  if (budget !== undefined) config.thinkingConfig = { thinkingBudget: budget, includeThoughts: true }
  return config
}

/** Thinking budget (tokens) for a reasoning effort; 0 turns thinking off where the model allows it. */
const THINKING_BUDGET: Record<string, number> = { none: 0, minimal: 512, low: 1024, medium: 8192, high: 24_576, xhigh: 32_768, max: 32_768 }

export const requestBody = (request: ChatRequest): Record<string, unknown> => {
  const body: Record<string, unknown> = {
    contents: toTurns(request.messages, parts).map((turn) => ({
      role: turn.role === "assistant" ? "model" : "user",
      parts: turn.blocks
    }))
  }
  const system = systemTexts(request.messages)
  if (system.length > 0) body.systemInstruction = { parts: system.map((text) => ({ text })) }
  const config = generationConfig(request)
  if (Object.keys(config).length > 0) body.generationConfig = config
  if (request.tools && request.tools.length > 0) {
    body.tools = [{
      functionDeclarations: request.tools.map((tool) => ({
        name: tool.function.name,
        ...(tool.function.description ? { description: tool.function.description } : {}),
        // full JSON Schema (the `parameters` field takes only an OpenAPI subset)
        ...(tool.function.parameters ? { parametersJsonSchema: tool.function.parameters } : {})
      }))
    }]
    if (request.tool_choice) body.toolConfig = { functionCallingConfig: functionCallingConfig(request.tool_choice) }
  }
  return body
}

const finishReason = (reason: string, calledTools: boolean): FinishReason => {
  switch (reason) {
    case "MAX_TOKENS":
      return "length"
    case "SAFETY":
    case "RECITATION":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
      return "content_filter"
    default: // STOP, OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL
      return calledTools ? "tool_calls" : "stop"
  }
}

interface UsageMetadata {
  promptTokenCount?: number
  candidatesTokenCount?: number
  cachedContentTokenCount?: number
  thoughtsTokenCount?: number
}

/** promptTokenCount includes the cached tokens; completion counts thinking, as chat-completions does. */
const toUsage = (meta: UsageMetadata): Usage => {
  const cached = meta.cachedContentTokenCount
  const thoughts = meta.thoughtsTokenCount
  return usageFrom({
    input: (meta.promptTokenCount ?? 0) - (cached ?? 0),
    output: (meta.candidatesTokenCount ?? 0) + (thoughts ?? 0),
    cacheRead: cached,
    reasoning: thoughts
  })
}

interface ResponsePart {
  text?: string
  thought?: boolean
  functionCall?: { id?: string; name: string; args?: unknown }
  thoughtSignature?: string
}

interface GenerateContentResponse {
  candidates?: Array<{ content?: { parts?: Array<ResponsePart> }; finishReason?: string }>
  promptFeedback?: { blockReason?: string }
  usageMetadata?: UsageMetadata
  modelVersion?: string
  responseId?: string
  error?: { code?: number; message?: string; status?: string }
}

/** Translates one response (a whole answer or one streamed chunk) through `writer`; returns the frames. */
class ChunkTranslator {
  private readonly writer: AnswerSink
  private tools = 0

  constructor(writer: AnswerSink) {
    this.writer = writer
  }

  translate(chunk: GenerateContentResponse): string {
    const writer = this.writer
    if (chunk.error) return writer.fail(geminiError(chunk.error.code ?? 500, chunk))
    let out = writer.start(chunk.responseId, chunk.modelVersion)
    const candidate = chunk.candidates?.[0]
    for (const part of candidate?.content?.parts ?? []) {
      if (part.functionCall) {
        const call = part.functionCall
        const extra = part.thoughtSignature ? { google: { thought_signature: part.thoughtSignature } } : undefined
        out += writer.toolCall(this.tools++, call.id ?? toolCallId(), call.name, JSON.stringify(call.args ?? {}), extra)
      } else if (part.text) {
        out += part.thought ? writer.reasoning(part.text) : writer.text(part.text)
      }
    }
    if (chunk.usageMetadata) writer.usage(toUsage(chunk.usageMetadata))
    if (candidate?.finishReason && candidate.finishReason !== "FINISH_REASON_UNSPECIFIED") {
      out += writer.finish(finishReason(candidate.finishReason, this.tools > 0))
    } else if (!candidate && chunk.promptFeedback?.blockReason) {
      out += writer.finish("content_filter") // the prompt itself was blocked: no candidate at all
    }
    return out
  }
}

const completion = (bodyText: string, ctx: CallContext) => {
  const writer = new ChunkWriter(ctx.model, false)
  new ChunkTranslator(writer).translate(JSON.parse(bodyText) as GenerateContentResponse)
  return { completion: writer.assembly.completion(), usage: writer.assembly.usage }
}

const streamTo = (_ctx: CallContext, sink: AnswerSink): StreamTranslator => {
  const chunks = new ChunkTranslator(sink)
  return translatedStream(
    sink,
    (onEvent) => new SseDecoder(onEvent),
    (_event, data) => chunks.translate(JSON.parse(data) as GenerateContentResponse)
  )
}

/** `{"error": {code, message, status}}`, sometimes wrapped in an array (streaming endpoint). */
export const geminiError = (status: number, body: unknown): ProviderError => {
  const error = (Array.isArray(body) ? body[0] : body)?.error as GenerateContentResponse["error"] | undefined
  if (error && typeof error.message === "string") {
    return providerError(status, error.message, errorTypeFor(status), stringOrNull(error.status))
  }
  return providerError(status, fallbackMessage(status, body as Record<string, unknown> | undefined, ""))
}

/** A Gemini error body (JSON or not) → a provider error. */
export const geminiBodyError = (status: number, bodyText: string): ProviderError => {
  const body = parseJsonBody(bodyText)
  return body === undefined ? providerError(status, fallbackMessage(status, undefined, bodyText)) : geminiError(status, body)
}

export const gemini: TranslatedAdapter = translatedAdapter({
  prepare(request, ctx) {
    const method = ctx.stream ? "streamGenerateContent?alt=sse" : "generateContent"
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "text/event-stream" : "application/json"
    }
    if (ctx.apiKey) headers["x-goog-api-key"] = ctx.apiKey
    return {
      url: `${ctx.baseUrl}/v1beta/models/${encodeURIComponent(ctx.model)}:${method}`,
      headers,
      body: JSON.stringify(requestBody(request))
    }
  },
  completion,
  streamTo,
  error: geminiBodyError
})
