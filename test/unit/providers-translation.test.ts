/**
 * Provider adapters without a server: the exact upstream request each one builds, answer details the fake
 * providers do not exercise, and the two stream decoders (SSE, AWS event-stream) on hand-made input.
 */
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { describe, expect, it } from "vitest"
import type { ChatCompletion, ChatRequest } from "../../src/providers/chatCompletions.ts"
import { adapterFor } from "../../src/providers/index.ts"
import { SseDecoder } from "../../src/providers/sse.ts"
import { type CallContext, UnsupportedRequest } from "../../src/providers/types.ts"

const ctx = (overrides: Partial<CallContext> = {}): CallContext => ({
  model: "some-model",
  apiKey: "sk-caller",
  baseUrl: "https://provider.example",
  stream: false,
  includeUsage: false,
  ...overrides
})

const PNG = "data:image/png;base64,iVBORw0KGgo="

/** A conversation exercising every translated feature: system prompts, images, parallel tool calls and results. */
const CONVERSATION: ChatRequest = {
  model: "x",
  messages: [
    { role: "system", content: "Be brief." },
    { role: "developer", content: [{ type: "text", text: "Use metric units." }] },
    {
      role: "user",
      content: [
        { type: "text", text: "What is in this picture, and the weather?" },
        { type: "image_url", image_url: { url: PNG } },
        { type: "text", text: "" }
      ]
    },
    {
      role: "assistant",
      content: "Checking.",
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          extra_content: { google: { thought_signature: "c2ln" } }
        },
        { id: "call_2", type: "function", function: { name: "get_time", arguments: "" } }
      ]
    },
    { role: "tool", tool_call_id: "call_1", content: '{"temp_c":21}' },
    { role: "tool", tool_call_id: "call_2", content: "12:00" }
  ],
  tools: [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather",
        parameters: { type: "object", properties: { city: { type: "string" } }, additionalProperties: false }
      }
    },
    { type: "function", function: { name: "get_time" } }
  ],
  max_tokens: 100,
  max_completion_tokens: 200,
  temperature: 0.2,
  top_p: 0.9,
  stop: "END",
  user: "user-7"
}

const bodyOf = (type: Parameters<typeof adapterFor>[0], request: ChatRequest, context: CallContext = ctx()) =>
  JSON.parse(String(adapterFor(type).prepare(request, context).body))

