/**
 * One local HTTP server speaking the wire formats of every provider family the gateway supports, for tests
 * and benchmarks. It never reaches the network.
 *
 * Base URLs (see `baseUrls`): OpenAI `{url}/v1`, OpenAI-compatible `{url}/compat/v1` (no key required),
 * Azure, Anthropic, Gemini and Bedrock at `{url}` with their own paths.
 *
 * Behaviour is scripted by markers in the text of the last user message:
 *   [[tool]]          answer with one call of the first declared tool (or `lookup`)
 *   [[tools]]         answer with two parallel tool calls
 *   [[think]]         include reasoning (Anthropic thinking, Gemini thought part, Bedrock reasoningContent,
 *                     `reasoning_content` for OpenAI-type)
 *   [[refuse]]        refuse (Anthropic `refusal`, Gemini SAFETY, Bedrock content_filtered, OpenAI `refusal`)
 *   [[truncate]]      stop at the token limit
 *   [[error:429]]     answer that HTTP status with the provider's error body
 *   [[stream-error]]  streams only: fail after the first text chunk with the provider's mid-stream error
 *   [[slow:200]]      wait that many ms before answering
 * otherwise the answer is `Fake answer to: <the user text>`. When the last message is a tool result, the answer
 * is `Tool said: <result>` whatever the markers earlier in the conversation, so scripted tool loops end.
 * A missing provider key answers 401 (except OpenAI-compatible). Every request is recorded.
 *
 * Embeddings: `POST {openai}/embeddings` and `{openai_compatible}/embeddings` answer each input with a
 * deterministic bag-of-words vector of `dimensions` (default 1536), L2-normalised, so texts sharing words are
 * close; an input containing [[embeddings-error:N]] fails the call with that status.
 */
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"

export type FakeProviderType = "openai" | "azure" | "openai_compatible" | "anthropic" | "gemini" | "bedrock"

export interface RecordedRequest {
  readonly provider: FakeProviderType
  readonly method: string
  /** path and query */
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: any
}

export interface FakeProviderOptions {
  /** pause between streamed chunks, ms (default 2; 0 for benchmarks) */
  readonly chunkDelayMs?: number
  /** keep every request in `requests` (default true; off for benchmarks) */
  readonly record?: boolean
}

export interface FakeProviders {
  readonly url: string
  /** base URL to configure for each provider type */
  readonly baseUrls: Record<FakeProviderType, string>
  readonly requests: Array<RecordedRequest>
  /** requests received for one provider type */
  requestsOf(provider: FakeProviderType): Array<RecordedRequest>
  close(): Promise<void>
}

/** Cache counts reported on every answer of the providers that have a prompt cache. */
export const FAKE_CACHE_READ_TOKENS = 128
export const FAKE_CACHE_WRITE_TOKENS = 64
export const FAKE_REASONING = "Thinking it over step by step."
export const FAKE_REFUSAL = "I can't help with that."

// ---------------------------------------------------------------------------------------------------------
// Script: what to answer, from the request

interface Script {
  readonly text: string
  readonly reasoning: string | null
  readonly toolCalls: Array<{ id: string; name: string; args: Record<string, unknown> }>
  readonly finish: "stop" | "length" | "tool" | "refuse"
  readonly errorStatus: number | null
  readonly streamError: boolean
  readonly slowMs: number
  readonly usage: { input: number; output: number }
}

/** What the provider-specific reader extracts from a request. */
interface Prompt {
  /** text of the last message, when it is a user message */
  readonly userText: string
  /** the tool result, when the last message is one */
  readonly toolResult: string | null
  readonly toolNames: Array<string>
  /** size of the request body, for a deterministic prompt token count */
  readonly bodyLength: number
}

const MARKER = /\[\[([a-z-]+)(?::(\d+))?\]\]/g

