/**
 * Optional model calls of analytics, through the gateway's own provider routes and connection pools:
 * embeddings (LEDGER_EMBEDDINGS_MODEL, OpenAI wire: `openai/`, `azure/`, named OpenAI-compatible upstreams) and
 * session summaries (LEDGER_SUMMARY_MODEL, any provider the gateway speaks, through its adapter). Both are off by
 * default; the deterministic path never needs them, and a failed call falls back to it.
 */
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { ChatRequest } from "../providers/index.ts"
import { type ProviderRoute, providerRoutes } from "../providers/routing.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { VECTOR_DIMENSIONS } from "./text.ts"

export class ModelCallFailed extends Schema.TaggedError<ModelCallFailed>()("ModelCallFailed", {
  message: Schema.String,
  /** the model refused this input (a 4xx other than 408/429): asking again will not help */
  refused: Schema.optional(Schema.Boolean)
}) {}

/** An answer's status that says the request itself is refused, not that the model is away. */
class Refused extends Error {}
const isRefusal = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429

/** A configured `provider/model`, resolved to its route. */
interface ResolvedModel {
  readonly id: string
  readonly route: ProviderRoute
  readonly model: string
}

const EmbeddingsResponse = Schema.Struct({
  data: Schema.Array(Schema.Struct({ index: Schema.Number, embedding: Schema.Array(Schema.Finite) }))
})
const ChatCompletion = Schema.Struct({
  choices: Schema.Array(Schema.Struct({ message: Schema.Struct({ content: Schema.NullOr(Schema.String) }) }))
})
const decodeEmbeddings = Schema.decodeUnknownEffect(Schema.fromJsonString(EmbeddingsResponse))
const decodeCompletion = Schema.decodeUnknownEffect(Schema.fromJsonString(ChatCompletion))

const SUMMARY_MAX_TOKENS = 200

