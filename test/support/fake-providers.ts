/**
 * One local HTTP server speaking the wire formats of every provider family the gateway supports, for tests
 * and benchmarks. It never reaches the network. The formats are in ./fakes/.
 *
 * Base URLs (see `baseUrls`): OpenAI `{url}/v1`, OpenAI-compatible `{url}/compat/v1` (no key required),
 * Azure, Anthropic, Gemini and Bedrock at `{url}` with their own paths.
 *
 * Routes: chat completions (OpenAI, Azure deployments, compatible); the Responses API (OpenAI, compatible, Azure's
 * `/openai/v1/responses`), over HTTP and as a WebSocket on the same path; embeddings (OpenAI, compatible, Azure,
 * Gemini `batchEmbedContents`, Bedrock Titan and Cohere through InvokeModel); Anthropic Messages and its
 * `count_tokens`; Gemini generateContent and countTokens; Bedrock Converse, InvokeModel for Anthropic models and
 * CountTokens.
 *
 * Behaviour is scripted by markers in the text of the last user message:
 *   [[tool]]          answer with one call of the first declared tool (or `lookup`)
 *   [[tools]]         answer with two parallel tool calls
 *   [[run:CMD]]       call the coding agent's shell tool (Codex's exec_command, Claude Code's Bash) to run CMD
 *   [[think]]         include reasoning (Anthropic thinking, Gemini thought part, Bedrock reasoningContent,
 *                     `reasoning_content` for OpenAI-type, a reasoning item for Responses)
 *   [[refuse]]        refuse (Anthropic `refusal`, Gemini SAFETY, Bedrock content_filtered, OpenAI `refusal`)
 *   [[truncate]]      stop at the token limit
 *   [[error:429]]     answer that HTTP status with the provider's error body
 *   [[stream-error]]  streams only: fail after the first text chunk with the provider's mid-stream error
 *   [[slow:200]]      wait that many ms before answering
 *   [[long:256]]      answer with that many KB of text (in 1 KB words, streamed a word a chunk)
 * otherwise the answer is `Fake answer to: <the user text>`. When the last message is a tool result, the answer
 * is `Tool said: <result>` whatever the markers earlier in the conversation, so scripted tool loops end.
 * A missing provider key answers 401 (except OpenAI-compatible). Every request is recorded.
 *
 * Embeddings answer each input with a deterministic bag-of-words vector of the dimensions asked for,
 * L2-normalised, so texts sharing words are close; an input containing [[embeddings-error:N]] fails the call.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import {
  anthropicErrorBody,
  anthropicMessage,
  anthropicMessageId,
  anthropicStream,
  anthropicTokenCount,
  readAnthropic
} from "./fakes/anthropic.ts"
import {
  bedrockEmbeddings,
  bedrockErrorType,
  bedrockMessage,
  bedrockMessageStream,
  bedrockResponse,
  bedrockStream,
  bedrockTokenCount,
  readBedrock
} from "./fakes/bedrock.ts"
import { embeddingInputs, openAIEmbeddings } from "./fakes/embeddings.ts"
import { geminiEmbeddings, geminiResponse, geminiStatus, geminiStream, geminiTokenCount, readGemini } from "./fakes/gemini.ts"
import {
  openAICompletion,
  openAIErrorBody,
  openAIStream,
  readOpenAI,
  readResponses,
  responsesObject,
  responsesStream
} from "./fakes/openai.ts"
import { json, type Out, type Prompt, script, streamParts } from "./fakes/script.ts"
import { acceptResponsesSockets } from "./fakes/responses-socket.ts"

export { FAKE_CACHE_READ_TOKENS, FAKE_CACHE_WRITE_TOKENS, FAKE_REASONING, FAKE_REFUSAL } from "./fakes/script.ts"
export { FAKE_CACHE_WRITE_1H_TOKENS, FAKE_THINKING_SIGNATURE } from "./fakes/anthropic.ts"

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

/** What a request asks for: the provider that serves it, the model, and the operation. */
interface Target {
  readonly provider: FakeProviderType
  readonly model: string
  readonly operation: "chat" | "responses" | "messages" | "count" | "generate" | "converse" | "invoke" | "embeddings"
  readonly stream: boolean
}

const stream = (body: any) => body.stream === true

