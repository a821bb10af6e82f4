/**
 * Which provider serves a model: the prefix of `provider/model-name` names a built-in provider (`openai`,
 * `azure`, `anthropic`, `gemini`, `bedrock`) or a named OpenAI-compatible upstream of LEDGER_UPSTREAMS.
 * Built once from the settings; a lookup is one map access.
 */
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import type { ProviderType } from "../domain/capture.ts"
import { adapterFor, type ProviderAdapter } from "./index.ts"

export interface ProviderRoute {
  /** the prefix as callers write it */
  readonly name: string
  readonly type: ProviderType
  readonly adapter: ProviderAdapter
  /** no trailing slash (OpenAI-type: up to and including `/v1`) */
  readonly baseUrl: string
  /** `scheme://host[:port]` of baseUrl: the connection pool it uses */
  readonly origin: string
  readonly apiVersion: string | undefined
}

export interface ProviderRoutes {
  readonly routes: ReadonlyMap<string, ProviderRoute>
  /** prefixes that exist but are not configured here, with what to set */
  readonly unconfigured: ReadonlyMap<string, string>
  /** upstream names that could not be used, for a startup warning */
  readonly ignored: ReadonlyArray<string>
}

const BUILT_IN = new Set(["openai", "azure", "anthropic", "gemini", "bedrock"])

const route = (name: string, type: ProviderType, baseUrl: string, apiVersion?: string): ProviderRoute => ({
  name,
  type,
  adapter: adapterFor(type),
  baseUrl,
  origin: new URL(baseUrl).origin,
  apiVersion
})

export const providerRoutes = (settings: LedgerSettings): ProviderRoutes => {
  const { providers } = settings
  const routes = new Map<string, ProviderRoute>([
    ["openai", route("openai", "openai", providers.openaiBaseUrl)],
    ["anthropic", route("anthropic", "anthropic", providers.anthropicBaseUrl)],
    ["gemini", route("gemini", "gemini", providers.geminiBaseUrl)],
    ["bedrock", route("bedrock", "bedrock", providers.bedrockBaseUrl)]
  ])
  const unconfigured = new Map<string, string>()
  if (providers.azureBaseUrl._tag === "Some") {
    routes.set("azure", route("azure", "azure", providers.azureBaseUrl.value, providers.azureApiVersion))
  } else {
    unconfigured.set("azure", "set LEDGER_AZURE_BASE_URL to your Azure OpenAI resource (https://NAME.openai.azure.com)")
  }
  const ignored: Array<string> = []
  for (const upstream of providers.upstreams) {
    if (BUILT_IN.has(upstream.name) || routes.has(upstream.name) || !/^[A-Za-z0-9._-]+$/.test(upstream.name)) {
      ignored.push(`${upstream.name} (a built-in provider, a repeated name, or not [A-Za-z0-9._-]+)`)
      continue
    }
    try {
      routes.set(upstream.name, route(upstream.name, "openai_compatible", upstream.baseUrl))
    } catch {
      ignored.push(`${upstream.name} (not a URL: ${upstream.baseUrl})`)
    }
  }
  return { routes, unconfigured, ignored }
}