const script = (prompt: Prompt): Script => {
  const markers = new Map<string, number>()
  if (prompt.toolResult === null) {
    for (const match of prompt.userText.matchAll(MARKER)) markers.set(match[1]!, Number(match[2] ?? 0))
  }
  const subject = prompt.userText.replace(MARKER, "").trim().slice(0, 80)
  const names = prompt.toolNames.length > 0 ? prompt.toolNames : ["lookup"]
  const toolCalls = markers.has("tools")
    ? [
      { id: "call_fake_1", name: names[0]!, args: { query: "first" } },
      { id: "call_fake_2", name: names[1] ?? names[0]!, args: { query: "second" } }
    ]
    : markers.has("tool")
    ? [{ id: "call_fake_1", name: names[0]!, args: { query: subject || "anything" } }]
    : []
  const refuse = markers.has("refuse")
  const text = toolCalls.length > 0 || refuse
    ? ""
    : prompt.toolResult !== null
    ? `Tool said: ${prompt.toolResult.slice(0, 80)}`
    : markers.has("truncate")
    ? "This answer stops before it is"
    : `Fake answer to: ${subject || "nothing"}`
  const reasoning = markers.has("think") ? FAKE_REASONING : null
  return {
    text,
    reasoning,
    toolCalls,
    finish: refuse ? "refuse" : toolCalls.length > 0 ? "tool" : markers.has("truncate") ? "length" : "stop",
    errorStatus: markers.has("error") ? markers.get("error")! || 500 : null,
    streamError: markers.has("stream-error"),
    slowMs: markers.get("slow") ?? 0,
    usage: {
      input: 8 + Math.ceil(prompt.bodyLength / 4),
      output: Math.ceil((text.length + (reasoning?.length ?? 0)) / 4) + 12 * toolCalls.length + (refuse ? 6 : 0)
    }
  }
}

/** The answer text in a few pieces, so streams have several chunks. */
const pieces = (text: string): Array<string> => text.match(/\S+\s*/g) ?? []

const textOfOpenAI = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.filter((p) => p?.type === "text").map((p) => p.text).join("")
    : ""

// ---------------------------------------------------------------------------------------------------------
// Readers: each provider's request → Prompt

const readOpenAI = (body: any, length: number): Prompt => {
  const last = body.messages?.at(-1)
  return {
    userText: last?.role === "user" ? textOfOpenAI(last.content) : "",
    toolResult: last?.role === "tool" ? textOfOpenAI(last.content) : null,
    toolNames: (body.tools ?? []).map((t: any) => t.function?.name),
    bodyLength: length
  }
}

const readAnthropic = (body: any, length: number): Prompt => {
  const last = body.messages?.at(-1)
  const blocks: Array<any> = typeof last?.content === "string" ? [{ type: "text", text: last.content }] : last?.content ?? []
  const result = blocks.find((b) => b.type === "tool_result")
  return {
    userText: blocks.filter((b) => b.type === "text").map((b) => b.text).join(""),
    toolResult: result ? (typeof result.content === "string" ? result.content : JSON.stringify(result.content)) : null,
    toolNames: (body.tools ?? []).map((t: any) => t.name),
    bodyLength: length
  }
}

const readGemini = (body: any, length: number): Prompt => {
  const parts: Array<any> = body.contents?.at(-1)?.parts ?? []
  const result = parts.find((p) => p.functionResponse)
  return {
    userText: parts.filter((p) => typeof p.text === "string").map((p) => p.text).join(""),
    toolResult: result ? JSON.stringify(result.functionResponse.response) : null,
    toolNames: (body.tools?.[0]?.functionDeclarations ?? []).map((f: any) => f.name),
    bodyLength: length
  }
}

const readBedrock = (body: any, length: number): Prompt => {
  const blocks: Array<any> = body.messages?.at(-1)?.content ?? []
  const result = blocks.find((b) => b.toolResult)
  return {
    userText: blocks.filter((b) => typeof b.text === "string").map((b) => b.text).join(""),
    toolResult: result ? result.toolResult.content.map((c: any) => c.text ?? JSON.stringify(c.json)).join("") : null,
    toolNames: (body.toolConfig?.tools ?? []).map((t: any) => t.toolSpec?.name),
    bodyLength: length
  }
}

// ---------------------------------------------------------------------------------------------------------
// Writers

