/**
 * An embeddings capture as the call view. The request's inputs are what the model was given (one user turn, the
 * first of them); the answer is what came back — how many vectors of how many dimensions, never the vectors, which
 * the gateway does not capture.
 */
import type { Capture } from "../domain/capture.ts"
import { asArray, type ChatCall, NO_ANSWER, readExchange } from "./chatCall.ts"

/** Inputs shown in the user turn; the count and size cover all of them. */
const SHOWN_INPUTS = 20

const inputTexts = (input: unknown): Array<string> =>
  typeof input === "string"
    ? [input]
    : asArray(input).map((item) =>
      typeof item === "string" ? item : Array.isArray(item) ? `[${item.length} tokens]` : typeof item === "number" ? String(item) : JSON.stringify(item)
    )

const count = (value: unknown): number | undefined => (typeof value === "number" && value >= 0 ? value : undefined)

export const readEmbeddingsCall = (capture: Capture): ChatCall => {
  const problems: Array<string> = []
  const { request, response } = readExchange(capture, problems)
  const input = request?.input
  // an array of token ids is one input
  const texts = Array.isArray(input) && input.every((item) => typeof item === "number") ? [`[${input.length} tokens]`] : inputTexts(input)
  const characters = texts.reduce((sum, text) => sum + text.length, 0)
  const vectors = count(response?.data) ?? asArray(response?.data).length
  const dimensions = count(response?.dimensions) ?? count(request?.dimensions)
  const shown = texts.slice(0, SHOWN_INPUTS).join("\n")
  return {
    messages: [{
      index: 0,
      source: "input",
      role: "user",
      text: texts.length > SHOWN_INPUTS ? `${shown}\n… and ${texts.length - SHOWN_INPUTS} more inputs` : shown,
      images: [],
      files: [],
      toolCalls: [],
      toolCallId: undefined,
      toolName: undefined
    }],
    embeddings: { inputs: texts.length, characters, dimensions },
    toolsOffered: [],
    responseFormat: "text",
    schemaName: undefined,
    answer: response === undefined
      ? NO_ANSWER
      : { ...NO_ANSWER, text: `${vectors} embedding${vectors === 1 ? "" : "s"}${dimensions === undefined ? "" : ` of ${dimensions} dimensions`}`, finishReason: "stop" },
    problems
  }
}
