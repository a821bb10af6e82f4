/**
 * The API server while it starts: the platform listens before the routes are built, so a request can arrive before
 * there is a handler for it. It gets a 503 in the API's error shape at once (a readiness probe right after start used
 * to wait forever), and the routes answer once they are there.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, References, Schedule } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { serveApi } from "../../src/api/ApiServer.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { onFreePort } from "../support/ports.ts"
import { testSettings } from "../support/settings.ts"

const get = (url: string) =>
  Effect.tryPromise(async () => {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) })
    return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() }
  })

/** fetch's "connection refused": the server does not listen yet */
const refused = (error: unknown) =>
  (error as { cause?: { cause?: { code?: unknown } } }).cause?.cause?.code === "ECONNREFUSED"

describe("API server", () => {
  it.live("a request that arrives before the routes are built gets a 503 at once, then the routes answer", () =>
    Effect.gen(function*() {
      const routesBuilt = yield* Deferred.make<void>()
      // routes whose layer is held until the test lets it finish, as a slow start-up holds the real ones
      const slowRoutes = Layer.unwrap(Deferred.await(routesBuilt).pipe(Effect.as(HttpRouter.use((router) =>
        router.add("GET", "/hello", HttpServerResponse.jsonUnsafe({ hello: "world" }))
      ))))
      const port = yield* onFreePort((port) =>
        Layer.build(serveApi(slowRoutes).pipe(Layer.provide(LedgerConfig.layerFrom(testSettings({ apiPort: port, host: "127.0.0.1" }))),
          Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
        )).pipe(
          Effect.forkScoped,
          Effect.as(port)
        )
      )
      const url = `http://127.0.0.1:${port}/hello`
      // connection refused until it listens; then the answer must come at once (a timeout fails the test)
      const early = yield* get(url).pipe(Effect.retry({ while: refused, schedule: Schedule.spaced(20), times: 250 }))
      assert.deepStrictEqual(early, {
        status: 503,
        retryAfter: "1",
        body: { error: { code: "service_unavailable", message: "the server is starting; try again" } }
      })
      yield* Deferred.succeed(routesBuilt, undefined)
      // the handler replaces the starting one as the routes are added: a few more 503s at most, for a moment
      const answered = yield* get(url).pipe(
        Effect.repeat({ schedule: Schedule.spaced(20), while: (answer) => answer.status === 503, times: 100 })
      )
      assert.deepStrictEqual(answered, { status: 200, retryAfter: null, body: { hello: "world" } })
    }))
})
