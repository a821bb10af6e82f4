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

/** A server's bind lost its port: EADDRINUSE from a server in this process, or in the output of a child process. */
const addressInUse = (error: unknown): boolean =>
  (error as { cause?: { code?: unknown } } | null)?.cause?.code === "EADDRINUSE" ||
  (error instanceof Error && error.message.includes("EADDRINUSE"))

const ATTEMPTS = 3

/**
 * Builds what `use` starts on a free port; when another test took the port between its choice and the bind
 * (EADDRINUSE from the server), again on another one.
 */
export const onFreePort = <A, E, R>(use: (port: number) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.promise(freePort).pipe(Effect.flatMap(use), Effect.retry({ times: ATTEMPTS, while: addressInUse }))

/**
 * Starts a server process on `count` free ports. `start` rejects with the process's output when it exits before
 * it is up; when that output says a port was taken by another test between its choice and the bind (EADDRINUSE),
 * the process is started again on other ports. Any other failure is a defect.
 */
export const spawnOnFreePorts = <A>(count: number, start: (ports: ReadonlyArray<number>) => Promise<A>): Effect.Effect<A> =>
  Effect.tryPromise({
    try: async () => {
      const ports: Array<number> = []
      for (let i = 0; i < count; i++) ports.push(await freePort())
      return start(ports)
    },
    catch: (error) => error
  }).pipe(Effect.retry({ times: ATTEMPTS, while: addressInUse }), Effect.orDie)
