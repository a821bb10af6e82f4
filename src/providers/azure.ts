/**
 * Azure OpenAI: the chat-completions wire format addressed by deployment (the model name is the deployment),
 * with the key in `api-key`.
 */
import { openAIWire } from "./openai.ts"
import type { CallContext } from "./types.ts"
import type { TranslatedAdapter } from "./stream.ts"

/** The GA api-version used when the gateway is not configured with one. */
const DEFAULT_API_VERSION = "2024-10-21"

const deploymentUrl = (ctx: CallContext): string =>
  `${ctx.baseUrl}/openai/deployments/${encodeURIComponent(ctx.model)}/chat/completions?api-version=${
    encodeURIComponent(ctx.apiVersion ?? DEFAULT_API_VERSION)
  }`

export const azure: TranslatedAdapter = openAIWire({
  url: deploymentUrl,
  authHeaders: (apiKey) => ({ "api-key": apiKey })
})