describe("OpenAI-type requests", () => {
  it("pass the body through with the bare model name, and force usage on streams", () => {
    const request: ChatRequest & { logprobs: boolean } = {
      model: "openai/gpt-4o",
      messages: [{ role: "user", content: "hi" }],
      logprobs: true,
      stream: true,
      stream_options: { include_usage: false }
    }
    const upstream = adapterFor("openai").prepare(request, ctx({ model: "gpt-4o", stream: true }))
    expect(upstream.url).toBe("https://provider.example/chat/completions")
    expect(upstream.headers).toMatchObject({ authorization: "Bearer sk-caller", accept: "text/event-stream" })
    expect(JSON.parse(String(upstream.body))).toEqual({ ...request, model: "gpt-4o", stream_options: { include_usage: true } })
    const plain = JSON.parse(String(adapterFor("openai").prepare({ ...request, stream: false, stream_options: null }, ctx()).body))
    expect(plain.stream_options).toBeNull()
  })

  it("address Azure by deployment and api-version with the api-key header", () => {
    const upstream = adapterFor("azure").prepare(
      { model: "azure/my deployment", messages: [] },
      ctx({ model: "my deployment", apiVersion: "2025-01-01-preview" })
    )
    expect(upstream.url).toBe(
      "https://provider.example/openai/deployments/my%20deployment/chat/completions?api-version=2025-01-01-preview"
    )
    expect(upstream.headers["api-key"]).toBe("sk-caller")
    expect(upstream.headers.authorization).toBeUndefined()
  })

  it("send no credential to a compatible upstream when the caller has none", () => {
    const upstream = adapterFor("openai_compatible").prepare({ model: "m", messages: [] }, ctx({ apiKey: undefined }))
    expect(upstream.headers.authorization).toBeUndefined()
  })

  it("relay success answers as they are, if they are a JSON object (a byte-order mark or whitespace before it is fine)", () => {
    const response = (text: string) => adapterFor("openai").response(text, ctx())
    expect(response('\uFEFF \n{"id":"c1"}').text).toBe('\uFEFF \n{"id":"c1"}')
    expect(() => response("<html>Welcome</html>")).toThrow()
    expect(() => response("[]")).toThrow()
    expect(() => response("")).toThrow()
  })

  it("map error bodies of every shape they come in", () => {
    const error = adapterFor("openai").error
    expect(error(400, '{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"x"}}').body)
      .toEqual({ error: { message: "bad", type: "invalid_request_error", param: "messages", code: "x" } })
    expect(error(404, '{"error":"model \\"llama9\\" not found"}').body.error).toMatchObject({
      message: 'model "llama9" not found',
      type: "invalid_request_error"
    })
    expect(error(422, '{"detail":"field required"}').body.error.message).toBe("field required")
    expect(error(502, "<html>Bad Gateway</html>")).toEqual({
      status: 502,
      body: { error: { message: "<html>Bad Gateway</html>", type: "api_error", param: null, code: null } }
    })
    expect(error(503, "").body.error.message).toBe("provider returned HTTP 503")
  })

  it("assemble several choices and log-probabilities from the relayed stream", () => {
    const translator = adapterFor("openai").stream(ctx({ stream: true }))
    const chunk = (choices: Array<object>) =>
      `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "gpt-4o", choices })}\n\n`
    const lp = (token: string) => ({ content: [{ token, logprob: -0.1, top_logprobs: [] }] })
    const sse = chunk([{ index: 0, delta: { role: "assistant", content: "A" }, logprobs: lp("A"), finish_reason: null }]) +
      chunk([{ index: 1, delta: { role: "assistant", content: "B" }, logprobs: lp("B"), finish_reason: null }]) +
      chunk([{ index: 0, delta: { content: "a" }, logprobs: lp("a"), finish_reason: "stop" }]) +
      chunk([{ index: 1, delta: {}, logprobs: null, finish_reason: "length" }]) +
      "data: [DONE]\n\n"
    expect(translator.push(new TextEncoder().encode(sse))).toBe(sse)
    expect(translator.end()).toBe("")
    const completion = JSON.parse(translator.assembled().text) as ChatCompletion
    expect(completion.id).toBe("chatcmpl-1")
    expect(completion.choices.map((c) => [c.message.content, c.finish_reason])).toEqual([["Aa", "stop"], ["B", "length"]])
    expect(completion.choices[0]!.logprobs!.content).toHaveLength(2)
  })
})