const nowSeconds = () => Math.floor(Date.now() / 1000)

interface Out {
  readonly res: ServerResponse
  readonly delayMs: number
}

const json = (out: Out, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  const text = JSON.stringify(body)
  out.res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  out.res.end(text)
}

/** Writes stream parts with the configured pause between them. */
const streamParts = async (out: Out, contentType: string, parts: Iterable<string | Uint8Array>): Promise<void> => {
  out.res.writeHead(200, { "content-type": contentType, "cache-control": "no-cache" })
  for (const part of parts) {
    if (out.res.destroyed) return
    out.res.write(part)
    if (out.delayMs > 0) await sleep(out.delayMs)
  }
  out.res.end()
}

// --- OpenAI wire (OpenAI, Azure, compatible) ---

const openAIUsage = (s: Script) => ({
  prompt_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS,
  completion_tokens: s.usage.output,
  total_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS + s.usage.output,
  prompt_tokens_details: { cached_tokens: FAKE_CACHE_READ_TOKENS },
  completion_tokens_details: { reasoning_tokens: 0 }
})

const openAIFinish = { stop: "stop", length: "length", tool: "tool_calls", refuse: "stop" } as const

const openAICompletion = (s: Script, model: string) => ({
  id: "chatcmpl-fake",
  object: "chat.completion",
  created: nowSeconds(),
  model,
  choices: [{
    index: 0,
    message: {
      role: "assistant",
      content: s.finish === "refuse" || s.toolCalls.length > 0 ? null : s.text,
      refusal: s.finish === "refuse" ? FAKE_REFUSAL : null,
      ...(s.reasoning ? { reasoning_content: s.reasoning } : {}),
      ...(s.toolCalls.length > 0
        ? {
          tool_calls: s.toolCalls.map((c) => ({
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: JSON.stringify(c.args) }
          }))
        }
        : {})
    },
    logprobs: null,
    finish_reason: openAIFinish[s.finish]
  }],
  usage: openAIUsage(s)
})

function* openAIStream(s: Script, model: string, includeUsage: boolean, azure: boolean): Generator<string> {
  const head = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: nowSeconds(), model }
  const frame = (body: object) => `data: ${JSON.stringify(body)}\n\n`
  const chunk = (delta: object, finish: string | null = null) =>
    frame({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
  // Azure opens with the prompt filter results, a chunk with no choices that callers do receive
  if (azure) yield frame({ ...head, id: "", choices: [], prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }] })
  yield chunk({ role: "assistant", content: "" })
  if (s.reasoning) yield chunk({ reasoning_content: s.reasoning })
  if (s.finish === "refuse") yield chunk({ refusal: FAKE_REFUSAL })
  for (const [i, piece] of pieces(s.text).entries()) {
    yield chunk({ content: piece })
    if (i === 0 && s.streamError) {
      yield frame({ error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } })
      return
    }
  }
  for (const [index, call] of s.toolCalls.entries()) {
    const args = JSON.stringify(call.args)
    yield chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] })
    yield chunk({ tool_calls: [{ index, function: { arguments: args.slice(0, 5) } }] })
    yield chunk({ tool_calls: [{ index, function: { arguments: args.slice(5) } }] })
  }
  yield chunk({}, openAIFinish[s.finish])
  if (includeUsage) yield frame({ ...head, choices: [], usage: openAIUsage(s) })
  yield "data: [DONE]\n\n"
}

const openAIErrorBody = (provider: FakeProviderType, status: number) => {
  const message = `fake ${provider} error ${status}`
  if (provider === "openai_compatible") return { error: message } // Ollama's shape
  if (provider === "azure") return { error: { code: String(status), message } }
  return {
    error: {
      message,
      type: status === 429 ? "requests" : status === 401 ? "invalid_request_error" : "server_error",
      param: null,
      code: status === 429 ? "rate_limit_exceeded" : status === 401 ? "invalid_api_key" : null
    }
  }
}

// --- Anthropic ---

