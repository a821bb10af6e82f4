/**
 * The whole service for the app's tests: a gateway (fake providers behind it), decision builders, and the API port
 * with the app, on one fresh database and an in-process stream; sign-up open. Log entries can be collected to
 * check that no secret reaches a log line.
 *
 *   const app = yield* appStack()
 *   yield* Effect.promise(() => page.goto(`${app.baseUrl}/signup`))
 */
import { Effect, Layer, Logger, References, type Scope } from "effect"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { BuilderLive } from "../../layers/Builder.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import type { LedgerSettings } from "../../src/config/LedgerConfig.ts"
import { type GatewayStack, gatewayStack } from "./gateway-stack.ts"
import { onFreePort } from "./ports.ts"

export interface AppStack {
  /** the API port: `http://127.0.0.1:PORT` */
  readonly baseUrl: string
  readonly gateway: GatewayStack
  /** every log line written so far, as JSON text (message and annotations) */
  readonly logs: Array<string>
}

export const appStack = (settings: Partial<LedgerSettings> = {}): Effect.Effect<AppStack, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const logs: Array<string> = []
    const collect = Logger.layer([
      Logger.make(({ fiber, message }) => {
        logs.push(JSON.stringify({ message, annotations: fiber.getRef(References.CurrentLogAnnotations) }))
      })
    ])
    return yield* onFreePort((port) => {
      const baseUrl = `http://127.0.0.1:${port}`
      return gatewayStack({
        stream: "memory",
        settings: { apiPort: port, publicUrl: baseUrl, signup: "open", ...settings },
        layer: Layer.mergeAll(BuilderLive, serveApi(ApiRoutesLive)).pipe(
          Layer.provide(Layer.mergeAll(collect, Layer.succeed(References.MinimumLogLevel, "Debug")))
        )
      }).pipe(Effect.map((gateway) => ({ baseUrl, gateway, logs })))
    })
  })