describe("Anthropic requests", () => {
  it("take system prompts apart and translate turns, images, tool calls and merged tool results", () => {
    const body = bodyOf("anthropic", CONVERSATION, ctx({ model: "claude-sonnet-4-5" }))
    expect(body.model).toBe("claude-sonnet-4-5")
    expect(body.system).toBe("Be brief.\n\nUse metric units.")
    expect(body.max_tokens).toBe(200)
    expect(body.stop_sequences).toEqual(["END"])
    expect(body.metadata).toEqual({ user_id: "user-7" })
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is in this picture, and the weather?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
        ]
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
          { type: "tool_use", id: "call_2", name: "get_time", input: {} }
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_1", content: '{"temp_c":21}' },
          { type: "tool_result", tool_use_id: "call_2", content: "12:00" }
        ]
      }
    ])
    expect(body.tools).toEqual([
      { name: "get_weather", description: "Weather", input_schema: CONVERSATION.tools![0]!.function.parameters },
      { name: "get_time", input_schema: { type: "object", properties: {} } }
    ])
    expect(body.tool_choice).toBeUndefined()
  })

  it("defaults max_tokens, links image URLs and maps tool_choice", () => {
    const body = bodyOf("anthropic", {
      model: "x",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://img.example/cat.jpg" } }] }],
      tools: CONVERSATION.tools!,
      tool_choice: { type: "function", function: { name: "get_time" } },
      parallel_tool_calls: false
    }, ctx({ stream: true }))
    expect(body.max_tokens).toBe(4096)
    expect(body.stream).toBe(true)
    expect(body.messages[0].content[0]).toEqual({ type: "image", source: { type: "url", url: "https://img.example/cat.jpg" } })
    expect(body.tool_choice).toEqual({ type: "tool", name: "get_time", disable_parallel_tool_use: true })
    const choice = (tool_choice: ChatRequest["tool_choice"]) =>
      bodyOf("anthropic", { model: "x", messages: [], tools: CONVERSATION.tools!, tool_choice }).tool_choice
    expect(choice("required")).toEqual({ type: "any" })
    expect(choice("none")).toEqual({ type: "none" })
    expect(choice("auto")).toEqual({ type: "auto" })
  })

  it("refuse content it cannot carry with a 400 naming the parameter", () => {
    const request: ChatRequest = {
      model: "x",
      messages: [{ role: "user", content: [{ type: "input_audio" }] }]
    }
    expect(() => adapterFor("anthropic").prepare(request, ctx())).toThrow(UnsupportedRequest)
    try {
      adapterFor("anthropic").prepare(request, ctx())
    } catch (error) {
      expect((error as UnsupportedRequest).body.error).toMatchObject({
        type: "invalid_request_error",
        param: "messages[0].content[0].type"
      })
    }
  })

  it("replay an earlier assistant refusal part as text", () => {
    const body = bodyOf("anthropic", {
      model: "x",
      messages: [
        { role: "user", content: "a" },
        { role: "assistant", content: [{ type: "refusal", refusal: "No." }] },
        { role: "user", content: "b" }
      ]
    })
    expect(body.messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "No." }] })
  })

  it("map stop reasons and cache usage of an answer", () => {
    const answer = adapterFor("anthropic").response(
      JSON.stringify({
        id: "msg_1",
        model: "claude-sonnet-4-5-20250929",
        content: [{ type: "text", text: "Hi" }],
        stop_reason: "stop_sequence",
        usage: { input_tokens: 10, output_tokens: 3, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 }
      }),
      ctx()
    )
    const completion = JSON.parse(answer.text) as ChatCompletion
    expect(completion).toMatchObject({ id: "msg_1", model: "claude-sonnet-4-5-20250929" })
    expect(completion.choices[0]!.finish_reason).toBe("stop")
    expect(answer.usage).toEqual({
      prompt_tokens: 130,
      completion_tokens: 3,
      total_tokens: 133,
      cached_tokens: 100,
      cache_write_tokens: 20
    })
    expect(completion.usage?.prompt_tokens_details).toEqual({ cached_tokens: 100, cache_write_tokens: 20 })
  })

  it("map error bodies, keeping Anthropic's own body for callers that speak Messages", () => {
    const raw = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}'
    expect(adapterFor("anthropic").error(529, raw))
      .toEqual({ status: 529, body: { error: { message: "Overloaded", type: "overloaded_error", param: null, code: "overloaded_error" } }, raw })
  })
})

describe("Gemini requests", () => {
  it("translate system, roles, images, function calls with signatures and function responses", () => {
    const upstream = adapterFor("gemini").prepare(CONVERSATION, ctx({ model: "gemini-2.5-pro", stream: true }))
    expect(upstream.url).toBe("https://provider.example/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
    expect(upstream.headers["x-goog-api-key"]).toBe("sk-caller")
    const body = JSON.parse(String(upstream.body))
    expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }, { text: "Use metric units." }] })
    expect(body.contents).toEqual([
      {
        role: "user",
        parts: [
          { text: "What is in this picture, and the weather?" },
          { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }
        ]
      },
      {
        role: "model",
        parts: [
          { text: "Checking." },
          { functionCall: { name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "c2ln" },
          { functionCall: { name: "get_time", args: {} }, thoughtSignature: "skip_thought_signature_validator" }
        ]
      },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "get_weather", response: { temp_c: 21 } } },
          { functionResponse: { name: "get_time", response: { result: "12:00" } } }
        ]
      }
    ])
    expect(body.generationConfig).toEqual({ maxOutputTokens: 200, temperature: 0.2, topP: 0.9, stopSequences: ["END"] })
    expect(body.tools).toEqual([{
      functionDeclarations: [
        { name: "get_weather", description: "Weather", parametersJsonSchema: CONVERSATION.tools![0]!.function.parameters },
        { name: "get_time" }
      ]
    }])
  })

  it("map image URLs, tool choice and JSON output", () => {
    const body = bodyOf("gemini", {
      model: "x",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://img.example/a.JPG?x=1" } }] }],
      tools: CONVERSATION.tools!,
      tool_choice: { type: "function", function: { name: "get_time" } },
      response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" } } }
    })
    expect(body.contents[0].parts[0]).toEqual({ fileData: { fileUri: "https://img.example/a.JPG?x=1", mimeType: "image/jpeg" } })
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_time"] } })
    expect(body.generationConfig).toEqual({ responseMimeType: "application/json", responseJsonSchema: { type: "object" } })
  })

  it("return thought signatures with tool calls and treat a blocked prompt as content_filter", () => {
    const withCall = adapterFor("gemini").response(
      JSON.stringify({
        candidates: [{
          content: { role: "model", parts: [{ functionCall: { name: "f", args: { a: 1 } }, thoughtSignature: "c2ln" }] },
          finishReason: "STOP"
        }],
        usageMetadata: { promptTokenCount: 50, candidatesTokenCount: 5, thoughtsTokenCount: 7, cachedContentTokenCount: 30 }
      }),
      ctx()
    )
    const completion = JSON.parse(withCall.text) as ChatCompletion
    expect(completion.choices[0]!.finish_reason).toBe("tool_calls")
    expect(completion.choices[0]!.message.tool_calls![0]!.extra_content).toEqual({ google: { thought_signature: "c2ln" } })
    expect(withCall.usage).toEqual({
      prompt_tokens: 50,
      completion_tokens: 12,
      total_tokens: 62,
      cached_tokens: 30,
      reasoning_tokens: 7
    })
    const blocked = adapterFor("gemini").response(JSON.stringify({ promptFeedback: { blockReason: "SAFETY" } }), ctx())
    expect((JSON.parse(blocked.text) as ChatCompletion).choices[0]!.finish_reason).toBe("content_filter")
  })

  it("map error bodies, also when wrapped in an array", () => {
    const body = { error: { code: 400, message: "Function call is missing a thought_signature", status: "INVALID_ARGUMENT" } }
    const expected = { status: 400, body: { error: { message: body.error.message, type: "invalid_request_error", param: null, code: "INVALID_ARGUMENT" } } }
    expect(adapterFor("gemini").error(400, JSON.stringify(body))).toEqual(expected)
    expect(adapterFor("gemini").error(400, JSON.stringify([body]))).toEqual(expected)
  })
})

