/**
 * The fake OpenAI-wire APIs: chat completions (OpenAI, Azure, OpenAI-compatible) and the Responses API (whole and
 * streamed over SSE; the same events serve its WebSocket mode).
 */
import * as Crypto from "node:crypto"
import type { FakeProviderType } from "../fake-providers.ts"
import { FAKE_CACHE_READ_TOKENS, FAKE_REASONING, FAKE_REFUSAL, nowSeconds, pieces, type Prompt, type Script, textOfParts } from "./script.ts"

// --- chat completions

export const readOpenAI = (body: any, length: number): Prompt => {
  const last = body.messages?.at(-1)
  return {
    userText: last?.role === "user" ? textOfParts(last.content) : "",
    toolResult: last?.role === "tool" ? textOfParts(last.content) : null,
    toolNames: (body.tools ?? []).map((t: any) => t.function?.name),
    bodyLength: length
  }
}

const openAIUsage = (s: Script) => ({
  prompt_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS,
  completion_tokens: s.usage.output,
  total_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS + s.usage.output,
  prompt_tokens_details: { cached_tokens: FAKE_CACHE_READ_TOKENS },
  completion_tokens_details: { reasoning_tokens: 0 }
})

const openAIFinish = { stop: "stop", length: "length", tool: "tool_calls", refuse: "stop" } as const

