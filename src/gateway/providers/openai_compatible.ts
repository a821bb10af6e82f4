/**
 * Named OpenAI-compatible upstreams (Ollama, vLLM, Groq, ...): the chat-completions wire format at the
 * configured base URL (up to `/v1`), with a bearer key only when the caller gives one (local servers take none).
 */
import { bearerAuth, chatCompletionsUrl, openAIWire } from "./openai.ts"
import type { TranslatedAdapter } from "./types.ts"

export const openaiCompatible: TranslatedAdapter = openAIWire({ url: chatCompletionsUrl, authHeaders: bearerAuth })