describe("Bedrock requests", () => {
  it("translate to Converse: system, inference config, images as bytes, tools and merged tool results", () => {
    const upstream = adapterFor("bedrock").prepare(CONVERSATION, ctx({ model: "us.anthropic.claude-sonnet-4-5-v1:0" }))
    expect(upstream.url).toBe("https://provider.example/model/us.anthropic.claude-sonnet-4-5-v1%3A0/converse")
    expect(upstream.headers.authorization).toBe("Bearer sk-caller")
    const body = JSON.parse(String(upstream.body))
    expect(body.system).toEqual([{ text: "Be brief." }, { text: "Use metric units." }])
    expect(body.inferenceConfig).toEqual({ maxTokens: 200, temperature: 0.2, topP: 0.9, stopSequences: ["END"] })
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { text: "What is in this picture, and the weather?" },
          { image: { format: "png", source: { bytes: "iVBORw0KGgo=" } } }
        ]
      },
      {
        role: "assistant",
        content: [
          { text: "Checking." },
          { toolUse: { toolUseId: "call_1", name: "get_weather", input: { city: "Paris" } } },
          { toolUse: { toolUseId: "call_2", name: "get_time", input: {} } }
        ]
      },
      {
        role: "user",
        content: [
          { toolResult: { toolUseId: "call_1", content: [{ text: '{"temp_c":21}' }] } },
          { toolResult: { toolUseId: "call_2", content: [{ text: "12:00" }] } }
        ]
      }
    ])
    expect(body.toolConfig).toEqual({
      tools: [
        { toolSpec: { name: "get_weather", description: "Weather", inputSchema: { json: CONVERSATION.tools![0]!.function.parameters } } },
        { toolSpec: { name: "get_time", inputSchema: { json: { type: "object", properties: {} } } } }
      ]
    })
  })

  it("map tool choice, and keep tools declared (without a choice) for none", () => {
    const choice = (tool_choice: ChatRequest["tool_choice"]) =>
      bodyOf("bedrock", { model: "x", messages: [], tools: CONVERSATION.tools!, tool_choice }).toolConfig
    expect(choice("required").toolChoice).toEqual({ any: {} })
    expect(choice({ type: "function", function: { name: "get_time" } }).toolChoice).toEqual({ tool: { name: "get_time" } })
    expect(choice("none").toolChoice).toBeUndefined()
    expect(choice("none").tools).toHaveLength(2)
  })

  it("refuse image URLs it cannot fetch with a 400 naming the parameter", () => {
    const request: ChatRequest = {
      model: "x",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://img.example/cat.png" } }] }]
    }
    expect(() => adapterFor("bedrock").prepare(request, ctx())).toThrow(
      expect.objectContaining({ status: 400, body: expect.objectContaining({ error: expect.objectContaining({ param: "messages[0].content[0].image_url" }) }) })
    )
  })

  it("map error bodies with the error type as code", () => {
    expect(adapterFor("bedrock").error(429, '{"message":"Too many tokens","__type":"com.amazon.coral#ThrottlingException"}'))
      .toEqual({ status: 429, body: { error: { message: "Too many tokens", type: "rate_limit_error", param: null, code: "ThrottlingException" } } })
    // HTTP errors name the type in a header (where the AWS SDKs read it), not in the body
    expect(adapterFor("bedrock").error(400, '{"message":"Malformed input request"}', {
      "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"
    })).toEqual({ status: 400, body: { error: { message: "Malformed input request", type: "invalid_request_error", param: null, code: "ValidationException" } } })
  })

  describe("event-stream decoding", () => {
    const codec = new EventStreamCodec((b) => new TextDecoder().decode(b), (s) => new TextEncoder().encode(s))
    const frame = (headers: Record<string, string>, body: object) =>
      codec.encode({
        headers: Object.fromEntries(Object.entries(headers).map(([k, value]) => [k, { type: "string" as const, value }])),
        body: new TextEncoder().encode(JSON.stringify(body))
      })
    const event = (type: string, body: object) => frame({ ":message-type": "event", ":event-type": type }, body)

    it("reads frames split at every byte, and skips event types it does not know", () => {
      const translator = adapterFor("bedrock").stream(ctx({ stream: true, includeUsage: true }))
      const bytes = Buffer.concat([
        event("messageStart", { role: "assistant" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Bonjour" } }),
        event("someFutureEvent", { x: 1 }),
        event("messageStop", { stopReason: "guardrail_intervened" }),
        event("metadata", { usage: { inputTokens: 5, outputTokens: 2 } })
      ])
      let out = ""
      for (const byte of bytes) out += translator.push(Uint8Array.of(byte))
      out += translator.end()
      expect(out).toContain('"content":"Bonjour"')
      expect(out).toContain('"finish_reason":"content_filter"')
      expect(out).toContain('"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}')
      expect(out.endsWith("data: [DONE]\n\n")).toBe(true)
    })

    it("reports protocol errors and corrupt frames as error events", () => {
      const protocolError = adapterFor("bedrock").stream(ctx({ stream: true }))
      const out = protocolError.push(frame({ ":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom" }, {}))
      expect(JSON.parse(out.slice(6))).toEqual({ error: { message: "boom", type: "api_error", param: null, code: "InternalFailure" } })
      expect(protocolError.assembled().error?.status).toBe(500)

      const corrupt = adapterFor("bedrock").stream(ctx({ stream: true }))
      const bytes = event("messageStart", { role: "assistant" })
      bytes[bytes.length - 1]! ^= 0xff
      expect(corrupt.push(bytes)).toContain("unreadable event-stream frame")
      expect(corrupt.push(event("messageStart", { role: "assistant" }))).toBe("")
      expect(corrupt.assembled().error?.status).toBe(500)
    })
  })
})

describe("SseDecoder", () => {
  const decode = (pieces: Array<string>) => {
    const events: Array<[string, string]> = []
    const decoder = new SseDecoder((event, data) => events.push([event, data]))
    const utf8 = new TextEncoder()
    for (const piece of pieces) decoder.push(utf8.encode(piece))
    decoder.end()
    return events
  }

  it("handles CRLF, comments, event names, multi-line data and a last event without its blank line", () => {
    expect(decode([": keep-alive\r\n\r\nevent: ping\r\ndata: {}\r\n\r\n", "data: a\ndata:b\n\n", "data: tail"])).toEqual([
      ["ping", "{}"],
      ["", "a\nb"],
      ["", "tail"]
    ])
  })

  it("decodes UTF-8 characters split across pushes", () => {
    const events: Array<string> = []
    const decoder = new SseDecoder((_event, data) => events.push(data))
    const bytes = new TextEncoder().encode("data: 🌍é\n\n")
    for (const byte of bytes) decoder.push(Uint8Array.of(byte))
    expect(events).toEqual(["🌍é"])
  })
})
