/**
 * Messages to Anthropic itself: the caller's body goes as it came (only a routing prefix is taken off the model), with
 * its `anthropic-version` and `anthropic-beta` headers unchanged, and the answer comes back as Anthropic sent it,
 * events relayed as they arrive.
 */
import { withModel, opensObject } from "../../providers/body.ts"
import { anthropicError, ANTHROPIC_VERSION } from "../../providers/anthropic.ts"
import type { CallContext, ProviderAdapter } from "../../providers/index.ts"
import { SseDecoder } from "../../providers/sse.ts"
import { MessagesRelay } from "./relay.ts"
import type { MessagesRequest } from "./request.ts"

/** The headers of a Messages call to Anthropic's API (Bedrock's Anthropic API takes the same). */
export const anthropicHeaders = (ctx: CallContext, apiKeyHeader: (key: string) => Record<string, string>): Record<string, string> => ({
  "content-type": "application/json",
  accept: ctx.stream ? "text/event-stream" : "application/json",
  "anthropic-version": ctx.passHeaders?.["anthropic-version"] ?? ANTHROPIC_VERSION,
  ...(ctx.passHeaders?.["anthropic-beta"] === undefined ? {} : { "anthropic-beta": ctx.passHeaders["anthropic-beta"] }),
  ...(ctx.apiKey ? apiKeyHeader(ctx.apiKey) : {})
})

export const messagesToAnthropic: ProviderAdapter<MessagesRequest> = {
  prepare(request, ctx) {
    const body = withModel(ctx, request.model) ?? JSON.stringify({ ...request, model: ctx.model })
    return { url: `${ctx.baseUrl}/v1/messages`, headers: anthropicHeaders(ctx, (key) => ({ "x-api-key": key })), body }
  },
  // relayed as received; the builder reads the usage from it
  response: (bodyText) => {
    if (!opensObject(bodyText)) throw new Error("the answer is not a JSON object")
    return { text: bodyText, usage: null }
  },
  stream: () => new MessagesRelay((onEvent) => new SseDecoder(onEvent)),
  error: anthropicError
}
