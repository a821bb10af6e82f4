/**
 * The price table and the cost of one call.
 *
 * Prices are list prices in USD per 1M tokens for standard processing (no batch or priority tiers, the
 * ≤200k-token context tier where a provider has two), taken from the providers' public price pages as of
 * PRICE_TABLE_DATE. Keys are model ids or family prefixes: a dated or suffixed id (`gpt-4o-2024-08-06`,
 * `claude-3-5-sonnet-latest`, `gemini-2.0-flash-001`) is priced by the longest key it starts with, cut at a
 * `-`, `:` or `@` so that `gpt-4` never prices `gpt-4o` or `gpt-4.5`.
 *
 * Token semantics are chat-completions': `prompt_tokens` includes cached and cache-written tokens, so the
 * uncached input is `prompt - cached - cache_write`; reasoning tokens are part of `completion_tokens`.
 */
import type { Capture, ProviderType } from "../domain/capture.ts"
import type { Usage } from "../domain/usage.ts"
import type { Cost } from "../domain/decision.ts"
import { roundTo } from "./numbers.ts"

export const PRICE_TABLE_DATE = "2026-11"

/**
 * USD per 1M tokens. Without `cachedInput`/`cacheWrite` those tokens are billed at the input price; one-hour cache
 * writes (Anthropic) at `cacheWrite1h`, else as other cache writes.
 */
export interface ModelPrice {
  readonly input: number
  readonly output: number
  readonly cachedInput?: number
  readonly cacheWrite?: number
  readonly cacheWrite1h?: number
}

/** The price tables; Azure prices its deployments from `openai`, Bedrock's Anthropic models from `anthropic`. */
type PriceFamily = "openai" | "anthropic" | "gemini" | "bedrock"

const price = (input: number, output: number, cachedInput?: number): ModelPrice =>
  cachedInput === undefined ? { input, output } : { input, output, cachedInput }

/**
 * Anthropic bills 5-minute cache writes at 1.25× and one-hour writes at 2× the input price, and cache reads at 0.1×
 * unless the model's own read price is lower (`cacheRead`).
 */
const anthropicPrice = (input: number, output: number, cacheRead = roundTo(input * 0.1, 6)): ModelPrice => ({
  input,
  output,
  cachedInput: cacheRead,
  cacheWrite: roundTo(input * 1.25, 6),
  cacheWrite1h: roundTo(input * 2, 6)
})

/** Embedding models bill their input only. */
const embeddingPrice = (input: number): ModelPrice => ({ input, output: 0 })

