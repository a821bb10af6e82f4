/**
 * A Redis server of a test's own (the `redis-server` binary the machine runs its Redis with), for what cannot be
 * done to the shared one: stopping it, and bringing it back — empty when it runs without persistence, as after
 * `SHUTDOWN NOSAVE`, a crash, or a failover to a replica that was behind. Its port stays below 32768 (a port in the
 * ephemeral range can be taken by a client's own reconnect attempt while the server is down). Killed with the scope.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Net from "node:net"
import { createClient } from "redis"
import { tempDir } from "./stack.ts"

export interface PrivateRedis {
  readonly url: string
  /** Stops it the way `SHUTDOWN NOSAVE` does: without writing a snapshot. */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and directory: empty unless it runs with `appendonly yes`. */
  readonly start: Effect.Effect<void>
}

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

const portBelowEphemeral = async () => {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    if (await isFree(port)) return port
  }
  throw new Error("no free port below 32768")
}

const answers = async (url: string) => {
  const client = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 500 } })
  client.on("error", () => {})
  try {
    await client.connect()
    await client.ping()
    return true
  } catch {
    return false
  } finally {
    client.destroy()
  }
}

export const privateRedis = (options: { readonly appendonly: boolean }) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const port = yield* Effect.promise(portBelowEphemeral)
    const url = `redis://127.0.0.1:${port}`
    let server: ChildProcess | null = null

    const start = Effect.promise(async () => {
      server = spawn("redis-server", [
        "--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
        "--appendonly", options.appendonly ? "yes" : "no", "--appendfsync", "always", "--protected-mode", "no"
      ], { stdio: "ignore" })
      const deadline = Date.now() + 10_000
      while (!(await answers(url))) {
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    })

    // SIGKILL: nothing is written on the way down, like SHUTDOWN NOSAVE (and, with AOF, like a crash)
    const stop = Effect.promise(async () => {
      const running = server
      server = null
      if (running === null || running.exitCode !== null) return
      await new Promise<void>((resolve) => {
        running.once("exit", () => resolve())
        running.kill("SIGKILL")
      })
    })

    yield* Effect.acquireRelease(start, () => stop)
    return { url, stop, start } satisfies PrivateRedis
  })