const anthropicUsage = (s: Script, outputTokens = s.usage.output) => ({
  input_tokens: s.usage.input,
  cache_creation_input_tokens: FAKE_CACHE_WRITE_TOKENS,
  cache_read_input_tokens: FAKE_CACHE_READ_TOKENS,
  output_tokens: outputTokens
})

const anthropicStop = { stop: "end_turn", length: "max_tokens", tool: "tool_use", refuse: "refusal" } as const

const anthropicMessage = (s: Script, model: string) => ({
  id: "msg_fake",
  type: "message",
  role: "assistant",
  model,
  content: [
    ...(s.reasoning ? [{ type: "thinking", thinking: s.reasoning, signature: "sig_fake" }] : []),
    ...(s.text ? [{ type: "text", text: s.text }] : []),
    ...s.toolCalls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.args }))
  ],
  stop_reason: anthropicStop[s.finish],
  stop_sequence: null,
  usage: anthropicUsage(s)
})

function* anthropicStream(s: Script, model: string): Generator<string> {
  const event = (type: string, body: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`
  const { content: _content, stop_reason: _stop, ...message } = anthropicMessage(s, model)
  yield event("message_start", { message: { ...message, content: [], stop_reason: null, usage: anthropicUsage(s, 1) } })
  let index = 0
  if (s.reasoning) {
    yield event("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } })
    yield event("content_block_delta", { index, delta: { type: "thinking_delta", thinking: s.reasoning } })
    yield event("content_block_delta", { index, delta: { type: "signature_delta", signature: "sig_fake" } })
    yield event("content_block_stop", { index: index++ })
  }
  yield "event: ping\ndata: {\"type\": \"ping\"}\n\n"
  if (s.text) {
    yield event("content_block_start", { index, content_block: { type: "text", text: "" } })
    for (const [i, piece] of pieces(s.text).entries()) {
      yield event("content_block_delta", { index, delta: { type: "text_delta", text: piece } })
      if (i === 0 && s.streamError) {
        yield event("error", { error: { type: "overloaded_error", message: "Overloaded" } })
        return
      }
    }
    yield event("content_block_stop", { index: index++ })
  }
  for (const call of s.toolCalls) {
    const args = JSON.stringify(call.args)
    yield event("content_block_start", { index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } })
    yield event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: "" } })
    yield event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: args.slice(0, 4) } })
    yield event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: args.slice(4) } })
    yield event("content_block_stop", { index: index++ })
  }
  yield event("message_delta", {
    delta: { stop_reason: anthropicStop[s.finish], stop_sequence: null },
    usage: { output_tokens: s.usage.output }
  })
  yield event("message_stop", {})
}

const anthropicErrorType = (status: number): string =>
  ({ 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error" })[status] ?? "api_error"

// --- Gemini ---

const GEMINI_THOUGHT_SIGNATURE = "c2lnbmF0dXJlLWZha2U="

const geminiUsage = (s: Script) => ({
  promptTokenCount: s.usage.input + FAKE_CACHE_READ_TOKENS,
  candidatesTokenCount: s.usage.output - (s.reasoning ? 8 : 0),
  ...(s.reasoning ? { thoughtsTokenCount: 8 } : {}),
  cachedContentTokenCount: FAKE_CACHE_READ_TOKENS,
  totalTokenCount: s.usage.input + FAKE_CACHE_READ_TOKENS + s.usage.output
})

const geminiFinish = { stop: "STOP", length: "MAX_TOKENS", tool: "STOP", refuse: "SAFETY" } as const

const geminiParts = (s: Script, text: string) => [
  ...(s.reasoning ? [{ text: s.reasoning, thought: true }] : []),
  ...(text ? [{ text }] : []),
  ...s.toolCalls.map((c, i) => ({
    functionCall: { name: c.name, args: c.args },
    // Gemini 3 signs the first function call of a step
    ...(i === 0 ? { thoughtSignature: GEMINI_THOUGHT_SIGNATURE } : {})
  }))
]

const geminiResponse = (s: Script, model: string) => ({
  candidates: [{
    content: { role: "model", parts: geminiParts(s, s.text) },
    finishReason: geminiFinish[s.finish],
    index: 0
  }],
  usageMetadata: geminiUsage(s),
  modelVersion: model,
  responseId: "fake-response-id"
})

function* geminiStream(s: Script, model: string): Generator<string> {
  // Gemini's SSE uses CRLF line endings
  const frame = (body: object) => `data: ${JSON.stringify(body)}\r\n\r\n`
  const chunk = (parts: Array<object>, finishReason?: string) =>
    frame({
      candidates: [{ content: { role: "model", parts }, ...(finishReason ? { finishReason } : {}), index: 0 }],
      usageMetadata: finishReason ? geminiUsage(s) : { promptTokenCount: s.usage.input + FAKE_CACHE_READ_TOKENS },
      modelVersion: model,
      responseId: "fake-response-id"
    })
  if (s.reasoning) yield chunk([{ text: s.reasoning, thought: true }])
  for (const [i, piece] of pieces(s.text).entries()) {
    yield chunk([{ text: piece }])
    if (i === 0 && s.streamError) {
      yield frame({ error: { code: 503, message: "The model is overloaded.", status: "UNAVAILABLE" } })
      return
    }
  }
  yield chunk(geminiParts({ ...s, reasoning: null }, ""), geminiFinish[s.finish])
}

const geminiStatus = (status: number): string =>
  ({ 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE" })[status] ?? "INTERNAL"

// --- Bedrock ---

const utf8 = new TextEncoder()
const codec = new EventStreamCodec((bytes) => new TextDecoder().decode(bytes), (text) => utf8.encode(text))

const bedrockUsage = (s: Script) => ({
  inputTokens: s.usage.input,
  outputTokens: s.usage.output,
  totalTokens: s.usage.input + s.usage.output + FAKE_CACHE_READ_TOKENS + FAKE_CACHE_WRITE_TOKENS,
  cacheReadInputTokens: FAKE_CACHE_READ_TOKENS,
  cacheWriteInputTokens: FAKE_CACHE_WRITE_TOKENS
})

const bedrockStop = { stop: "end_turn", length: "max_tokens", tool: "tool_use", refuse: "content_filtered" } as const

const bedrockResponse = (s: Script) => ({
  output: {
    message: {
      role: "assistant",
      content: [
        ...(s.reasoning ? [{ reasoningContent: { reasoningText: { text: s.reasoning, signature: "sig_fake" } } }] : []),
        ...(s.text ? [{ text: s.text }] : []),
        ...s.toolCalls.map((c) => ({ toolUse: { toolUseId: c.id, name: c.name, input: c.args } }))
      ]
    }
  },
  stopReason: bedrockStop[s.finish],
  usage: bedrockUsage(s),
  metrics: { latencyMs: 42 }
})

const bedrockFrame = (kind: "event" | "exception", type: string, body: object): Uint8Array =>
  codec.encode({
    headers: {
      ":message-type": { type: "string", value: kind },
      [kind === "event" ? ":event-type" : ":exception-type"]: { type: "string", value: type },
      ":content-type": { type: "string", value: "application/json" }
    },
    // real events carry a padding field `p` that clients ignore
    body: utf8.encode(JSON.stringify(kind === "event" ? { ...body, p: "abcdefghijkl" } : body))
  })

function* bedrockStream(s: Script): Generator<Uint8Array> {
  const event = (type: string, body: object) => bedrockFrame("event", type, body)
  yield event("messageStart", { role: "assistant" })
  let index = 0
  if (s.reasoning) {
    yield event("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text: s.reasoning } } })
    yield event("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { signature: "sig_fake" } } })
    yield event("contentBlockStop", { contentBlockIndex: index++ })
  }
  if (s.text) {
    for (const [i, piece] of pieces(s.text).entries()) {
      yield event("contentBlockDelta", { contentBlockIndex: index, delta: { text: piece } })
      if (i === 0 && s.streamError) {
        yield bedrockFrame("exception", "throttlingException", { message: "Too many requests, please wait before trying again." })
        return
      }
    }
    yield event("contentBlockStop", { contentBlockIndex: index++ })
  }
  for (const call of s.toolCalls) {
    const args = JSON.stringify(call.args)
    yield event("contentBlockStart", { contentBlockIndex: index, start: { toolUse: { toolUseId: call.id, name: call.name } } })
    yield event("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: args.slice(0, 6) } } })
    yield event("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: args.slice(6) } } })
    yield event("contentBlockStop", { contentBlockIndex: index++ })
  }
  yield event("messageStop", { stopReason: bedrockStop[s.finish] })
  yield event("metadata", { usage: bedrockUsage(s), metrics: { latencyMs: 42 } })
}

const bedrockErrorType = (status: number): string =>
  ({ 400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException", 429: "ThrottlingException", 503: "ServiceUnavailableException" })[status] ?? "InternalServerException"

// ---------------------------------------------------------------------------------------------------------
// Routing

interface Route {
  readonly provider: FakeProviderType
  readonly model: string
  readonly stream: boolean
}

const route = (method: string, path: string, body: any): Route | null => {
  if (method !== "POST") return null
  const [pathname] = path.split("?", 1) as [string]
  if (pathname === "/v1/chat/completions") return { provider: "openai", model: body.model, stream: body.stream === true }
  if (pathname === "/compat/v1/chat/completions") {
    return { provider: "openai_compatible", model: body.model, stream: body.stream === true }
  }
  let m = /^\/openai\/deployments\/([^/]+)\/chat\/completions$/.exec(pathname)
  if (m) return { provider: "azure", model: decodeURIComponent(m[1]!), stream: body.stream === true }
  if (pathname === "/v1/messages") return { provider: "anthropic", model: body.model, stream: body.stream === true }
  m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(pathname)
  if (m) return { provider: "gemini", model: decodeURIComponent(m[1]!), stream: m[2] === "streamGenerateContent" }
  m = /^\/model\/([^/]+)\/(converse|converse-stream)$/.exec(pathname)
  if (m) return { provider: "bedrock", model: decodeURIComponent(m[1]!), stream: m[2] === "converse-stream" }
  return null
}

/** The header that carries the key, and whether it is there. */
const hasKey = (provider: FakeProviderType, headers: IncomingHttpHeaders): boolean => {
  switch (provider) {
    case "openai":
    case "bedrock":
      return /^Bearer \S+/.test(headers.authorization ?? "")
    case "azure":
      return !!headers["api-key"]
    case "anthropic":
      return !!headers["x-api-key"]
    case "gemini":
      return !!headers["x-goog-api-key"]
    case "openai_compatible":
      return true
  }
}

const readers: Record<FakeProviderType, (body: any, length: number) => Prompt> = {
  openai: readOpenAI,
  azure: readOpenAI,
  openai_compatible: readOpenAI,
  anthropic: readAnthropic,
  gemini: readGemini,
  bedrock: readBedrock
}

const sendError = (out: Out, provider: FakeProviderType, status: number): void => {
  switch (provider) {
    case "openai":
    case "azure":
    case "openai_compatible":
      return json(out, status, openAIErrorBody(provider, status))
    case "anthropic":
      return json(out, status, { type: "error", error: { type: anthropicErrorType(status), message: `fake anthropic error ${status}` } })
    case "gemini":
      return json(out, status, { error: { code: status, message: `fake gemini error ${status}`, status: geminiStatus(status) } })
    case "bedrock":
      return json(out, status, { message: `fake bedrock error ${status}` }, {
        "x-amzn-errortype": `${bedrockErrorType(status)}:http://internal.amazon.com/coral/com.amazon.bedrock/`
      })
  }
}