const PRICES: Record<PriceFamily, Record<string, ModelPrice>> = {
  openai: {
    "gpt-5.6-sol": { ...price(5, 30, 0.5), cacheWrite: 6.25 },
    "gpt-5.6-terra": { ...price(2, 12, 0.2), cacheWrite: 2.5 },
    "gpt-5.6-luna": { ...price(0.2, 1.2, 0.02), cacheWrite: 0.25 },
    "gpt-5.5": price(5, 30, 0.5),
    "gpt-5.4": price(2.5, 15, 0.25),
    "gpt-5.3-codex": price(1.75, 14, 0.175),
    "gpt-5.2": price(1.75, 14, 0.175),
    "gpt-5.2-codex": price(1.75, 14, 0.175),
    "gpt-5.2-pro": price(21, 168),
    "gpt-5.1": price(1.25, 10, 0.125),
    "gpt-5.1-codex": price(1.25, 10, 0.125),
    "gpt-5.1-codex-max": price(1.25, 10, 0.125),
    "gpt-5.1-codex-mini": price(0.25, 2, 0.025),
    "gpt-5": price(1.25, 10, 0.125),
    "gpt-5-codex": price(1.25, 10, 0.125),
    "codex-mini-latest": price(1.5, 6, 0.375),
    "gpt-5-mini": price(0.25, 2, 0.025),
    "gpt-5-nano": price(0.05, 0.4, 0.005),
    "gpt-5-pro": price(15, 120),
    "gpt-4.1": price(2, 8, 0.5),
    "gpt-4.1-mini": price(0.4, 1.6, 0.1),
    "gpt-4.1-nano": price(0.1, 0.4, 0.025),
    "gpt-4o": price(2.5, 10, 1.25),
    "gpt-4o-2024-05-13": price(5, 15),
    "gpt-4o-mini": price(0.15, 0.6, 0.075),
    "chatgpt-4o-latest": price(5, 15),
    "o1": price(15, 60, 7.5),
    "o1-pro": price(150, 600),
    "o1-mini": price(1.1, 4.4, 0.55),
    "o3": price(2, 8, 0.5),
    "o3-pro": price(20, 80),
    "o3-mini": price(1.1, 4.4, 0.55),
    "o4-mini": price(1.1, 4.4, 0.275),
    "gpt-4-turbo": price(10, 30),
    "gpt-4": price(30, 60),
    "gpt-3.5-turbo": price(0.5, 1.5),
    "text-embedding-3-small": embeddingPrice(0.02),
    "text-embedding-3-large": embeddingPrice(0.13),
    "text-embedding-ada-002": embeddingPrice(0.1)
  },
  anthropic: {
    "claude-opus-5-5": anthropicPrice(4, 20, 0.2),
    "claude-opus-5": anthropicPrice(5, 25),
    "claude-opus-4-8": anthropicPrice(5, 25),
    "claude-opus-4-7": anthropicPrice(5, 25),
    "claude-opus-4-6": anthropicPrice(5, 25),
    "claude-sonnet-5-5": anthropicPrice(2, 10, 0.1),
    "claude-sonnet-5": anthropicPrice(2, 10),
    "claude-sonnet-4-6": anthropicPrice(3, 15),
    "claude-haiku-5-5": anthropicPrice(0.1, 0.5, 0.01),
    "claude-fable-5-1": anthropicPrice(10, 50, 0.25),
    "claude-fable-5": anthropicPrice(10, 50),
    "claude-mythos-5-1": anthropicPrice(10, 50, 0.25),
    "claude-mythos-5": anthropicPrice(10, 50),
    "claude-opus-4-5": anthropicPrice(5, 25),
    "claude-opus-4-1": anthropicPrice(15, 75),
    "claude-opus-4": anthropicPrice(15, 75),
    "claude-sonnet-4-5": anthropicPrice(3, 15),
    "claude-sonnet-4": anthropicPrice(3, 15),
    "claude-haiku-4-5": anthropicPrice(1, 5),
    "claude-3-7-sonnet": anthropicPrice(3, 15),
    "claude-3-5-sonnet": anthropicPrice(3, 15),
    "claude-3-5-haiku": anthropicPrice(0.8, 4),
    "claude-3-opus": anthropicPrice(15, 75),
    "claude-3-haiku": anthropicPrice(0.25, 1.25)
  },
  gemini: {
    "gemini-3.5-flash": price(1.5, 9, 0.15),
    "gemini-3.1-pro-preview": price(2, 12, 0.2),
    "gemini-3-flash-preview": price(0.5, 3, 0.05),
    "gemini-3-pro-preview": price(2, 12, 0.2),
    "gemini-2.5-pro": price(1.25, 10, 0.125),
    "gemini-2.5-flash": price(0.3, 2.5, 0.03),
    "gemini-2.5-flash-lite": price(0.1, 0.4, 0.01),
    "gemini-2.0-flash": price(0.1, 0.4, 0.025),
    "gemini-2.0-flash-lite": price(0.075, 0.3),
    "gemini-1.5-pro": price(1.25, 5, 0.3125),
    "gemini-1.5-flash": price(0.075, 0.3, 0.01875),
    "gemini-1.5-flash-8b": price(0.0375, 0.15, 0.01),
    "gemini-embedding-001": embeddingPrice(0.15),
    "gemini-embedding-2": embeddingPrice(0.2)
  },
  // Bedrock's own models; `anthropic.*` ids are priced from the Anthropic table (same list prices).
  bedrock: {
    "amazon.nova-premier-v1:0": price(2.5, 12.5),
    "amazon.nova-pro-v1:0": price(0.8, 3.2, 0.2),
    "amazon.nova-lite-v1:0": price(0.06, 0.24, 0.015),
    "amazon.nova-micro-v1:0": price(0.035, 0.14, 0.00875),
    "meta.llama3-8b-instruct-v1:0": price(0.3, 0.6),
    "meta.llama3-70b-instruct-v1:0": price(2.65, 3.5),
    "meta.llama3-1-8b-instruct-v1:0": price(0.22, 0.22),
    "meta.llama3-1-70b-instruct-v1:0": price(0.72, 0.72),
    "meta.llama3-1-405b-instruct-v1:0": price(2.4, 2.4),
    "meta.llama3-2-1b-instruct-v1:0": price(0.1, 0.1),
    "meta.llama3-2-3b-instruct-v1:0": price(0.15, 0.15),
    "meta.llama3-2-11b-instruct-v1:0": price(0.16, 0.16),
    "meta.llama3-2-90b-instruct-v1:0": price(0.72, 0.72),
    "meta.llama3-3-70b-instruct-v1:0": price(0.72, 0.72),
    "amazon.titan-embed-text-v2:0": embeddingPrice(0.02),
    "amazon.titan-embed-text-v1": embeddingPrice(0.1),
    "cohere.embed-english-v3": embeddingPrice(0.1),
    "cohere.embed-multilingual-v3": embeddingPrice(0.1)
  }
}

