/** A free loopback TCP port, for servers whose port is fixed by configuration. */
import { Effect } from "effect"
import * as Net from "node:net"

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const addressInUse = (error: unknown): boolean =>
  (error as { cause?: { code?: unknown } } | null)?.cause?.code === "EADDRINUSE"

/**
 * Builds what `use` starts on a free port; when another test took the port between its choice and the bind
 * (EADDRINUSE from the server), again on another one.
 */
export const onFreePort = <A, E, R>(use: (port: number) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.promise(freePort).pipe(Effect.flatMap(use), Effect.retry({ times: 3, while: addressInUse }))