const answer = async (out: Out, target: Route, body: any, s: Script): Promise<void> => {
  const { provider, model, stream } = target
  switch (provider) {
    case "openai":
    case "azure":
    case "openai_compatible":
      return stream
        ? streamParts(out, "text/event-stream", openAIStream(s, model, body.stream_options?.include_usage === true, provider === "azure"))
        : json(out, 200, openAICompletion(s, model))
    case "anthropic":
      return stream ? streamParts(out, "text/event-stream", anthropicStream(s, model)) : json(out, 200, anthropicMessage(s, model))
    case "gemini":
      return stream ? streamParts(out, "text/event-stream", geminiStream(s, model)) : json(out, 200, geminiResponse(s, model))
    case "bedrock":
      return stream
        ? streamParts(out, "application/vnd.amazon.eventstream", bedrockStream(s))
        : json(out, 200, bedrockResponse(s))
  }
}

// --- Embeddings (OpenAI wire)

const EMBEDDINGS_PATH = /^\/(?:compat\/)?v1\/embeddings$/

/** Each word adds ±1 to a dimension picked by its hash; a text's vector is the normalised sum. */
const fakeEmbedding = (text: string, dimensions: number): Array<number> => {
  const vector = new Array<number>(dimensions).fill(0)
  for (const word of text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length > 2)) {
    let hash = 2166136261
    for (let i = 0; i < word.length; i++) hash = Math.imul(hash ^ word.charCodeAt(i), 16777619)
    vector[(hash >>> 0) % dimensions]! += hash & 1 ? 1 : -1
  }
  const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0)) || 1
  return vector.map((value) => value / norm)
}