export interface PriceMatch {
  readonly family: PriceFamily
  /** the table key used */
  readonly key: string
  readonly price: ModelPrice
}

/** Exact key, else the longest key the id starts with at a `-`, `:`, `@` or `/` boundary. */
const lookup = (family: PriceFamily, id: string): PriceMatch | undefined => {
  const table = PRICES[family]
  const exact = table[id]
  if (exact !== undefined) return { family, key: id, price: exact }
  let best: string | undefined
  for (const key of Object.keys(table)) {
    if (id.startsWith(key) && "-:@/".includes(id[key.length]!) && (best === undefined || key.length > best.length)) best = key
  }
  return best === undefined ? undefined : { family, key: best, price: table[best]! }
}

/**
 * Azure deployments are named by their owners; price the longest OpenAI model name found inside one,
 * also without dots (Azure's own `gpt-35-turbo`, deployments named `gpt-41-mini`).
 */
const lookupAzureDeployment = (deployment: string): PriceMatch | undefined => {
  let best: string | undefined
  for (const key of Object.keys(PRICES.openai)) {
    for (const variant of new Set([key, key.replaceAll(".", "")])) {
      const at = deployment.indexOf(variant)
      const end = at + variant.length
      const bounded = at >= 0 && !/[a-z0-9]/.test(deployment[at - 1] ?? "") && !/[a-z0-9]/.test(deployment[end] ?? "")
      if (bounded && (best === undefined || key.length > best.length)) best = key
    }
  }
  return best === undefined ? undefined : { family: "openai", key: best, price: PRICES.openai[best]! }
}

/** Cross-region inference profiles (`us.anthropic.…`) and ARNs name the same models. */
const bedrockModelId = (model: string): string => model.slice(model.lastIndexOf("/") + 1).replace(/^(?:us|eu|apac|global|us-gov|ca|jp|au)\./, "")

