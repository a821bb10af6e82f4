/**
 * `POST /v1/embeddings` (the OpenAI shape). A bare model goes to OpenAI; `azure/` and named upstreams get the body as
 * it came; `gemini/` and `bedrock/` (Titan, Cohere) are translated. Anthropic has no embeddings.
 */
import type { ProviderType } from "../../domain/capture.ts"
import {
  embeddingsToAzure,
  embeddingsToBedrock,
  embeddingsToGemini,
  embeddingsToOpenAI,
  type EmbeddingsRequest
} from "../embeddings/adapters.ts"
import { gatewayError } from "../GatewayServer.ts"
import type { ProviderAdapter, ProviderError } from "../../providers/index.ts"
import { callContext, openAIErrorText, type PlanInput, routed, type Surface } from "./surface.ts"

export const EMBEDDINGS = "POST /v1/embeddings"

const ADAPTERS: Partial<Record<ProviderType, (request: EmbeddingsRequest) => ProviderAdapter<EmbeddingsRequest>>> = {
  openai: () => embeddingsToOpenAI,
  openai_compatible: () => embeddingsToOpenAI,
  azure: () => embeddingsToAzure,
  gemini: embeddingsToGemini,
  bedrock: embeddingsToBedrock
}

const isInput = (input: unknown): boolean =>
  typeof input === "string" ||
  (Array.isArray(input) && input.length > 0 &&
    (input.every((item) => typeof item === "string") || input.every((item) => typeof item === "number") ||
      input.every((item) => Array.isArray(item) && item.every((token) => typeof token === "number"))))

const validate = (request: Record<string, unknown>): ProviderError | undefined => {
  if (request.input === undefined) return gatewayError(400, "input is required: a string or an array of strings", "missing_parameter", "input")
  if (!isInput(request.input)) {
    return gatewayError(400, "input must be a string, a non-empty array of strings, or token arrays", "invalid_parameter", "input")
  }
  const dimensions = request.dimensions
  if (dimensions !== undefined && (typeof dimensions !== "number" || !Number.isInteger(dimensions) || dimensions < 1)) {
    return gatewayError(400, "dimensions must be a positive integer", "invalid_parameter", "dimensions")
  }
  return undefined
}

export const embeddingsSurface: Surface = {
  route: EMBEDDINGS,
  api: "embeddings",
  apiKeyHeader: false,
  shape: "the embeddings shape",
  errorText: openAIErrorText,
  plan(body, input: PlanInput) {
    const checked = routed(body, input, "openai", validate)
    if ("status" in checked) return checked
    const { target } = checked
    const adapterFor = ADAPTERS[target.route.type]
    if (adapterFor === undefined) {
      return gatewayError(400, `${target.route.name} has no embeddings: use openai/, azure/, gemini/, bedrock/ or a named upstream`, "unsupported_for_provider", "model")
    }
    const ctx = callContext(target, input, { stream: false })
    const request = checked.request as unknown as EmbeddingsRequest
    return { route: target.route, adapter: adapterFor(request), request, ctx }
  }
}
