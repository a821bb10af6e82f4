/** The provider adapters by provider type. */
import type { ProviderType } from "../domain/capture.ts"
import { anthropic } from "./anthropic.ts"
import { azure } from "./azure.ts"
import { bedrock } from "./bedrock.ts"
import { gemini } from "./gemini.ts"
import { openai } from "./openai.ts"
import { openaiCompatible } from "./openai_compatible.ts"
import type { TranslatedAdapter } from "./stream.ts"

/** Every provider family speaks chat completions, passed through or translated. */
const adapters: Record<ProviderType, TranslatedAdapter> = {
  openai,
  azure,
  anthropic,
  gemini,
  bedrock,
  openai_compatible: openaiCompatible
}

export const adapterFor = (type: ProviderType): TranslatedAdapter => adapters[type]

export type { ChatRequest } from "./chatCompletions.ts"
export type * from "./types.ts"
export type { TranslatedAdapter } from "./stream.ts"
export { UnsupportedRequest } from "./types.ts"
