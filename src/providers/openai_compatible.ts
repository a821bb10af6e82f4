/**
 * Named OpenAI-compatible upstreams (Ollama, vLLM, Groq, ...): the chat-completions wire format at the
 * configured base URL (up to `/v1`), with a bearer key only when the caller gives one (local servers take none).
 */
import type { TranslatedAdapter } from "./stream.ts"
import { bearerAuth, chatCompletionsUrl, openAIWire } from "./openai.ts"

export const openaiCompatible: TranslatedAdapter = openAIWire({ url: chatCompletionsUrl, authHeaders: bearerAuth })
