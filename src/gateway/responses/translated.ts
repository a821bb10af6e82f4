/**
 * The Responses API for providers that do not speak it (Anthropic, Gemini, Bedrock): the request and the turns of
 * its chain are read into the chat form the gateway translates to every provider, and the answer — whole, or
 * streamed through `ResponsesSink` — is written back as a Response with OpenAI's events.
 *
 * - Tools: functions as they are; custom (freeform) tools such as Codex's apply_patch as a function taking one
 *   string `input`; a namespace's tools as `namespace__name`; client-run tool search as a function. The model's
 *   calls come back as the item types the caller declared (`custom_tool_call`, namespaced `function_call`,
 *   `tool_search_call`). Hosted tools (web search, file search, ...) run only at OpenAI and are left out.
 * - Reasoning: what the provider needs to continue it — Anthropic's signed thinking, Gemini's thought signatures —
 *   travels in the reasoning item's `encrypted_content` (the field Responses clients send back for this), and is
 *   given back to the provider it came from; other providers' reasoning is not sent on.
 */
import { toResponsesUsage, type Usage } from "../../domain/usage.ts"
import type { ChatCompletion, ChatMessage, ChatRequest, ContentPart, FinishReason, ToolCall, ToolChoice, ToolDefinition } from "../../providers/chatCompletions.ts"
import { nowSeconds } from "../../providers/chatCompletions.ts"
import { type CallContext, type ProviderAdapter, type TranslatedAdapter, UnsupportedRequest } from "../../providers/index.ts"
import { type AnswerSink, AssemblingSink } from "../../providers/stream.ts"
import type { ProviderError, StreamAnswer } from "../../providers/types.ts"
import { viaChat } from "../../providers/viaChat.ts"
import { responsesEvent } from "./openai.ts"
import { inputItems, type ResponseItem, type ResponsesRequest, type ResponsesTool } from "./request.ts"

// --- reasoning carried in encrypted_content ---------------------------------------------------------------

/** What a translated answer's reasoning item carries for the provider to continue from. */
interface CarriedReasoning {
  /** the provider family it came from: only that one can read it */
  readonly provider: string
  readonly thinking?: string
  /** Anthropic's (and Claude on Bedrock's) thinking signature */
  readonly signature?: string
  /** Gemini's thought signature of the function call that follows */
  readonly thoughtSignature?: string
}

const CARRIED = "ldg1."

const carry = (reasoning: CarriedReasoning): string => CARRIED + Buffer.from(JSON.stringify(reasoning)).toString("base64url")

const carried = (value: unknown): CarriedReasoning | undefined => {
  if (typeof value !== "string" || !value.startsWith(CARRIED)) return undefined
  try {
    return JSON.parse(Buffer.from(value.slice(CARRIED.length), "base64url").toString("utf8")) as CarriedReasoning
  } catch {
    return undefined
  }
}

// --- tools ----------------------------------------------------------------------------------------------------

interface ToolEntry {
  readonly kind: "function" | "custom" | "tool_search"
  readonly name: string
  readonly namespace?: string | undefined
}

/** The request's tools as functions, and how a function's name maps back to the tool the caller declared. */
class ToolTable {
  readonly functions: Array<ToolDefinition> = []
  private readonly byFunction = new Map<string, ToolEntry>()

  constructor(tools: ReadonlyArray<ResponsesTool>) {
    this.add(tools)
  }

  add(tools: ReadonlyArray<ResponsesTool>, namespace?: string): void {
    for (const tool of tools) {
      if (tool.type === "namespace") this.add(tool.tools ?? [], tool.name)
      else if (tool.type === "function" && tool.name) this.define({ kind: "function", name: tool.name, namespace }, tool.description, tool.parameters)
      else if (tool.type === "custom" && tool.name) {
        const format = tool.format?.type === "grammar" ? `\n\nThe input must follow this ${tool.format.syntax ?? ""} grammar:\n${tool.format.definition ?? ""}` : ""
        this.define({ kind: "custom", name: tool.name, namespace }, `${tool.description ?? ""}${format}`, {
          type: "object",
          properties: { input: { type: "string", description: "the tool's input, as free text" } },
          required: ["input"]
        })
      } else if (tool.type === "tool_search" && tool.execution === "client") {
        this.define({ kind: "tool_search", name: "tool_search" }, tool.description, tool.parameters)
      }
      // hosted tools (web_search, file_search, code_interpreter, ...) run only at OpenAI
    }
  }

