/**
 * Provider adapters end to end against the local fake providers: request translation as the provider receives
 * it, answer translation, streams fed in 1–7 byte pieces, error mapping, usage with cache tokens, and what the
 * official `openai` client makes of the result.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { captureUsage, type ProviderType } from "../../src/domain/capture.ts"
import type { ChatCompletion, ChatRequest } from "../../src/providers/chatCompletions.ts"
import { adapterFor } from "../../src/providers/index.ts"
import type { CallContext, ProviderError, StreamAnswer, UpstreamRequest } from "../../src/providers/types.ts"
import {
  FAKE_CACHE_READ_TOKENS,
  FAKE_CACHE_WRITE_1H_TOKENS,
  FAKE_CACHE_WRITE_TOKENS,
  FAKE_REASONING,
  FAKE_REFUSAL,
  type FakeProviders,
  startFakeProviders
} from "../support/fake-providers.ts"

const PROVIDER_TYPES: ReadonlyArray<ProviderType> = [
  "openai",
  "azure",
  "openai_compatible",
  "anthropic",
  "gemini",
  "bedrock"
]

/** Model names as each provider spells them (Bedrock ids contain `:` and must be escaped in the path). */
const MODELS: Record<ProviderType, string> = {
  openai: "gpt-4o-mini",
  azure: "my-gpt4o-deployment",
  openai_compatible: "llama3.2",
  anthropic: "claude-sonnet-4-5",
  gemini: "gemini-2.5-flash",
  bedrock: "anthropic.claude-3-5-haiku-20241022-v1:0"
}

const keyFor = (type: ProviderType): string => `sk-test-${type}`

const contextFor = (
  type: ProviderType,
  fake: FakeProviders,
  options: { stream?: boolean; includeUsage?: boolean; apiKey?: string | undefined } = {}
): CallContext => ({
  model: MODELS[type],
  apiKey: "apiKey" in options ? options.apiKey : keyFor(type),
  baseUrl: fake.baseUrls[type],
  stream: options.stream ?? false,
  includeUsage: options.includeUsage ?? false,
  apiVersion: "2024-10-21"
})

interface Exchange<T> {
  readonly upstream: UpstreamRequest
  readonly status: number
  readonly result: T
}

const send = (upstream: UpstreamRequest): Promise<Response> =>
  fetch(upstream.url, { method: "POST", headers: upstream.headers, body: String(upstream.body) })

/** A non-streamed call: the translated completion, or the mapped error. */
const complete = async (
  type: ProviderType,
  fake: FakeProviders,
  request: ChatRequest,
  options: { apiKey?: string | undefined } = {}
): Promise<Exchange<{ completion: ChatCompletion; text: string; usage: StreamAnswer["usage"] } | ProviderError>> => {
  const adapter = adapterFor(type)
  const ctx = contextFor(type, fake, options)
  const upstream = adapter.prepare(request, ctx)
  const res = await send(upstream)
  const body = await res.text()
  if (!res.ok) return { upstream, status: res.status, result: adapter.error(res.status, body) }
  const answer = adapter.response(body, ctx)
  // the usage the ledger records: the adapter's, or the answer's own where the gateway relays it unparsed
  const usage = captureUsage({ usage: answer.usage, response: answer.text })
  return { upstream, status: res.status, result: { completion: JSON.parse(answer.text), text: answer.text, usage } }
}

/** Deterministic piece sizes of 1 to 7 bytes, so SSE lines, UTF-8 characters and binary frames get split. */
const splitAwkwardly = (bytes: Uint8Array, seed = 7): Array<Uint8Array> => {
  const pieces: Array<Uint8Array> = []
  let state = seed
  for (let offset = 0; offset < bytes.length;) {
    state = (state * 1103515245 + 12345) % 2147483648
    const size = 1 + (state % 7)
    pieces.push(bytes.slice(offset, offset + size))
    offset += size
  }
  return pieces
}

interface StreamRun {
  readonly upstream: UpstreamRequest
  readonly status: number
  /** raw upstream bytes */
  readonly bytes: Uint8Array
  /** SSE text written to the caller */
  readonly sse: string
  readonly answer: StreamAnswer
}

