/**
 * The fake Amazon Bedrock runtime: Converse (whole and streamed), InvokeModel for Anthropic models (the Messages body
 * in, a Message or event-stream chunks carrying Anthropic events out), CountTokens, and the Titan and Cohere
 * embedding models through InvokeModel.
 */
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { anthropicEvents, anthropicMessage } from "./anthropic.ts"
import { fakeEmbedding } from "./embeddings.ts"
import { FAKE_CACHE_READ_TOKENS, FAKE_CACHE_WRITE_TOKENS, pieces, type Prompt, type Script } from "./script.ts"

const utf8 = new TextEncoder()
const codec = new EventStreamCodec((bytes) => new TextDecoder().decode(bytes), (text) => utf8.encode(text))

export const readBedrock = (body: any, length: number): Prompt => {
  const blocks: Array<any> = body.messages?.at(-1)?.content ?? []
  const result = blocks.find((b) => b.toolResult)
  return {
    userText: blocks.filter((b) => typeof b.text === "string").map((b) => b.text).join(""),
    toolResult: result ? result.toolResult.content.map((c: any) => c.text ?? JSON.stringify(c.json)).join("") : null,
    toolNames: (body.toolConfig?.tools ?? []).map((t: any) => t.toolSpec?.name),
    bodyLength: length
  }
}

const bedrockUsage = (s: Script) => ({
  inputTokens: s.usage.input,
  outputTokens: s.usage.output,
  totalTokens: s.usage.input + s.usage.output + FAKE_CACHE_READ_TOKENS + FAKE_CACHE_WRITE_TOKENS,
  cacheReadInputTokens: FAKE_CACHE_READ_TOKENS,
  cacheWriteInputTokens: FAKE_CACHE_WRITE_TOKENS
})

const bedrockStop = { stop: "end_turn", length: "max_tokens", tool: "tool_use", refuse: "content_filtered" } as const

export const bedrockResponse = (s: Script) => ({
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

export function* bedrockStream(s: Script): Generator<Uint8Array> {
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

export const bedrockErrorType = (status: number): string =>
  ({ 400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException", 429: "ThrottlingException", 503: "ServiceUnavailableException" })[status] ?? "InternalServerException"

// --- InvokeModel

/** An Anthropic model on Bedrock answers the Message Anthropic would. */
export const bedrockMessage = (s: Script, model: string) => anthropicMessage(s, model, "msg_bdrk_fake")

/** InvokeModel's stream: one `chunk` frame per Anthropic event, its JSON base64-encoded in `bytes`. */
export function* bedrockMessageStream(s: Script, model: string): Generator<Uint8Array> {
  for (const event of anthropicEvents(s, model, "msg_bdrk_fake")) {
    if (event.type === "ping") continue
    if (event.type === "error") {
      yield bedrockFrame("exception", "throttlingException", { message: "Too many requests, please wait before trying again." })
      return
    }
    yield bedrockFrame("event", "chunk", { bytes: Buffer.from(JSON.stringify(event)).toString("base64") })
  }
}

/** CountTokens: the InvokeModel body arrives base64-encoded. */
export const bedrockTokenCount = (body: any) => {
  const invoke = Buffer.from(body.input?.invokeModel?.body ?? "", "base64").toString("utf8")
  return { inputTokens: 8 + Math.ceil(invoke.length / 4) }
}

/** Titan (one text a call, its token count in the body) or Cohere (several texts; counts only in a header). */
export const bedrockEmbeddings = (model: string, body: any): { readonly body: object; readonly headers: Record<string, string> } => {
  if (model.startsWith("amazon.titan-embed")) {
    const text = String(body.inputText ?? "")
    const tokens = Math.ceil(text.length / 4)
    return {
      body: { embedding: fakeEmbedding(text, body.dimensions ?? 1024), inputTextTokenCount: tokens },
      headers: { "x-amzn-bedrock-input-token-count": String(tokens) }
    }
  }
  const texts: Array<string> = body.texts ?? []
  const tokens = texts.reduce((sum, text) => sum + Math.ceil(text.length / 4), 0)
  return {
    body: { id: "emb_fake", response_type: "embeddings_floats", embeddings: texts.map((text) => fakeEmbedding(text, 1024)), texts },
    headers: { "x-amzn-bedrock-input-token-count": String(tokens) }
  }
}