  private define(entry: ToolEntry, description: string | undefined, parameters: object | undefined): void {
    const name = this.functionName(entry.name, entry.namespace)
    if (this.byFunction.has(name)) return
    this.byFunction.set(name, entry)
    this.functions.push({
      type: "function",
      function: { name, ...(description ? { description } : {}), parameters: parameters ?? { type: "object", properties: {} } }
    })
  }

  functionName(name: string, namespace?: string): string {
    return namespace === undefined ? name : `${namespace}__${name}`
  }

  entry(functionName: string): ToolEntry {
    return this.byFunction.get(functionName) ?? { kind: "function", name: functionName }
  }
}

// --- request --------------------------------------------------------------------------------------------------

const textOfOutput = (output: unknown): string =>
  typeof output === "string"
    ? output
    : Array.isArray(output)
    ? output.map((part) => (typeof part?.text === "string" ? part.text : "")).join("")
    : JSON.stringify(output ?? "")

const contentParts = (content: unknown, param: string): Array<ContentPart> | string => {
  if (typeof content === "string") return content
  const parts: Array<ContentPart> = []
  for (const [i, part] of (Array.isArray(content) ? content : []).entries()) {
    switch (part?.type) {
      case "input_text":
      case "output_text":
      case "text":
        parts.push({ type: "text", text: String(part.text ?? "") })
        break
      case "refusal":
        parts.push({ type: "text", text: String(part.refusal ?? "") })
        break
      case "input_image":
        if (typeof part.image_url !== "string") throw new UnsupportedRequest("input_image by file_id is not supported for this provider: send image_url", `${param}[${i}]`)
        parts.push({ type: "image_url", image_url: { url: part.image_url } })
        break
      default:
        throw new UnsupportedRequest(`content part type "${part?.type}" is not supported for this provider`, `${param}[${i}].type`)
    }
  }
  return parts
}

/** The items of a conversation (its chain's earlier turns, then the request's input) as chat messages. */
const itemsToChat = (items: ReadonlyArray<ResponseItem>, table: ToolTable, provider: string, inputOffset: number): Array<ChatMessage> => {
  const messages: Array<ChatMessage> = []
  let reasoning: CarriedReasoning | undefined
  /** the assistant step being written (tool calls join it) */
  const step = (): ChatMessage => {
    const last = messages.at(-1)
    if (last?.role === "assistant") return last
    const message: ChatMessage = { role: "assistant", content: null, ...thinking() }
    messages.push(message)
    return message
  }
  const thinking = (): Partial<ChatMessage> => {
    if (reasoning?.signature === undefined) return {}
    const carriedThinking = { reasoning_content: reasoning.thinking ?? "", reasoning_signature: reasoning.signature }
    reasoning = undefined
    return carriedThinking
  }
  const call = (id: string, name: string, args: string): void => {
    const message = step()
    const thoughtSignature = reasoning?.thoughtSignature
    if (thoughtSignature !== undefined) reasoning = undefined
    const toolCall: ToolCall = {
      id,
      type: "function",
      function: { name, arguments: args },
      ...(thoughtSignature !== undefined ? { extra_content: { google: { thought_signature: thoughtSignature } } } : {})
    }
    messages[messages.length - 1] = { ...message, tool_calls: [...(message.tool_calls ?? []), toolCall] }
  }
  items.forEach((item, index) => {
    const param = index >= inputOffset ? `input[${index - inputOffset}]` : "previous_response_id"
    switch (item.type ?? "message") {
      case "message": {
        const role = String(item.role ?? "user")
        const content = contentParts(item.content, `${param}.content`)
        messages.push(role === "assistant" ? { role, content, ...thinking() } : { role: role === "developer" ? "system" : role, content })
        return
      }
      case "function_call":
        return call(String(item.call_id ?? ""), table.functionName(String(item.name ?? ""), item.namespace as string | undefined), String(item.arguments ?? ""))
      case "custom_tool_call":
        return call(String(item.call_id ?? ""), table.functionName(String(item.name ?? ""), item.namespace as string | undefined), JSON.stringify({ input: String(item.input ?? "") }))
      case "tool_search_call":
        return call(String(item.call_id ?? ""), "tool_search", JSON.stringify(item.arguments ?? {}))
      case "function_call_output":
      case "custom_tool_call_output":
        messages.push({ role: "tool", tool_call_id: String(item.call_id ?? ""), content: textOfOutput(item.output) })
        return
      case "tool_search_output": {
        const tools = (item.tools ?? []) as ReadonlyArray<ResponsesTool>
        table.add(tools)
        messages.push({
          role: "tool",
          tool_call_id: String(item.call_id ?? ""),
          content: `Tools now available: ${tools.map((tool) => tool.name ?? tool.type).join(", ") || "none"}`
        })
        return
      }
      case "reasoning": {
        const from = carried(item.encrypted_content)
        reasoning = from?.provider === provider ? from : undefined
        return
      }
      default:
        // item references, hosted tools' records: nothing a provider other than OpenAI can read
        return
    }
  })
  return messages
}