/** A streamed call: upstream bytes fed to the translator in awkward pieces. */
const streamCall = async (
  type: ProviderType,
  fake: FakeProviders,
  request: ChatRequest,
  options: { includeUsage?: boolean; seed?: number } = {}
): Promise<StreamRun> => {
  const adapter = adapterFor(type)
  const ctx = contextFor(type, fake, { stream: true, includeUsage: options.includeUsage ?? false })
  const upstream = adapter.prepare({ ...request, stream: true }, ctx)
  const res = await send(upstream)
  const bytes = new Uint8Array(await res.arrayBuffer())
  const translator = adapter.stream(ctx)
  let sse = ""
  for (const piece of splitAwkwardly(bytes, options.seed)) sse += translator.push(piece)
  sse += translator.end()
  return { upstream, status: res.status, bytes, sse, answer: translator.assembled() }
}

/** The `data:` payloads of an SSE text, checking the framing. */
const framesOf = (sse: string): Array<string> => {
  if (!sse.endsWith("\n\n")) throw new Error(`SSE text does not end with a blank line: ${JSON.stringify(sse.slice(-40))}`)
  return sse.slice(0, -2).split("\n\n").map((frame) => {
    if (!frame.startsWith("data: ") || frame.includes("\n")) throw new Error(`not a single data line: ${JSON.stringify(frame)}`)
    return frame.slice(6)
  })
}

/**
 * An OpenAI client `fetch` that runs the request through an adapter and the fake provider, relaying the
 * stream chunk by chunk as the gateway does. Lets the official client check what callers receive.
 */
const fetchThroughAdapter = (type: ProviderType, fake: FakeProviders): typeof fetch => async (_url, init) => {
  const request = JSON.parse(String(init?.body)) as ChatRequest
  const adapter = adapterFor(type)
  const ctx = contextFor(type, fake, {
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true
  })
  const res = await send(adapter.prepare(request, ctx))
  if (!res.ok) {
    const error = adapter.error(res.status, await res.text())
    return Response.json(error.body, { status: error.status })
  }
  if (!ctx.stream) {
    return new Response(adapter.response(await res.text(), ctx).text, { headers: { "content-type": "application/json" } })
  }
  const translator = adapter.stream(ctx)
  const utf8 = new TextEncoder()
  const relay = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      for (const piece of splitAwkwardly(chunk)) {
        const out = translator.push(piece)
        if (out) controller.enqueue(utf8.encode(out))
      }
    },
    flush(controller) {
      controller.enqueue(utf8.encode(translator.end()))
    }
  })
  return new Response(res.body!.pipeThrough(relay), { headers: { "content-type": "text/event-stream" } })
}

// ---------------------------------------------------------------------------------------------------------

let fake: FakeProviders
beforeAll(async () => {
  fake = await startFakeProviders({ chunkDelayMs: 0 })
})
afterAll(() => fake.close())

type Completed = { completion: ChatCompletion; text: string; usage: StreamAnswer["usage"] }
const isCompleted = (result: Completed | ProviderError): result is Completed => "completion" in result

const completed = async (type: ProviderType, request: ChatRequest) => {
  const exchange = await complete(type, fake, request)
  if (!isCompleted(exchange.result)) throw new Error(`expected an answer, got ${JSON.stringify(exchange.result)}`)
  return { ...exchange, ...exchange.result }
}

const ask = (content: string, extra: Partial<ChatRequest> = {}): ChatRequest => ({
  model: "ignored/by-adapters",
  messages: [{ role: "system", content: "You are terse." }, { role: "user", content }],
  ...extra
})

const TOOLS: ChatRequest["tools"] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] }
    }
  },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } }
]

/** The usage the fake reports for this upstream body and answer, normalised. */
const expectedUsage = (type: ProviderType, upstreamBody: string, outputChars: number) => {
  const input = 8 + Math.ceil(upstreamBody.length / 4)
  const output = Math.ceil(outputChars / 4)
  const cacheWrite = type === "anthropic" || type === "bedrock" ? FAKE_CACHE_WRITE_TOKENS : 0
  const prompt = input + FAKE_CACHE_READ_TOKENS + cacheWrite
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    cached_tokens: FAKE_CACHE_READ_TOKENS,
    ...(cacheWrite ? { cache_write_tokens: cacheWrite } : {}),
    // Anthropic splits its cache writes by lifetime; one-hour writes are priced higher
    ...(type === "anthropic" ? { cache_write_1h_tokens: FAKE_CACHE_WRITE_1H_TOKENS } : {}),
    ...(type === "openai" || type === "azure" || type === "openai_compatible" ? { reasoning_tokens: 0 } : {})
  }
}