export const openAICompletion = (s: Script, model: string) => ({
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

export function* openAIStream(s: Script, model: string, includeUsage: boolean, azure: boolean): Generator<string> {
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

export const openAIErrorBody = (provider: FakeProviderType, status: number) => {
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

// --- Responses API

/** Tool names the model may call, namespaced ones as `namespace.name`, with whether each is a custom (freeform) tool. */
const responsesTools = (tools: Array<any>): Array<{ name: string; custom: boolean; namespace?: string }> =>
  tools.flatMap((tool) =>
    tool.type === "function" || tool.type === "custom"
      ? [{ name: tool.name, custom: tool.type === "custom" }]
      : tool.type === "namespace"
      ? (tool.tools ?? []).map((inner: any) => ({ name: inner.name, custom: inner.type === "custom", namespace: tool.name }))
      : []
  )

/** The last input item: a user message, or a tool's output. */
export const readResponses = (body: any, length: number): Prompt => {
  const input: Array<any> = typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : body.input ?? []
  const last = input.at(-1)
  const isOutput = (item: any) => item?.type === "function_call_output" || item?.type === "custom_tool_call_output"
  const asked = input.findLastIndex((item) => item?.role === "user")
  return {
    userText: last?.role === "user" ? textOfParts(last.content) : "",
    toolResult: isOutput(last) ? (typeof last.output === "string" ? last.output : textOfParts(last.output)) : null,
    toolNames: responsesTools(body.tools ?? []).map((tool) => tool.name),
    bodyLength: length,
    loop: { ask: asked === -1 ? "" : textOfParts(input[asked].content), results: input.slice(asked + 1).filter(isOutput).length }
  }
}

const responsesUsage = (s: Script) => ({
  input_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS,
  input_tokens_details: { cached_tokens: FAKE_CACHE_READ_TOKENS },
  output_tokens: s.usage.output,
  output_tokens_details: { reasoning_tokens: s.reasoning ? 8 : 0 },
  total_tokens: s.usage.input + FAKE_CACHE_READ_TOKENS + s.usage.output
})

/** The output items of an answer, with ids unique to the response. */
const responsesOutput = (s: Script, body: any, n: number): Array<Record<string, unknown>> => {
  const tools = responsesTools(body.tools ?? [])
  const items: Array<Record<string, unknown>> = []
  if (s.reasoning) {
    items.push({
      id: `rs_fake_${n}`,
      type: "reasoning",
      summary: [{ type: "summary_text", text: s.reasoning ?? FAKE_REASONING }],
      encrypted_content: "gAAAAfake-encrypted-reasoning"
    })
  }
  if (s.finish === "refuse") {
    items.push({ id: `msg_fake_${n}`, type: "message", status: "completed", role: "assistant", content: [{ type: "refusal", refusal: FAKE_REFUSAL }] })
  } else if (s.text) {
    items.push({
      id: `msg_fake_${n}`,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: s.text, annotations: [], logprobs: [] }]
    })
  }
  s.toolCalls.forEach((call, i) => {
    const tool = tools.find((candidate) => candidate.name === call.name)
    const namespace = tool?.namespace === undefined ? {} : { namespace: tool.namespace }
    items.push(
      tool?.custom
        ? { id: `ctc_fake_${n}_${i}`, type: "custom_tool_call", status: "completed", call_id: `${call.id}_${n}`, name: call.name, input: String(call.args.input ?? call.args.query ?? ""), ...namespace }
        : { id: `fc_fake_${n}_${i}`, type: "function_call", status: "completed", call_id: `${call.id}_${n}`, name: call.name, arguments: JSON.stringify(call.args), ...namespace }
    )
  })
  return items
}

/** Unique response ids across fake servers, as the real API's are (clients chain on them; the ledger keys on them). */
const RUN = Crypto.randomBytes(4).toString("hex")

export const responsesObject = (s: Script, body: any, n: number, output = responsesOutput(s, body, n)) => ({
  id: `resp_fake_${RUN}_${n}`,
  object: "response",
  created_at: nowSeconds(),
  status: s.finish === "length" ? "incomplete" : "completed",
  error: null,
  incomplete_details: s.finish === "length" ? { reason: "max_output_tokens" } : null,
  model: body.model,
  output,
  previous_response_id: body.previous_response_id ?? null,
  store: body.store ?? true,
  usage: responsesUsage(s)
})

/** A streamed answer's events (`type` and `sequence_number` in each), as OpenAI sends them over SSE or a WebSocket. */
export function* responsesEvents(s: Script, body: any, n: number): Generator<Record<string, unknown>> {
  let sequence = 0
  const event = (type: string, fields: object) => ({ type, sequence_number: sequence++, ...fields })
  const full = responsesObject(s, body, n)
  const pending = { ...full, status: "in_progress", incomplete_details: null, output: [], usage: null }
  yield event("response.created", { response: pending })
  yield event("response.in_progress", { response: pending })
  const output = responsesOutput(s, body, n)
  for (const [index, item] of output.entries()) {
    const id = item.id as string
    if (item.type === "message" && s.finish !== "refuse") {
      const text = s.text
      yield event("response.output_item.added", { output_index: index, item: { ...item, status: "in_progress", content: [] } })
      yield event("response.content_part.added", { item_id: id, output_index: index, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } })
      for (const [i, piece] of pieces(text).entries()) {
        yield event("response.output_text.delta", { item_id: id, output_index: index, content_index: 0, delta: piece, logprobs: [] })
        if (i === 0 && s.streamError) {
          yield event("error", { error: { type: "server_error", code: "server_error", message: "The server had an error while processing your request.", param: null } })
          yield event("response.failed", { response: { ...pending, status: "failed", error: { code: "server_error", message: "The server had an error while processing your request." } } })
          return
        }
      }
      yield event("response.output_text.done", { item_id: id, output_index: index, content_index: 0, text, logprobs: [] })
      yield event("response.content_part.done", { item_id: id, output_index: index, content_index: 0, part: { type: "output_text", text, annotations: [], logprobs: [] } })
    } else if (item.type === "function_call") {
      const args = item.arguments as string
      yield event("response.output_item.added", { output_index: index, item: { ...item, status: "in_progress", arguments: "" } })
      yield event("response.function_call_arguments.delta", { item_id: id, output_index: index, delta: args.slice(0, 5) })
      yield event("response.function_call_arguments.delta", { item_id: id, output_index: index, delta: args.slice(5) })
      yield event("response.function_call_arguments.done", { item_id: id, output_index: index, arguments: args })
    } else if (item.type === "reasoning") {
      yield event("response.output_item.added", { output_index: index, item: { ...item, summary: [] } })
      yield event("response.reasoning_summary_part.added", { item_id: id, output_index: index, summary_index: 0, part: { type: "summary_text", text: "" } })
      yield event("response.reasoning_summary_text.delta", { item_id: id, output_index: index, summary_index: 0, delta: s.reasoning })
      yield event("response.reasoning_summary_text.done", { item_id: id, output_index: index, summary_index: 0, text: s.reasoning })
      yield event("response.reasoning_summary_part.done", { item_id: id, output_index: index, summary_index: 0, part: { type: "summary_text", text: s.reasoning } })
    } else {
      yield event("response.output_item.added", { output_index: index, item })
    }
    yield event("response.output_item.done", { output_index: index, item })
  }
  yield event(full.status === "incomplete" ? "response.incomplete" : "response.completed", { response: full })
}

export function* responsesStream(s: Script, body: any, n: number): Generator<string> {
  for (const event of responsesEvents(s, body, n)) yield `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
}