const toolChoice = (choice: ResponsesRequest["tool_choice"], table: ToolTable): ToolChoice | undefined => {
  if (choice === "auto" || choice === "none" || choice === "required") return choice
  if (typeof choice === "object" && (choice.type === "function" || choice.type === "custom") && choice.name) {
    return { type: "function", function: { name: choice.name } }
  }
  return table.functions.length > 0 && choice !== undefined ? "auto" : undefined
}

/** A Responses request, with the earlier turns of its chain, in the chat form. */
const responsesToChat = (
  request: ResponsesRequest,
  earlier: ReadonlyArray<ResponseItem>,
  table: ToolTable,
  ctx: CallContext,
  provider: string
): ChatRequest => {
  const input = inputItems(request)
  const messages = itemsToChat([...earlier, ...input], table, provider, earlier.length)
  if (request.instructions) messages.unshift({ role: "system", content: request.instructions })
  const format = request.text?.format
  const choice = toolChoice(request.tool_choice, table)
  return {
    model: ctx.model,
    messages,
    ...(table.functions.length > 0 ? { tools: table.functions } : {}),
    ...(choice !== undefined ? { tool_choice: choice } : {}),
    ...(request.parallel_tool_calls != null ? { parallel_tool_calls: request.parallel_tool_calls } : {}),
    ...(request.max_output_tokens != null ? { max_tokens: request.max_output_tokens } : {}),
    ...(request.temperature != null ? { temperature: request.temperature } : {}),
    ...(request.top_p != null ? { top_p: request.top_p } : {}),
    ...(request.reasoning?.effort ? { reasoning_effort: request.reasoning.effort } : {}),
    ...(format?.type === "json_schema"
      ? { response_format: { type: "json_schema", json_schema: { name: format.name ?? "output", schema: format.schema ?? {} } } }
      : format?.type === "json_object"
      ? { response_format: { type: "json_object" } }
      : {}),
    ...(request.safety_identifier ?? request.user ? { user: request.safety_identifier ?? request.user } : {}),
    ...(ctx.stream ? { stream: true } : {})
  }
}

// --- answer ---------------------------------------------------------------------------------------------------

/** Ids of a translated answer and its items, from the decision's id: unique, and a later call can name them. */
const ids = (ctx: CallContext) => {
  const base = (ctx.ledgerId ?? crypto.randomUUID()).replaceAll("-", "")
  let n = 0
  return { response: `resp_ldg_${base}`, item: (prefix: string) => `${prefix}_ldg_${base}_${n++}` }
}

/** A tool call as the item type the caller declared. */
const callItem = (table: ToolTable, id: string, callId: string, name: string, args: string): ResponseItem => {
  const entry = table.entry(name)
  const namespace = entry.namespace === undefined ? {} : { namespace: entry.namespace }
  switch (entry.kind) {
    case "custom": {
      let input = args
      try {
        const parsed = JSON.parse(args) as { input?: unknown }
        if (typeof parsed?.input === "string") input = parsed.input
      } catch {
        // the model wrote the input bare
      }
      return { type: "custom_tool_call", id, status: "completed", call_id: callId, name: entry.name, input, ...namespace }
    }
    case "tool_search": {
      let parsed: unknown = {}
      try {
        parsed = JSON.parse(args || "{}")
      } catch {
        parsed = { query: args }
      }
      return { type: "tool_search_call", id, status: "completed", call_id: callId, execution: "client", arguments: parsed }
    }
    case "function":
      return { type: "function_call", id, status: "completed", call_id: callId, name: entry.name, arguments: args, ...namespace }
  }
}