/** The price for a model as routed by the gateway; undefined when the table does not know it. */
export const findPrice = (providerType: ProviderType, model: string): PriceMatch | undefined => {
  const id = model.trim().toLowerCase()
  switch (providerType) {
    case "openai":
      return lookup("openai", id)
    case "azure":
      return lookup("openai", id) ?? lookupAzureDeployment(id)
    case "anthropic":
      return lookup("anthropic", id)
    case "gemini":
      return lookup("gemini", id.replace(/^models\//, ""))
    case "bedrock": {
      const bedrockId = bedrockModelId(id)
      return bedrockId.startsWith("anthropic.")
        ? lookup("anthropic", bedrockId.slice("anthropic.".length).replace(/-v\d+(?::\d+)?$/, ""))
        : lookup("bedrock", bedrockId)
    }
    case "openai_compatible":
      // self-hosted or third-party upstreams: their prices are not the model vendor's
      return undefined
  }
}

const perToken = (tokens: number, usdPerMillion: number): number => (tokens * usdPerMillion) / 1_000_000
const usd = (value: number): number => roundTo(value, 8)

const unpriced = (reason: string): Cost => ({
  total_usd: null,
  input_usd: null,
  output_usd: null,
  cached_input_usd: null,
  cache_write_usd: null,
  reason
})

export const priceCall = (capture: Pick<Capture, "provider" | "provider_type" | "model" | "usage">): Cost => {
  const match = findPrice(capture.provider_type, capture.model)
  if (match === undefined) return unpriced(`no price for ${capture.provider}/${capture.model}`)
  if (capture.usage === null) return unpriced("no usage reported")
  return costOf(match, capture.model, capture.usage)
}

const costOf = (match: PriceMatch, model: string, usage: Usage): Cost => {
  const cached = usage.cached_tokens ?? 0
  const written = usage.cache_write_tokens ?? 0
  const writtenForAnHour = Math.min(usage.cache_write_1h_tokens ?? 0, written)
  // Under chat-completions semantics cache counts are part of prompt_tokens; if they exceed it, the
  // upstream reported them alongside instead, and all of prompt_tokens is uncached input.
  const cacheInsidePrompt = cached + written <= usage.prompt_tokens
  const uncached = cacheInsidePrompt ? usage.prompt_tokens - cached - written : usage.prompt_tokens
  const { price: p } = match
  const input = perToken(uncached, p.input)
  const cachedInput = perToken(cached, p.cachedInput ?? p.input)
  const cacheWrite = perToken(written - writtenForAnHour, p.cacheWrite ?? p.input) +
    perToken(writtenForAnHour, p.cacheWrite1h ?? p.cacheWrite ?? p.input)
  const output = perToken(usage.completion_tokens, p.output)
  const entry = `${match.family}/${match.key}@${PRICE_TABLE_DATE}`
  const notes = [
    match.key === model.toLowerCase() ? "" : `for ${model}`,
    cacheInsidePrompt ? "" : "cache tokens reported outside prompt_tokens"
  ].filter((note) => note !== "")
  return {
    total_usd: usd(input + cachedInput + cacheWrite + output),
    input_usd: usd(input),
    output_usd: usd(output),
    cached_input_usd: usd(cachedInput),
    cache_write_usd: usd(cacheWrite),
    reason: notes.length === 0 ? entry : `${entry} (${notes.join("; ")})`
  }
}

export interface PricedModel {
  /** `provider/model` as a caller routes it; a family key also prices its dated versions */
  readonly id: string
  readonly provider: string
  readonly model: string
  readonly input_per_mtok: number
  readonly output_per_mtok: number
  readonly cached_input_per_mtok: number
  readonly cache_write_per_mtok: number
}

/** Every model with a known price, for `GET /v1/models`. Table date: PRICE_TABLE_DATE. */
export const listPricedModels = (): Array<PricedModel> =>
  (Object.keys(PRICES) as Array<PriceFamily>).flatMap((family) =>
    Object.entries(PRICES[family]).map(([model, p]) => ({
      id: `${family}/${model}`,
      provider: family,
      model,
      input_per_mtok: p.input,
      output_per_mtok: p.output,
      cached_input_per_mtok: p.cachedInput ?? p.input,
      cache_write_per_mtok: p.cacheWrite ?? p.input
    }))
  )
