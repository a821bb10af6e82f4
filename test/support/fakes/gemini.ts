/** The fake Gemini API: generateContent (whole and streamed), countTokens and batchEmbedContents. */
import { fakeEmbedding } from "./embeddings.ts"
import { FAKE_CACHE_READ_TOKENS, pieces, type Prompt, type Script } from "./script.ts"

export const GEMINI_THOUGHT_SIGNATURE = "c2lnbmF0dXJlLWZha2U="

export const readGemini = (body: any, length: number): Prompt => {
  const parts: Array<any> = body.contents?.at(-1)?.parts ?? []
  const result = parts.find((p) => p.functionResponse)
  return {
    userText: parts.filter((p) => typeof p.text === "string").map((p) => p.text).join(""),
    toolResult: result ? JSON.stringify(result.functionResponse.response) : null,
    toolNames: (body.tools?.[0]?.functionDeclarations ?? []).map((f: any) => f.name),
    bodyLength: length
  }
}

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

export const geminiResponse = (s: Script, model: string) => ({
  candidates: [{
    content: { role: "model", parts: geminiParts(s, s.text) },
    finishReason: geminiFinish[s.finish],
    index: 0
  }],
  usageMetadata: geminiUsage(s),
  modelVersion: model,
  responseId: "fake-response-id"
})

export function* geminiStream(s: Script, model: string): Generator<string> {
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

export const geminiStatus = (status: number): string =>
  ({ 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE" })[status] ?? "INTERNAL"

/** `countTokens` (a `generateContentRequest` or bare `contents`): deterministic, from the request's size. */
export const geminiTokenCount = (body: any) => ({
  totalTokens: 8 + Math.ceil(JSON.stringify(body.generateContentRequest ?? body.contents ?? {}).length / 4)
})

/** `batchEmbedContents`: one vector per request, with no usage (as the Gemini API answers). */
export const geminiEmbeddings = (body: any) => ({
  embeddings: (body.requests ?? []).map((request: any) => ({
    values: fakeEmbedding(
      (request.content?.parts ?? []).map((part: any) => part.text ?? "").join(" "),
      typeof request.outputDimensionality === "number" ? request.outputDimensionality : 3072
    )
  }))
})