const reasoningItem = (id: string, thinking: string, carriedReasoning: CarriedReasoning | undefined): ResponseItem => ({
  type: "reasoning",
  id,
  summary: thinking ? [{ type: "summary_text", text: thinking }] : [],
  ...(carriedReasoning !== undefined ? { encrypted_content: carry(carriedReasoning) } : {})
})

/** The output items of a completed answer, in the order the model produced them. */
const outputItems = (completion: ChatCompletion, table: ToolTable, provider: string, id: (prefix: string) => string): Array<ResponseItem> => {
  const message = completion.choices[0]?.message
  const items: Array<ResponseItem> = []
  if (message?.reasoning_content || message?.reasoning_signature) {
    const signature = message.reasoning_signature
    items.push(reasoningItem(id("rs"), message.reasoning_content ?? "", signature ? { provider, thinking: message.reasoning_content ?? "", signature } : undefined))
  }
  const text = message?.content ?? ""
  if (text || message?.refusal) {
    items.push({
      type: "message",
      id: id("msg"),
      status: "completed",
      role: "assistant",
      content: [message?.refusal ? { type: "refusal", refusal: message.refusal } : { type: "output_text", text, annotations: [] }]
    })
  }
  for (const call of message?.tool_calls ?? []) {
    const thoughtSignature = call.extra_content?.google?.thought_signature
    if (thoughtSignature) items.push(reasoningItem(id("rs"), "", { provider, thoughtSignature }))
    items.push(callItem(table, id("fc"), call.id, call.function.name, call.function.arguments))
  }
  return items
}

const INCOMPLETE: Partial<Record<FinishReason, string>> = { length: "max_output_tokens", content_filter: "content_filter" }

const responseObject = (
  answer: { readonly id: string; readonly model: string; readonly output: ReadonlyArray<ResponseItem>; readonly finish: FinishReason | null; readonly usage: Usage | null },
  request: ResponsesRequest,
  status?: "in_progress" | "failed",
  error?: ProviderError
) => {
  const incomplete = answer.finish === null ? undefined : INCOMPLETE[answer.finish]
  return {
    id: answer.id,
    object: "response",
    created_at: nowSeconds(),
    status: status ?? (incomplete === undefined ? "completed" : "incomplete"),
    error: error === undefined ? null : { code: error.body.error.code ?? error.body.error.type, message: error.body.error.message },
    incomplete_details: status === undefined && incomplete !== undefined ? { reason: incomplete } : null,
    instructions: request.instructions ?? null,
    model: answer.model,
    output: answer.output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    store: request.store ?? true,
    tool_choice: request.tool_choice ?? "auto",
    tools: request.tools ?? [],
    usage: answer.usage === null || status === "in_progress" ? null : toResponsesUsage(answer.usage)
  }
}

type OpenItem =
  | { readonly kind: "message"; readonly index: number; readonly id: string; text: string }
  | { readonly kind: "reasoning"; readonly index: number; readonly id: string; text: string; signature: string }
  | { readonly kind: "tool"; readonly index: number; readonly id: string; readonly call: number; readonly callId: string; readonly name: string; args: string }

/**
 * Writes a translated stream as OpenAI's Responses events: response.created and in_progress, then each output item
 * (added; its content part or summary part; deltas; done), then response.completed (or incomplete) carrying the
 * whole response with its usage. A failure ends the stream with an error event and response.failed.
 */
export class ResponsesSink extends AssemblingSink implements AnswerSink {
  private readonly request: ResponsesRequest
  private readonly table: ToolTable
  private readonly provider: string
  private readonly ids: ReturnType<typeof ids>
  private sequence = 0
  private started = false
  private open: OpenItem | undefined
  private readonly output: Array<ResponseItem> = []
  /** tool calls' items by call index, for arguments arriving after another item opened */
  private readonly tools: Array<OpenItem & { kind: "tool" }> = []
  constructor(request: ResponsesRequest, table: ToolTable, provider: string, ctx: CallContext) {
    super(ctx.model)
    this.request = request
    this.table = table
    this.provider = provider
    this.ids = ids(ctx)
  }

  private event(type: string, body: object): string {
    return responsesEvent(type, JSON.stringify({ type, sequence_number: this.sequence++, ...body }))
  }