/** Every frame is a chat.completion.chunk the OpenAI clients accept (or [DONE], or an error event). */
const chunksOf = (sse: string): Array<any> => {
  const frames = framesOf(sse)
  expect(frames.at(-1)).toBe("[DONE]")
  expect(frames.filter((f) => f === "[DONE]")).toHaveLength(1)
  return frames.slice(0, -1).map((frame) => {
    const chunk = JSON.parse(frame)
    if (chunk.error) return chunk
    expect(chunk.object).toBe("chat.completion.chunk")
    expect(typeof chunk.id).toBe("string")
    expect(typeof chunk.created).toBe("number")
    expect(typeof chunk.model).toBe("string")
    expect(Array.isArray(chunk.choices)).toBe(true)
    for (const choice of chunk.choices) {
      expect(typeof choice.index).toBe("number")
      expect(typeof choice.delta).toBe("object")
      expect(choice).toHaveProperty("finish_reason")
    }
    return chunk
  })
}

const contentOf = (chunks: Array<any>): string =>
  chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")

/** The parts of an answer that must not depend on streaming (Gemini tool-call ids are minted per answer). */
const essence = (type: ProviderType, completion: ChatCompletion) => {
  const [choice] = completion.choices
  return {
    content: choice!.message.content,
    refusal: choice!.message.refusal,
    reasoning: choice!.message.reasoning_content,
    finish: choice!.finish_reason,
    tools: choice!.message.tool_calls?.map((c) => ({
      id: type === "gemini" ? "minted" : c.id,
      name: c.function.name,
      args: JSON.parse(c.function.arguments)
    }))
  }
}