const answerEmbeddings = (out: Out, body: any): void => {
  const inputs: Array<string> = typeof body.input === "string" ? [body.input] : Array.isArray(body.input) ? body.input : []
  const failing = inputs.map((input) => /\[\[embeddings-error:(\d+)\]\]/.exec(String(input))).find((match) => match !== null)
  if (failing) return json(out, Number(failing[1]), openAIErrorBody("openai", Number(failing[1])))
  const dimensions = typeof body.dimensions === "number" ? body.dimensions : 1536
  json(out, 200, {
    object: "list",
    data: inputs.map((input, index) => ({ object: "embedding", index, embedding: fakeEmbedding(String(input), dimensions) })),
    model: body.model,
    usage: { prompt_tokens: inputs.join(" ").length, total_tokens: inputs.join(" ").length }
  })
}

const readBody = async (req: IncomingMessage): Promise<string> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString("utf8")
}

export const startFakeProviders = async (options: FakeProviderOptions = {}): Promise<FakeProviders> => {
  const delayMs = options.chunkDelayMs ?? 2
  const record = options.record ?? true
  const requests: Array<RecordedRequest> = []

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const out: Out = { res, delayMs }
    const path = req.url ?? "/"
    const text = await readBody(req)
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      return json(out, 400, { error: { message: "request body is not JSON", type: "invalid_request_error" } })
    }
    if (req.method === "POST" && EMBEDDINGS_PATH.test(path.split("?", 1)[0]!)) {
      const provider = path.startsWith("/compat/") ? "openai_compatible" : "openai"
      if (record) requests.push({ provider, method: req.method, path, headers: req.headers, body })
      if (!hasKey(provider, req.headers)) return sendError(out, provider, 401)
      return answerEmbeddings(out, body)
    }
    const target = route(req.method ?? "GET", path, body)
    if (!target) return json(out, 404, { error: { message: `no fake provider at ${req.method} ${path}` } })
    if (record) requests.push({ provider: target.provider, method: req.method!, path, headers: req.headers, body })
    if (!hasKey(target.provider, req.headers)) return sendError(out, target.provider, 401)
    const s = script(readers[target.provider](body, text.length))
    if (s.slowMs > 0) await sleep(s.slowMs)
    if (s.errorStatus !== null) return sendError(out, target.provider, s.errorStatus)
    return answer(out, target, body, s)
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) json({ res, delayMs }, 500, { error: { message: String(error) } })
      else res.destroy()
    })
  })
  server.keepAliveTimeout = 30_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  return {
    url,
    baseUrls: {
      openai: `${url}/v1`,
      openai_compatible: `${url}/compat/v1`,
      azure: url,
      anthropic: url,
      gemini: url,
      bedrock: url
    },
    requests,
    requestsOf: (provider) => requests.filter((r) => r.provider === provider),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      })
  }
}
