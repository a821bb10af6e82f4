/**
 * Messages to Anthropic models on Amazon Bedrock (InvokeModel, `/model/{id}/invoke[-with-response-stream]`), which
 * take the Messages body itself: the model and `stream` leave the body for the path, `anthropic_version` and the
 * `anthropic-beta` flags go into it. The answer is a Message; a streamed one arrives as AWS event-stream frames
 * whose chunks each carry one Anthropic event, relayed as server-sent events.
 */
import { bedrock, bedrockModelIsClaude, EventStreamDecoder } from "../../providers/bedrock.ts"
import { opensObject } from "../../providers/body.ts"
import { type ProviderAdapter, UnsupportedRequest } from "../../providers/index.ts"
import type { EventDecoder } from "../../providers/stream.ts"
import { MessagesRelay } from "./relay.ts"
import type { MessagesRequest } from "./request.ts"

const BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"

/** Bedrock's stream exceptions as Anthropic error types. */
const ERROR_TYPES: Record<string, string> = {
  validationException: "invalid_request_error",
  accessDeniedException: "permission_error",
  resourceNotFoundException: "not_found_error",
  throttlingException: "rate_limit_error",
  serviceUnavailableException: "overloaded_error",
  modelTimeoutException: "timeout_error"
}

/** Event-stream frames → Anthropic events: a chunk's `bytes` is one event's JSON; an exception becomes an error event. */
const chunkDecoder = (onEvent: (event: string, data: string) => void): EventDecoder =>
  new EventStreamDecoder((name, data) => {
    if (name === "chunk") {
      const bytes = (JSON.parse(data) as { bytes?: string }).bytes
      if (bytes !== undefined) onEvent("", Buffer.from(bytes, "base64").toString("utf8"))
      return
    }
    let message = data
    try {
      message = String((JSON.parse(data) as { message?: unknown }).message ?? data)
    } catch {
      // a frame error's text
    }
    onEvent("error", JSON.stringify({ type: "error", error: { type: ERROR_TYPES[name] ?? "api_error", message } }))
  })

export const messagesToBedrock: ProviderAdapter<MessagesRequest> = {
  prepare(request, ctx) {
    if (!bedrockModelIsClaude(ctx.model)) {
      throw new UnsupportedRequest(`bedrock/${ctx.model} is not an Anthropic model: /v1/messages reaches Anthropic models on Bedrock`, "model")
    }
    const { model: _model, stream: _stream, ...rest } = request
    const beta = ctx.passHeaders?.["anthropic-beta"]
    const body = {
      anthropic_version: BEDROCK_ANTHROPIC_VERSION,
      ...(beta === undefined ? {} : { anthropic_beta: beta.split(",").map((flag) => flag.trim()).filter((flag) => flag !== "") }),
      ...rest
    }
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: ctx.stream ? "application/vnd.amazon.eventstream" : "application/json"
    }
    if (ctx.apiKey) headers.authorization = `Bearer ${ctx.apiKey}`
    const operation = ctx.stream ? "invoke-with-response-stream" : "invoke"
    return { url: `${ctx.baseUrl}/model/${encodeURIComponent(ctx.model)}/${operation}`, headers, body: JSON.stringify(body) }
  },
  response: (bodyText) => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },
  stream: () => new MessagesRelay(chunkDecoder),
  error: bedrock.error
}
