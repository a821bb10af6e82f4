/**
 * A TCP proxy in front of a real test server (Redis, PostgreSQL), to cut the network between a client and the
 * server and restore it — simulating an outage without touching the shared server. Closed with its scope.
 */
import { Deferred, Effect } from "effect"
import * as Net from "node:net"

export interface TcpProxy {
  /** the URL given, pointing at the proxy instead of the server */
  readonly url: string
  /** Refuses new connections and cuts the open ones, as if the server went away. */
  readonly stop: Effect.Effect<void>
  /** Accepts connections again on the same port. */
  readonly start: Effect.Effect<void>
  /**
   * Arms a lost reply: the next request containing `command` (e.g. "EVALSHA") reaches the server, but nothing it
   * answers on that connection is relayed, and the connection is cut 200 ms later — a network failure after the
   * server applied the command, which the client cannot tell from one before. Returns an effect awaiting the cut.
   */
  loseNextReply(command: string): Effect.Effect<Effect.Effect<void>>
}

/** Ports the proxy listens on: fixed test ports stay below the ephemeral range (32768–60999). */
const LOW_PORTS = { from: 20_000, to: 32_000 }

/** A proxy to the host and port of `serverUrl` (e.g. `redis://…`, `postgres://…`). */
export const tcpProxyTo = (serverUrl: string, defaultPort: number) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const target = new URL(serverUrl)
      const sockets = new Set<Net.Socket>()
      let losing: { readonly command: string; readonly cut: Deferred.Deferred<void> } | null = null
      const handle = (client: Net.Socket) => {
        const upstream = Net.connect(Number(target.port || defaultPort), target.hostname)
        for (const socket of [client, upstream]) {
          sockets.add(socket)
          socket.on("close", () => sockets.delete(socket))
          socket.on("error", () => {
            client.destroy()
            upstream.destroy()
          })
        }
        client.pipe(upstream).pipe(client)
        // runs after the pipe has forwarded the request, before the server can answer it
        client.on("data", (data: Buffer) => {
          const armed = losing
          if (armed === null || !data.includes(armed.command)) return
          losing = null
          upstream.unpipe(client)
          setTimeout(() => {
            client.destroy()
            upstream.destroy()
            Deferred.doneUnsafe(armed.cut, Effect.void)
          }, 200)
        })
      }
      let server: Net.Server | undefined
      const listen = (port: number) =>
        Effect.callback<number, Error>((resume) => {
          const listening = Net.createServer(handle)
          server = listening
          listening.once("error", (error) => resume(Effect.fail(error)))
          listening.listen(port, "127.0.0.1", () => resume(Effect.succeed((listening.address() as Net.AddressInfo).port)))
        })
      const stop = Effect.callback<void>((resume) => {
        const closing = server
        server = undefined
        for (const socket of sockets) socket.destroy()
        if (closing === undefined) resume(Effect.void)
        else closing.close(() => resume(Effect.void))
      })
      // below the ephemeral range: a client retrying the stopped proxy cannot connect to itself on its port
      const port = yield* Effect.suspend(() => listen(LOW_PORTS.from + Math.floor(Math.random() * (LOW_PORTS.to - LOW_PORTS.from)))).pipe(
        Effect.retry({ times: 20 }),
        Effect.orDie
      )
      const url = new URL(serverUrl)
      url.hostname = "127.0.0.1"
      url.port = String(port)
      const loseNextReply = (command: string) =>
        Effect.sync(() => {
          const cut = Deferred.makeUnsafe<void>()
          losing = { command, cut }
          return Deferred.await(cut)
        })
      return { url: url.toString(), stop, start: Effect.orDie(Effect.asVoid(listen(port))), loseNextReply } satisfies TcpProxy
    }),
    (proxy) => proxy.stop
  )