  private snapshot(status?: "in_progress" | "failed", error?: ProviderError) {
    return responseObject(
      { id: this.ids.response, model: this.assembly.model, output: this.output, finish: null, usage: this.assembly.usage },
      this.request,
      status,
      error
    )
  }

  start(_id?: string, model?: string): string {
    if (this.started) return ""
    this.started = true
    if (model) this.assembly.model = model
    const response = this.snapshot("in_progress")
    return this.event("response.created", { response }) + this.event("response.in_progress", { response })
  }

  /** Finishes the open item: its done events, and the item in the output. */
  private close(): string {
    const item = this.open
    if (item === undefined) return ""
    this.open = undefined
    const at = { item_id: item.id, output_index: item.index }
    let out = ""
    let done: ResponseItem
    switch (item.kind) {
      case "message": {
        const part = { type: "output_text", text: item.text, annotations: [] }
        out += this.event("response.output_text.done", { ...at, content_index: 0, text: item.text, logprobs: [] })
        out += this.event("response.content_part.done", { ...at, content_index: 0, part })
        done = { type: "message", id: item.id, status: "completed", role: "assistant", content: [part] }
        break
      }
      case "reasoning": {
        const part = { type: "summary_text", text: item.text }
        out += this.event("response.reasoning_summary_text.done", { ...at, summary_index: 0, text: item.text })
        out += this.event("response.reasoning_summary_part.done", { ...at, summary_index: 0, part })
        done = reasoningItem(item.id, item.text, item.signature ? { provider: this.provider, thinking: item.text, signature: item.signature } : undefined)
        break
      }
      case "tool":
        return ""
    }
    this.output[item.index] = done
    return out + this.event("response.output_item.done", { output_index: item.index, item: done })
  }

  /** Tool calls stay open until the answer ends (their arguments may keep arriving); they are finished then. */
  private finishTools(): string {
    let out = ""
    for (const tool of this.tools) {
      if (tool === undefined) continue
      const done = callItem(this.table, tool.id, tool.callId, tool.name, tool.args)
      if (done.type === "function_call") out += this.event("response.function_call_arguments.done", { item_id: tool.id, output_index: tool.index, arguments: tool.args })
      if (done.type === "custom_tool_call") {
        out += this.event("response.custom_tool_call_input.delta", { item_id: tool.id, output_index: tool.index, delta: done.input })
        out += this.event("response.custom_tool_call_input.done", { item_id: tool.id, output_index: tool.index, input: done.input })
      }
      this.output[tool.index] = done
      out += this.event("response.output_item.done", { output_index: tool.index, item: done })
    }
    this.tools.length = 0
    return out
  }

  private added(item: ResponseItem): string {
    return this.event("response.output_item.added", { output_index: this.output.length, item })
  }

