/**
 * Another API surface on a provider reached through the chat form: the surface's request is read into a chat
 * request, the provider's adapter translates that as it does for chat completions, and its answer — a completion,
 * or a stream written to the surface's own sink — comes back in the surface's format.
 */
import type { Usage } from "../domain/usage.ts"
import type { ChatCompletion, ChatRequest } from "./chatCompletions.ts"
import type { AnswerSink, TranslatedAdapter } from "./stream.ts"
import type { CallContext, ProviderAdapter } from "./types.ts"

/** How a surface's format maps to the chat form and back. */
export interface ChatCodec<Request> {
  /** throws `UnsupportedRequest` for what the chat form cannot carry */
  toChat(request: Request, ctx: CallContext): ChatRequest
  /** a whole answer in the surface's format (JSON text) */
  fromCompletion(completion: ChatCompletion, usage: Usage | null, ctx: CallContext): string
  /** the sink a streamed answer is written to */
  sink(ctx: CallContext): AnswerSink
}

export const viaChat = <Request>(codec: ChatCodec<Request>, provider: TranslatedAdapter): ProviderAdapter<Request> => ({
  // the caller's body is in another format: the provider's adapter must not forward it as it is
  prepare: (request, ctx) => provider.prepare(codec.toChat(request, ctx), { ...ctx, requestText: undefined, requestBytes: undefined }),
  response: (bodyText, ctx) => {
    const { completion, usage } = provider.completion(bodyText, ctx)
    return { text: codec.fromCompletion(completion, usage, ctx), usage }
  },
  stream: (ctx) => provider.streamTo(ctx, codec.sink(ctx)),
  error: provider.error
})
