/**
 * The gateway's own routes, all with a Gateway Key: one per API surface (chat completions, Responses, Messages and
 * their token count, embeddings), `GET /v1/models`, and `POST /v1/watcher/turns` for the turns `ledger watch` reads.
 */
import { Effect, Layer } from "effect"
import { Authenticator } from "../auth/Authenticator.ts"
import { PRICE_TABLE_DATE, listPricedModels } from "../derive/pricing.ts"
import { CapturePublisher } from "../capture/CapturePublisher.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { gatewayAuth } from "./GatewayAuth.ts"
import { gatewayCall } from "./GatewayCall.ts"
import { GatewayRoutes, type RouteHandler, sendJson } from "./GatewayServer.ts"
import { responsesSockets } from "./responses/ResponsesSocket.ts"
import { gatewayMetrics } from "./GatewayMetrics.ts"
import { providerRoutes } from "../providers/routing.ts"
import { chatSurface } from "./surfaces/chatCompletions.ts"
import { embeddingsSurface } from "./surfaces/embeddings.ts"
import { countTokensSurface, messagesSurface } from "./surfaces/messages.ts"
import { responsesSurface } from "./surfaces/responses.ts"
import { ResponseChains } from "./responses/ResponseChains.ts"
import type { Surface } from "./surfaces/surface.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { uuidv7 } from "./uuidv7.ts"
import { watcherTurns } from "./watcher/WatcherTurns.ts"
import { InvalidSetting } from "../domain/errors.ts"

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
      catch: (cause) => new InvalidSetting({ message: `provider configuration: ${String(cause)}` })
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
    const listModels: RouteHandler = (req, res) => {
      res.setHeader("x-ledger-id", uuidv7(Date.now()))
      auth(
        req,
        false,
        () => {
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(models) })
          res.end(models)
        },
        (error) => sendJson(res, error.status, error.body)
      )
    }
    const chains = yield* ResponseChains
    const responses = responsesSurface(chains)
    const surfaces: ReadonlyArray<Surface> = [chatSurface, responses, messagesSurface, countTokensSurface, embeddingsSurface]
    const sockets = responsesSockets(deps, chains, responses)
    // after the server has stopped taking calls: turns in flight on open sockets finish, then the sockets close
    yield* Effect.addFinalizer(() => Effect.promise(sockets.close))
    return {
      routes: new Map<string, RouteHandler>([
        ...surfaces.map((surface) => [surface.route, gatewayCall(deps, surface)] as const),
        ["GET /v1/models", listModels],
        ["POST /v1/watcher/turns", watcherTurns({ auth, publisher: deps.publisher, maxBodyBytes: settings.gatewayMaxBodyBytes, maxAnswerBytes: settings.captureMaxAnswerBytes, context })]
      ]),
      upgrades: new Map([["/v1/responses", sockets.upgrade]])
    }
  })
)