  text(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { content: text }, undefined)
    let out = this.start()
    if (this.open?.kind !== "message") {
      out += this.close()
      const id = this.ids.item("msg")
      out += this.added({ type: "message", id, status: "in_progress", role: "assistant", content: [] })
      this.open = { kind: "message", index: this.output.length, id, text: "" }
      this.output.push({ type: "message", id })
      out += this.event("response.content_part.added", { item_id: id, output_index: this.open.index, content_index: 0, part: { type: "output_text", text: "", annotations: [] } })
    }
    this.open.text += text
    return out + this.event("response.output_text.delta", { item_id: this.open.id, output_index: this.open.index, content_index: 0, delta: text, logprobs: [] })
  }

  private reasoningItemOpen(): string {
    if (this.open?.kind === "reasoning") return ""
    let out = this.start() + this.close()
    const id = this.ids.item("rs")
    out += this.added({ type: "reasoning", id, summary: [] })
    this.open = { kind: "reasoning", index: this.output.length, id, text: "", signature: "" }
    this.output.push({ type: "reasoning", id })
    return out + this.event("response.reasoning_summary_part.added", { item_id: id, output_index: this.open.index, summary_index: 0, part: { type: "summary_text", text: "" } })
  }

  reasoning(text: string): string {
    if (!text) return ""
    this.assembly.add(0, { reasoning_content: text }, undefined)
    const out = this.reasoningItemOpen()
    const open = this.open as OpenItem & { kind: "reasoning" }
    open.text += text
    return out + this.event("response.reasoning_summary_text.delta", { item_id: open.id, output_index: open.index, summary_index: 0, delta: text })
  }

  reasoningSignature(signature: string): string {
    this.assembly.add(0, { reasoning_signature: signature }, undefined)
    const out = this.reasoningItemOpen()
    ;(this.open as OpenItem & { kind: "reasoning" }).signature = signature
    return out
  }

  toolCall(index: number, id: string, name: string, args: string, extra?: ToolCall["extra_content"]): string {
    this.assembly.add(0, { tool_calls: [{ index, id, function: { name, arguments: args }, ...(extra ? { extra_content: extra } : {}) }] }, undefined)
    let out = this.start() + this.close()
    const thoughtSignature = extra?.google?.thought_signature
    if (thoughtSignature) {
      const item = reasoningItem(this.ids.item("rs"), "", { provider: this.provider, thoughtSignature })
      out += this.added(item)
      out += this.event("response.output_item.done", { output_index: this.output.length, item })
      this.output.push(item)
    }
    const itemId = this.ids.item("fc")
    const entry = this.table.entry(name)
    const tool = { kind: "tool" as const, index: this.output.length, id: itemId, call: index, callId: id, name, args }
    this.tools[index] = tool
    const pending = callItem(this.table, itemId, id, name, "")
    out += this.added({ ...pending, status: "in_progress", ...(entry.kind === "function" ? { arguments: "" } : {}) })
    this.output.push(pending)
    return out + (entry.kind === "function" && args ? this.event("response.function_call_arguments.delta", { item_id: itemId, output_index: tool.index, delta: args }) : "")
  }

  toolArguments(index: number, fragment: string): string {
    if (!fragment) return ""
    this.assembly.add(0, { tool_calls: [{ index, function: { arguments: fragment } }] }, undefined)
    const tool = this.tools[index]
    if (tool === undefined) return ""
    tool.args += fragment
    // custom tools' input is a string inside the JSON the model writes: it is given whole when the call is done
    return this.table.entry(tool.name).kind === "function"
      ? this.event("response.function_call_arguments.delta", { item_id: tool.id, output_index: tool.index, delta: fragment })
      : ""
  }

  fail(error: ProviderError): string {
    this.assembly.error = error
    if (this.complete) return ""
    this.complete = true
    const body = { code: error.body.error.code ?? error.body.error.type, message: error.body.error.message, param: null }
    return this.start() + this.event("error", { error: { type: error.body.error.type, ...body } }) +
      this.event("response.failed", { response: this.snapshot("failed", error) })
  }

  /** The response: the items as streamed once the answer is complete; else what the answer holds so far. */
  private response() {
    const completion = this.assembly.completion()
    const ended = this.complete && this.assembly.error === null
    return responseObject(
      {
        id: this.ids.response,
        model: completion.model,
        output: ended ? this.output : outputItems(completion, this.table, this.provider, this.ids.item),
        finish: completion.choices[0]?.finish_reason ?? null,
        usage: this.assembly.usage
      },
      this.request
    )
  }

  end(): string {
    if (this.complete) return ""
    const out = this.start() + this.close() + this.finishTools()
    this.complete = true
    const response = this.response()
    return out + this.event(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response })
  }

  answer(): StreamAnswer {
    return { text: JSON.stringify(this.response()), usage: this.assembly.usage, error: this.assembly.error }
  }
}

/**
 * The Responses adapter of a translated provider for one request: its tools and the earlier turns of its chain
 * (`earlier`, which the provider does not keep) are read once, for the request and for the answer.
 */
export const responsesViaChat = (
  request: ResponsesRequest,
  earlier: ReadonlyArray<ResponseItem>,
  provider: TranslatedAdapter,
  family: string
): ProviderAdapter<ResponsesRequest> => {
  const table = new ToolTable(request.tools ?? [])
  return viaChat<ResponsesRequest>({
    toChat: (_request, ctx) => responsesToChat(request, earlier, table, ctx, family),
    fromCompletion: (completion, usage, ctx) => {
      const answerIds = ids(ctx)
      return JSON.stringify(responseObject(
        { id: answerIds.response, model: completion.model, output: outputItems(completion, table, family, answerIds.item), finish: completion.choices[0]?.finish_reason ?? null, usage },
        request
      ))
    },
    sink: (ctx) => new ResponsesSink(request, table, family, ctx)
  }, provider)
}
