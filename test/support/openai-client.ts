/**
 * The `openai` SDK pointed at a gateway as a caller configures it: the Gateway Key as its API key, the attribution
 * as query parameters, the provider's key in `x-service-provider-api-key`, and no retries (a test sees the first
 * answer). With `dispatcher`, its requests go through that undici dispatcher (e.g. an Agent of their own, for
 * connections of their own).
 */
import OpenAI from "openai"
import { type Dispatcher, fetch } from "undici"

export const gatewayClient = (
  gateway: { readonly baseURL: string; readonly gatewayKey: string },
  options: { readonly query: Record<string, string>; readonly providerKey: string; readonly dispatcher?: Dispatcher }
) =>
  new OpenAI({
    baseURL: gateway.baseURL,
    apiKey: gateway.gatewayKey,
    defaultQuery: options.query,
    defaultHeaders: { "x-service-provider-api-key": options.providerKey },
    maxRetries: 0,
    // the SDK's fetch must come from the same undici as the dispatcher
    ...(options.dispatcher === undefined ? {} : { fetch: fetch as never, fetchOptions: { dispatcher: options.dispatcher } as never })
  })
