/** The MCP client's side of an OAuth redirect, for tests of the authorization server. */
import { Context, Deferred, Effect, Layer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** A loopback redirect target that hands each callback's query to the test. */
export class Callback extends Context.Service<Callback, {
  readonly url: string
  /** the next callback's query parameters */
  readonly next: Effect.Effect<URLSearchParams>
}>()("test/oauth/Callback") {
  static readonly layer = Layer.effect(
    Callback,
    Effect.gen(function*() {
      let waiting = yield* Deferred.make<URLSearchParams>()
      const server = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<Http.Server>((resolve) => {
            const server = Http.createServer((request, response) => {
              const query = new URL(request.url!, "http://127.0.0.1").searchParams
              Deferred.doneUnsafe(waiting, Effect.succeed(query))
              response.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Connected</title><p>You can close this window.</p>")
            })
            server.listen(0, "127.0.0.1", () => resolve(server))
          })
        ),
        (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
      )
      const next = Effect.gen(function*() {
        const query = yield* Deferred.await(waiting)
        waiting = yield* Deferred.make<URLSearchParams>()
        return query
      })
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`, next }
    })
  )
}

