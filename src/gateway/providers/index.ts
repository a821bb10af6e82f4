/** The provider adapters by provider type. */
import type { ProviderType } from "../../domain/capture.ts"
import { anthropic } from "./anthropic.ts"
import { azure } from "./azure.ts"
import { bedrock } from "./bedrock.ts"
import { gemini } from "./gemini.ts"
import { openai } from "./openai.ts"
import { openaiCompatible } from "./openai_compatible.ts"
import type { ProviderAdapter } from "./types.ts"

const adapters: Record<ProviderType, ProviderAdapter> = {
  openai,
  azure,
  anthropic,
  gemini,
  bedrock,
  openai_compatible: openaiCompatible
}

export const adapterFor = (type: ProviderType): ProviderAdapter => adapters[type]

export type { ChatRequest } from "./chat.ts"
export type * from "./types.ts"
export { UnsupportedRequest } from "./types.ts"