/** The routes, tried in order: a path pattern and the target it names. */
const ROUTES: ReadonlyArray<[RegExp, (match: RegExpExecArray, body: any) => Target]> = [
  [/^\/v1\/chat\/completions$/, (_m, body) => ({ provider: "openai", model: body.model, operation: "chat", stream: stream(body) })],
  [/^\/compat\/v1\/chat\/completions$/, (_m, body) => ({ provider: "openai_compatible", model: body.model, operation: "chat", stream: stream(body) })],
  [/^\/openai\/deployments\/([^/]+)\/chat\/completions$/, (m, body) => ({ provider: "azure", model: decodeURIComponent(m[1]!), operation: "chat", stream: stream(body) })],
  [/^\/v1\/responses$/, (_m, body) => ({ provider: "openai", model: body.model, operation: "responses", stream: stream(body) })],
  [/^\/compat\/v1\/responses$/, (_m, body) => ({ provider: "openai_compatible", model: body.model, operation: "responses", stream: stream(body) })],
  [/^\/openai\/v1\/responses$/, (_m, body) => ({ provider: "azure", model: body.model, operation: "responses", stream: stream(body) })],
  [/^\/v1\/embeddings$/, (_m, body) => ({ provider: "openai", model: body.model, operation: "embeddings", stream: false })],
  [/^\/compat\/v1\/embeddings$/, (_m, body) => ({ provider: "openai_compatible", model: body.model, operation: "embeddings", stream: false })],
  [/^\/openai\/v1\/embeddings$/, (_m, body) => ({ provider: "azure", model: body.model, operation: "embeddings", stream: false })],
  [/^\/v1\/messages$/, (_m, body) => ({ provider: "anthropic", model: body.model, operation: "messages", stream: stream(body) })],
  [/^\/v1\/messages\/count_tokens$/, (_m, body) => ({ provider: "anthropic", model: body.model, operation: "count", stream: false })],
  [/^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/, (m) => ({ provider: "gemini", model: decodeURIComponent(m[1]!), operation: "generate", stream: m[2] === "streamGenerateContent" })],
  [/^\/v1beta\/models\/([^/:]+):countTokens$/, (m) => ({ provider: "gemini", model: decodeURIComponent(m[1]!), operation: "count", stream: false })],
  [/^\/v1beta\/models\/([^/:]+):batchEmbedContents$/, (m) => ({ provider: "gemini", model: decodeURIComponent(m[1]!), operation: "embeddings", stream: false })],
  [/^\/model\/([^/]+)\/(converse|converse-stream)$/, (m) => ({ provider: "bedrock", model: decodeURIComponent(m[1]!), operation: "converse", stream: m[2] === "converse-stream" })],
  [/^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/, (m) => {
    const model = decodeURIComponent(m[1]!)
    return { provider: "bedrock", model, operation: /embed/.test(model) ? "embeddings" : "invoke", stream: m[2] === "invoke-with-response-stream" }
  }],
  [/^\/model\/([^/]+)\/count-tokens$/, (m) => ({ provider: "bedrock", model: decodeURIComponent(m[1]!), operation: "count", stream: false })]
]

const route = (method: string, path: string, body: any): Target | null => {
  if (method !== "POST") return null
  const [pathname] = path.split("?", 1) as [string]
  for (const [pattern, target] of ROUTES) {
    const match = pattern.exec(pathname)
    if (match) return target(match, body)
  }
  return null
}

