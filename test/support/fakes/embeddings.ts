/** Deterministic fake embeddings: texts sharing words get close vectors. */

/** Each word adds ±1 to a dimension picked by its hash; a text's vector is the normalised sum. */
export const fakeEmbedding = (text: string, dimensions: number): Array<number> => {
  const vector = new Array<number>(dimensions).fill(0)
  for (const word of text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length > 2)) {
    let hash = 2166136261
    for (let i = 0; i < word.length; i++) hash = Math.imul(hash ^ word.charCodeAt(i), 16777619)
    vector[(hash >>> 0) % dimensions]! += hash & 1 ? 1 : -1
  }
  const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0)) || 1
  return vector.map((value) => value / norm)
}

/** The inputs of an OpenAI embeddings request, as texts. */
export const embeddingInputs = (body: any): Array<string> =>
  typeof body.input === "string" ? [body.input] : Array.isArray(body.input) ? body.input.map((input: unknown) => String(input)) : []

/** The OpenAI embeddings answer for `body`; its usage counts a token per 4 characters. */
export const openAIEmbeddings = (body: any) => {
  const inputs = embeddingInputs(body)
  const dimensions = typeof body.dimensions === "number" ? body.dimensions : 1536
  const tokens = inputs.reduce((sum, input) => sum + Math.ceil(input.length / 4), 0)
  return {
    object: "list",
    data: inputs.map((input, index) => ({ object: "embedding", index, embedding: fakeEmbedding(input, dimensions) })),
    model: body.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens }
  }
}