describe.each(PROVIDER_TYPES)("%s adapter", (type) => {
  it("translates a plain answer into a chat.completion with usage, cache tokens included", async () => {
    const { completion, usage, upstream } = await completed(type, ask("hello there"))
    expect(completion.object).toBe("chat.completion")
    expect(typeof completion.id).toBe("string")
    expect(completion.choices).toHaveLength(1)
    expect(completion.choices[0]!.message).toMatchObject({ role: "assistant", content: "Fake answer to: hello there" })
    expect(completion.choices[0]!.finish_reason).toBe("stop")
    expect(usage).toEqual(expectedUsage(type, String(upstream.body), "Fake answer to: hello there".length))
    expect(completion.usage?.prompt_tokens).toBe(usage!.prompt_tokens)
    expect(completion.usage?.prompt_tokens_details?.cached_tokens).toBe(FAKE_CACHE_READ_TOKENS)
  })

  it("sends the caller's key in the provider's own header, and the model where the provider wants it", async () => {
    await completed(type, ask("whose key"))
    const request = fake.requestsOf(type).at(-1)!
    const key = keyFor(type)
    switch (type) {
      case "openai":
      case "openai_compatible":
      case "bedrock":
        expect(request.headers.authorization).toBe(`Bearer ${key}`)
        break
      case "azure":
        expect(request.headers["api-key"]).toBe(key)
        expect(request.headers.authorization).toBeUndefined()
        expect(request.path).toBe(`/openai/deployments/${MODELS.azure}/chat/completions?api-version=2024-10-21`)
        break
      case "anthropic":
        expect(request.headers["x-api-key"]).toBe(key)
        expect(request.headers["anthropic-version"]).toBe("2023-06-01")
        expect(request.body.model).toBe(MODELS.anthropic)
        break
      case "gemini":
        expect(request.headers["x-goog-api-key"]).toBe(key)
        expect(request.path).toBe(`/v1beta/models/${MODELS.gemini}:generateContent`)
        break
    }
    if (type === "bedrock") expect(request.path).toBe(`/model/${encodeURIComponent(MODELS.bedrock)}/converse`)
    if (type === "openai" || type === "openai_compatible") expect(request.body.model).toBe(MODELS[type])
  })

  it("streams valid chunks split at any byte; the assembled answer equals the non-streamed one", async () => {
    const prompt = "héllo wörld 🌍 naïve ünïcode"
    const whole = await completed(type, ask(prompt))
    for (const seed of [1, 7, 42]) {
      const run = await streamCall(type, fake, ask(prompt), { seed })
      expect(run.status).toBe(200)
      const chunks = chunksOf(run.sse)
      expect(chunks.find((c) => c.choices.length > 0).choices[0].delta.role).toBe("assistant")
      expect(contentOf(chunks)).toBe(`Fake answer to: ${prompt}`)
      expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason)).toEqual(["stop"])
      const assembled = JSON.parse(run.answer.text) as ChatCompletion
      expect(essence(type, assembled)).toEqual(essence(type, whole.completion))
      expect(run.answer.error).toBeNull()
      expect(run.answer.usage).toEqual(expectedUsage(type, String(run.upstream.body), `Fake answer to: ${prompt}`.length))
      // the caller did not ask for usage: no usage chunk is shown
      expect(chunks.some((c) => c.usage)).toBe(false)
    }
  })

  it("shows the usage chunk when the caller asked for it", async () => {
    const run = await streamCall(type, fake, ask("count me"), { includeUsage: true })
    const chunks = chunksOf(run.sse)
    const usageChunk = chunks.at(-1)
    expect(usageChunk.choices).toEqual([])
    expect(usageChunk.usage.prompt_tokens).toBe(run.answer.usage!.prompt_tokens)
    expect(usageChunk.usage.completion_tokens).toBe(run.answer.usage!.completion_tokens)
  })

  it("translates a tool call, streamed and not, with the same result", async () => {
    const request = ask("weather in Paris? [[tool]]", { tools: TOOLS, tool_choice: "auto" })
    const whole = await completed(type, request)
    const message = whole.completion.choices[0]!.message
    expect(whole.completion.choices[0]!.finish_reason).toBe("tool_calls")
    expect(message.content).toBeNull()
    expect(message.tool_calls).toHaveLength(1)
    expect(message.tool_calls![0]).toMatchObject({ type: "function", function: { name: "get_weather" } })
    expect(JSON.parse(message.tool_calls![0]!.function.arguments)).toEqual({ query: "weather in Paris?" })
    const run = await streamCall(type, fake, request)
    chunksOf(run.sse)
    expect(essence(type, JSON.parse(run.answer.text))).toEqual(essence(type, whole.completion))
  })

  it("streams parallel tool calls with their own indices", async () => {
    const run = await streamCall(type, fake, ask("both [[tools]]", { tools: TOOLS }))
    const chunks = chunksOf(run.sse)
    const starts = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).filter((t: any) => t.id)
    expect(starts.map((t: any) => [t.index, t.function.name])).toEqual([[0, "get_weather"], [1, "get_time"]])
    const calls = (JSON.parse(run.answer.text) as ChatCompletion).choices[0]!.message.tool_calls!
    expect(calls.map((c) => JSON.parse(c.function.arguments))).toEqual([{ query: "first" }, { query: "second" }])
    expect(new Set(calls.map((c) => c.id)).size).toBe(2)
  })

  it("sends tool results back and reads the follow-up answer", async () => {
    const first = await completed(type, ask("weather? [[tool]]", { tools: TOOLS }))
    const call = first.completion.choices[0]!.message.tool_calls![0]!
    const followUp: ChatRequest = {
      model: "x",
      tools: TOOLS,
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "weather? [[tool]]" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: '{"temp_c":21}' }
      ]
    }
    const second = await completed(type, followUp)
    expect(second.completion.choices[0]!.message.content).toMatch(/^Tool said: .*21/)
    expect(second.completion.choices[0]!.finish_reason).toBe("stop")
  })

  it("carries the model's reasoning as reasoning_content", async () => {
    const whole = await completed(type, ask("deep question [[think]]"))
    expect(whole.completion.choices[0]!.message.reasoning_content).toBe(FAKE_REASONING)
    const run = await streamCall(type, fake, ask("deep question [[think]]"))
    expect((JSON.parse(run.answer.text) as ChatCompletion).choices[0]!.message.reasoning_content).toBe(FAKE_REASONING)
  })

  it("maps truncation to length and refusals to content_filter (refusal field for OpenAI-type)", async () => {
    const truncated = await completed(type, ask("go on [[truncate]]"))
    expect(truncated.completion.choices[0]!.finish_reason).toBe("length")
    const refused = await completed(type, ask("bad idea [[refuse]]"))
    const choice = refused.completion.choices[0]!
    if (type === "openai" || type === "azure" || type === "openai_compatible") {
      expect(choice.message.refusal).toBe(FAKE_REFUSAL)
    } else {
      expect(choice.finish_reason).toBe("content_filter")
    }
    const run = await streamCall(type, fake, ask("bad idea [[refuse]]"))
    expect(essence(type, JSON.parse(run.answer.text))).toEqual(essence(type, refused.completion))
  })

  it("maps provider errors to the chat-completions error shape, keeping the status", async () => {
    for (const status of [400, 429, 500, 503]) {
      const { status: httpStatus, result } = await complete(type, fake, ask(`fail [[error:${status}]]`))
      expect(httpStatus).toBe(status)
      expect(isCompleted(result)).toBe(false)
      const error = result as ProviderError
      expect(error.status).toBe(status)
      expect(error.body.error.message).toContain(`error ${status}`)
      expect(typeof error.body.error.type).toBe("string")
      expect(error.body.error).toHaveProperty("param")
      expect(error.body.error).toHaveProperty("code")
    }
    const rateLimited = (await complete(type, fake, ask("[[error:429]]"))).result as ProviderError
    if (type !== "openai") expect(rateLimited.body.error.type).toBe("rate_limit_error")
  })

  if (type !== "openai_compatible") {
    it("maps a missing key to the provider's 401", async () => {
      const { result } = await complete(type, fake, ask("no key"), { apiKey: undefined })
      const error = result as ProviderError
      expect(error.status).toBe(401)
      expect(error.body.error.message).toContain("401")
    })
  }

  it("turns a mid-stream provider failure into an error event and records it", async () => {
    const run = await streamCall(type, fake, ask("start then fail [[stream-error]]"))
    const chunks = chunksOf(run.sse)
    const errors = chunks.filter((c) => c.error)
    expect(errors).toHaveLength(1)
    expect(typeof errors[0].error.message).toBe("string")
    expect(run.answer.error?.body.error.message).toBe(errors[0].error.message)
    expect(JSON.parse(run.answer.text).choices[0].message.content).toBe("Fake ")
  })

  it("gives a partial assembly at any point of the stream (aborted call)", async () => {
    const adapter = adapterFor(type)
    const ctx = contextFor(type, fake, { stream: true })
    const upstream = adapter.prepare({ ...ask("one two three four five six"), stream: true }, ctx)
    const bytes = new Uint8Array(await (await send(upstream)).arrayBuffer())
    const translator = adapter.stream(ctx)
    for (const piece of splitAwkwardly(bytes.slice(0, Math.floor(bytes.length / 2)))) translator.push(piece)
    const partial = JSON.parse(translator.assembled().text) as ChatCompletion
    expect("Fake answer to: one two three four five six".startsWith(partial.choices[0]!.message.content ?? "")).toBe(true)
    expect(partial.choices[0]!.finish_reason).toBeNull()
  })

  it("is read by the official openai client, streamed and not", async () => {
    const client = new OpenAI({ apiKey: "gateway-key", baseURL: "http://gateway.invalid/v1", fetch: fetchThroughAdapter(type, fake), maxRetries: 0 })
    const whole = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi client [[tool]]" }], tools: TOOLS as any })
    expect(whole.choices[0]!.message.tool_calls?.[0]).toMatchObject({ function: { name: "get_weather" } })
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi client" }],
      stream: true,
      stream_options: { include_usage: true }
    })
    let text = ""
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ""
      usage = chunk.usage ?? usage
    }
    expect(text).toBe("Fake answer to: hi client")
    expect(usage?.prompt_tokens_details?.cached_tokens).toBe(FAKE_CACHE_READ_TOKENS)
    const failing = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x [[stream-error]]" }], stream: true })
    await expect(async () => {
      for await (const _ of failing) {
        // consume until the error event
      }
    }).rejects.toThrow(OpenAI.APIError)
    await expect(client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "[[error:429]]" }] }))
      .rejects.toMatchObject({ status: 429 })
  })
})

describe("OpenAI-type streams", () => {
  it("pass Azure's prompt-filter chunk (no choices, no usage) through to the caller", async () => {
    const run = await streamCall("azure", fake, ask("filtered?"))
    const chunks = chunksOf(run.sse)
    expect(chunks[0]).toMatchObject({ choices: [], prompt_filter_results: [{ prompt_index: 0 }] })
    expect(chunks.some((c) => c.usage)).toBe(false)
  })

  it("ask the provider for usage even when the caller did not", async () => {
    await streamCall("openai", fake, ask("quiet"))
    expect(fake.requestsOf("openai").at(-1)!.body.stream_options).toEqual({ include_usage: true })
  })

  it("relay the upstream events unchanged", async () => {
    const run = await streamCall("openai", fake, ask("verbatim"), { includeUsage: true })
    expect(run.sse).toBe(new TextDecoder().decode(run.bytes))
  })
})
