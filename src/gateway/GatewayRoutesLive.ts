/**
 * The gateway's own routes: `POST /v1/chat/completions` and `GET /v1/models` (both with a Gateway Key).
 */
import { Effect, Layer } from "effect"
import { Authenticator } from "../api/Authenticator.ts"
import { PRICE_TABLE_DATE, listPricedModels } from "../builder/derive/pricing.ts"
import { CapturePublisher } from "../capture/CapturePublisher.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { chatCompletions } from "./ChatCompletions.ts"
import { gatewayAuth } from "./GatewayAuth.ts"
import { CHAT_COMPLETIONS, GatewayRoutes, type RouteHandler, sendJson } from "./GatewayServer.ts"
import { gatewayMetrics } from "./GatewayMetrics.ts"
import { providerRoutes } from "./routing.ts"
import { Upstreams } from "./Upstreams.ts"

/** `GET /v1/models`: the priced models in the OpenAI list shape, with their prices (USD per 1M tokens). */
const modelsBody = (): string => {
  const created = Math.floor(Date.parse(`${PRICE_TABLE_DATE}-01T00:00:00Z`) / 1000)
  return JSON.stringify({
    object: "list",
    data: listPricedModels().map((model) => ({ ...model, object: "model", created, owned_by: model.provider }))
  })
}

export const GatewayRoutesLive = Layer.effect(
  GatewayRoutes,
  Effect.gen(function*() {
    const settings = yield* LedgerConfig
    const providers = yield* Effect.try({
      try: () => providerRoutes(settings),
      catch: (cause) => new Error(`provider configuration: ${String(cause)}`)
    }).pipe(Effect.orDie)
    if (providers.ignored.length > 0) {
      yield* Effect.logWarning("LEDGER_UPSTREAMS entries ignored", { ignored: providers.ignored })
    }
    const context = yield* Effect.context<never>()
    const auth = gatewayAuth(yield* Authenticator, context)
    const deps = {
      settings,
      providers,
      auth,
      publisher: yield* CapturePublisher,
      upstreams: yield* Upstreams,
      metrics: gatewayMetrics(context)
    }
    const models = modelsBody()
    const listModels: RouteHandler = (req, res) =>
      auth(
        req,
        () => {
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(models) })
          res.end(models)
        },
        (error) => sendJson(res, error.status, error.body)
      )
    return new Map<string, RouteHandler>([
      [CHAT_COMPLETIONS, chatCompletions(deps)],
      ["GET /v1/models", listModels]
    ])
  })
)