/** The header that carries the key, and whether it is there. */
export const hasKey = (provider: FakeProviderType, headers: IncomingHttpHeaders): boolean => {
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

/** The last turn of a request, read in the format of its operation. */
const prompt = (target: Target, body: any, length: number): Prompt => {
  switch (target.operation) {
    case "responses":
      return readResponses(body, length)
    case "messages":
      return readAnthropic(body, length)
    case "invoke":
      return readAnthropic(body, length)
    case "generate":
      return readGemini(body, length)
    case "converse":
      return readBedrock(body, length)
    default:
      return readOpenAI(body, length)
  }
}

const sendError = (out: Out, provider: FakeProviderType, status: number): void => {
  switch (provider) {
    case "openai":
    case "azure":
    case "openai_compatible":
      return json(out, status, openAIErrorBody(provider, status))
    case "anthropic":
      return json(out, status, anthropicErrorBody(status), { "retry-after": "7" })
    case "gemini":
      return json(out, status, { error: { code: status, message: `fake gemini error ${status}`, status: geminiStatus(status) } })
    case "bedrock":
      return json(out, status, { message: `fake bedrock error ${status}` }, {
        "x-amzn-errortype": `${bedrockErrorType(status)}:http://internal.amazon.com/coral/com.amazon.bedrock/`
      })
  }
}

const EVENT_STREAM = "application/vnd.amazon.eventstream"

/** Answers a model call (anything but counts and embeddings). */
const answer = (out: Out, target: Target, body: any, n: number, length: number): Promise<void> | void => {
  const s = script(prompt(target, body, length))
  const { model } = target
  switch (target.operation) {
    case "chat":
      return target.stream
        ? streamParts(out, "text/event-stream", openAIStream(s, model, body.stream_options?.include_usage === true, target.provider === "azure"))
        : json(out, 200, openAICompletion(s, model))
    case "responses":
      return target.stream ? streamParts(out, "text/event-stream", responsesStream(s, body, n)) : json(out, 200, responsesObject(s, body, n))
    case "messages":
      return target.stream
        ? streamParts(out, "text/event-stream", anthropicStream(s, model, anthropicMessageId(n)))
        : json(out, 200, anthropicMessage(s, model, anthropicMessageId(n)))
    case "generate":
      return target.stream ? streamParts(out, "text/event-stream", geminiStream(s, model)) : json(out, 200, geminiResponse(s, model))
    case "converse":
      return target.stream ? streamParts(out, EVENT_STREAM, bedrockStream(s)) : json(out, 200, bedrockResponse(s))
    case "invoke":
      return target.stream ? streamParts(out, EVENT_STREAM, bedrockMessageStream(s, model)) : json(out, 200, bedrockMessage(s, model))
  }
}

/** Counts and embeddings: no script, but `[[embeddings-error:N]]` in an input fails the call. */
const answerOther = (out: Out, target: Target, body: any, length: number): void => {
  if (target.operation === "count") {
    if (target.provider === "gemini") return json(out, 200, geminiTokenCount(body))
    if (target.provider === "bedrock") return json(out, 200, bedrockTokenCount(body))
    return json(out, 200, anthropicTokenCount(length))
  }
  const texts = target.provider === "gemini"
    ? (body.requests ?? []).map((request: any) => JSON.stringify(request.content))
    : target.provider === "bedrock"
    ? [String(body.inputText ?? ""), ...(body.texts ?? [])]
    : embeddingInputs(body)
  const failing = texts.map((text: string) => /\[\[embeddings-error:(\d+)\]\]/.exec(text)).find((match: unknown) => match !== null)
  if (failing) return sendError(out, target.provider, Number(failing[1]))
  if (target.provider === "gemini") return json(out, 200, geminiEmbeddings(body))
  if (target.provider === "bedrock") {
    const answer = bedrockEmbeddings(target.model, body)
    return json(out, 200, answer.body, answer.headers)
  }
  return json(out, 200, openAIEmbeddings(body))
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
  /** numbers responses, so their ids are unique */
  let responses = 0

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
    const target = route(req.method ?? "GET", path, body)
    if (!target) return json(out, 404, { error: { message: `no fake provider at ${req.method} ${path}` } })
    if (record) requests.push({ provider: target.provider, method: req.method!, path, headers: req.headers, body })
    if (!hasKey(target.provider, req.headers)) return sendError(out, target.provider, 401)
    try {
      if (target.operation === "count" || target.operation === "embeddings") return answerOther(out, target, body, text.length)
      const s = script(prompt(target, body, text.length))
      if (s.slowMs > 0) await sleep(s.slowMs)
      if (s.errorStatus !== null) return sendError(out, target.provider, s.errorStatus)
      return await answer(out, target, body, ++responses, text.length)
    } catch (cause) {
      // the real providers check what they are sent: a request the fake cannot read gets their 400
      if (!res.headersSent) return sendError(out, target.provider, 400)
      throw cause
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) json({ res, delayMs }, 500, { error: { message: String(error) } })
      else res.destroy()
    })
  })
  acceptResponsesSockets(server, {
    delayMs,
    record: (recorded) => record && requests.push(recorded),
    next: () => ++responses
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
