/**
 * The `openai` SDK pointed at a gateway as a caller configures it: the Gateway Key as its API key, the attribution
 * as query parameters, the provider's key in `x-service-provider-api-key`, and no retries (a test sees the first
 * answer).
 */
import OpenAI from "openai"

export const gatewayClient = (
  gateway: { readonly baseURL: string; readonly gatewayKey: string },
  options: { readonly query: Record<string, string>; readonly providerKey: string }
) =>
  new OpenAI({
    baseURL: gateway.baseURL,
    apiKey: gateway.gatewayKey,
    defaultQuery: options.query,
    defaultHeaders: { "x-service-provider-api-key": options.providerKey },
    maxRetries: 0
  })