export class ModelCalls extends Context.Service<ModelCalls, {
  /** `provider/model` of the embeddings model, when one is configured */
  readonly embeddingsModel: Option.Option<string>
  /** `provider/model` of the summary model, when one is configured */
  readonly summaryModel: Option.Option<string>
  /** One 256-dimension vector per text (the `dimensions` the call asks for). */
  embed(texts: ReadonlyArray<string>): Effect.Effect<Array<Array<number>>, ModelCallFailed>
  /** The summary model's answer to one instruction + one input. */
  summarize(instruction: string, input: string): Effect.Effect<string, ModelCallFailed>
}>()("ledger/analytics/ModelCalls") {
  static readonly layer = Layer.effect(
    ModelCalls,
    Effect.gen(function*() {
      const config = yield* LedgerConfig
      const upstreams = yield* Upstreams
      const { routes, unconfigured } = providerRoutes(config)
      const apiKey = Option.map(config.analytics.modelApiKey, Redacted.value)

      const resolve = Effect.fnUntraced(function*(setting: string, id: string, openAIWireOnly: boolean) {
        const slash = id.indexOf("/")
        const prefix = slash > 0 ? id.slice(0, slash) : ""
        const route = routes.get(prefix)
        if (slash <= 0 || route === undefined) {
          const hint = unconfigured.get(prefix)
          return yield* Effect.die(
            new Error(`${setting}: "${id}" names no configured provider${hint === undefined ? " (expected provider/model)" : `; ${hint}`}`)
          )
        }
        if (openAIWireOnly && !["openai", "azure", "openai_compatible"].includes(route.type)) {
          return yield* Effect.die(new Error(`${setting}: embeddings need an OpenAI-wire provider (openai, azure or a named upstream), not ${prefix}`))
        }
        return { id, route, model: id.slice(slash + 1) } satisfies ResolvedModel
      })

      const embeddings = yield* Effect.transposeOption(
        Option.map(config.analytics.embeddingsModel, (id) => resolve("LEDGER_EMBEDDINGS_MODEL", id, true))
      )
      const summary = yield* Effect.transposeOption(
        Option.map(config.analytics.summaryModel, (id) => resolve("LEDGER_SUMMARY_MODEL", id, false))
      )

      const post = (route: ProviderRoute, url: string, headers: Record<string, string>, body: string | Buffer) =>
        Effect.tryPromise({
          try: async (signal) => {
            const target = new URL(url)
            const response = await upstreams.pool(route.origin).request({
              method: "POST",
              path: `${target.pathname}${target.search}`,
              headers: { "content-type": "application/json", ...headers },
              body,
              signal
            })
            const text = await response.body.text()
            if (response.statusCode < 200 || response.statusCode >= 300) {
              const message = `${route.name} answered ${response.statusCode}: ${text.slice(0, 200)}`
              throw isRefusal(response.statusCode) ? new Refused(message) : new Error(message)
            }
            return text
          },
          catch: (error) =>
            new ModelCallFailed({ message: error instanceof Error ? error.message : String(error), refused: error instanceof Refused })
        })

      const embed = Effect.fn("ModelCalls.embed")(function*(texts: ReadonlyArray<string>) {
        if (Option.isNone(embeddings)) return yield* new ModelCallFailed({ message: "no embeddings model configured" })
        const { model, route } = embeddings.value
        const url = route.type === "azure"
          ? `${route.baseUrl}/openai/deployments/${encodeURIComponent(model)}/embeddings?api-version=${route.apiVersion}`
          : `${route.baseUrl}/embeddings`
        const headers: Record<string, string> = Option.isNone(apiKey)
          ? {}
          : route.type === "azure"
          ? { "api-key": apiKey.value }
          : { authorization: `Bearer ${apiKey.value}` }
        const text = yield* post(
          route,
          url,
          headers,
          JSON.stringify({ model, input: texts, dimensions: VECTOR_DIMENSIONS, encoding_format: "float" })
        )
        const decoded = yield* decodeEmbeddings(text).pipe(
          Effect.mapError((error) => new ModelCallFailed({ message: `embeddings response unreadable: ${error.message}` }))
        )
        const vectors = [...decoded.data].sort((a, b) => a.index - b.index).map((item) => [...item.embedding])
        if (vectors.length !== texts.length || vectors.some((vector) => vector.length !== VECTOR_DIMENSIONS)) {
          return yield* new ModelCallFailed({
            message: `embeddings model must return ${texts.length} vectors of ${VECTOR_DIMENSIONS} dimensions (it honours \`dimensions\`)`
          })
        }
        return vectors
      })

      const summarize = Effect.fn("ModelCalls.summarize")(function*(instruction: string, input: string) {
        if (Option.isNone(summary)) return yield* new ModelCallFailed({ message: "no summary model configured" })
        const { model, route } = summary.value
        const request: ChatRequest = {
          model,
          messages: [{ role: "system", content: instruction }, { role: "user", content: input }],
          max_tokens: SUMMARY_MAX_TOKENS,
          temperature: 0
        }
        const ctx = {
          model,
          apiKey: Option.getOrUndefined(apiKey),
          baseUrl: route.baseUrl,
          stream: false,
          includeUsage: false,
          apiVersion: route.apiVersion
        }
        const upstream = yield* Effect.try({
          try: () => route.adapter.prepare(request, ctx),
          catch: (error) => new ModelCallFailed({ message: String(error) })
        })
        const text = yield* post(route, upstream.url, upstream.headers, upstream.body)
        const answer = yield* Effect.try({
          try: () => route.adapter.response(text, ctx).text,
          catch: (error) => new ModelCallFailed({ message: `summary response unreadable: ${String(error)}` })
        })
        const completion = yield* decodeCompletion(answer).pipe(
          Effect.mapError((error) => new ModelCallFailed({ message: `summary response unreadable: ${error.message}` }))
        )
        const content = completion.choices[0]?.message.content?.trim() ?? ""
        if (content === "") return yield* new ModelCallFailed({ message: "summary model answered nothing" })
        return content
      })

      return ModelCalls.of({
        embeddingsModel: Option.map(embeddings, (resolved) => resolved.id),
        summaryModel: Option.map(summary, (resolved) => resolved.id),
        embed,
        summarize
      })
    })
  ).pipe(Layer.provide(Upstreams.layer))
}
