/**
 * Probe: slow and greedy clients on both ports. A client dribbling its headers, or its body, is cut at the
 * configured timeouts (a 408 or a closed connection, never an open one); a port holds no more connections than its
 * cap, and serves normally again once they go. The limits are set small here so the probe runs in seconds; the
 * defaults are checked to be tighter than Node's (60 s headers, 300 s request, no cap).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Schedule } from "effect"
import * as Net from "node:net"
import { settingsConfig } from "../../src/config/LedgerConfig.ts"
import { type AppStack, appStack } from "../support/app-stack.ts"

const HEADERS_TIMEOUT_MS = 1_000
const REQUEST_TIMEOUT_MS = 2_500
const MAX_CONNECTIONS = 8

interface Dribbled {
  /** when the server ended the connection, from its start (Infinity: still open when the probe gave up) */
  readonly closedAfterMs: number
  readonly answer: string
}

/** Connects, sends `start`, then one byte of `trickle` every 100 ms until the server ends the connection. */
const dribble = (port: number, start: string, giveUpMs = 10_000) =>
  Effect.promise(() =>
    new Promise<Dribbled>((resolve) => {
      const t0 = performance.now()
      const socket = Net.connect(port, "127.0.0.1")
      let answer = ""
      let timer: NodeJS.Timeout | undefined
      const done = (closedAfterMs: number) => {
        clearInterval(timer)
        clearTimeout(giveUp)
        socket.destroy()
        resolve({ closedAfterMs, answer })
      }
      const giveUp = setTimeout(() => done(Infinity), giveUpMs)
      socket.on("connect", () => {
        socket.write(start)
        timer = setInterval(() => socket.writable && socket.write("a"), 100)
      })
      socket.on("data", (data) => (answer += data.toString("latin1")))
      socket.on("error", () => done(performance.now() - t0))
      socket.on("close", () => done(performance.now() - t0))
    })
  )

/** Idle connections, open until released. */
const idleConnections = (port: number, count: number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      Promise.all(Array.from({ length: count }, () =>
        new Promise<Net.Socket>((resolve) => {
          const socket = Net.connect(port, "127.0.0.1", () => resolve(socket))
          socket.on("error", () => undefined)
        })))
    ),
    (sockets) => Effect.sync(() => sockets.forEach((socket) => socket.destroy()))
  )

const portOf = (url: string) => Number(new URL(url).port)

describe("slow-client defaults", () => {
  it.effect("are tighter than Node's", () =>
    Effect.gen(function*() {
      const settings = yield* settingsConfig.parse(ConfigProvider.fromEnvRecord({}))
      assert.isAtMost(settings.httpHeadersTimeoutMs, 10_000)
      assert.isAtMost(settings.httpRequestTimeoutMs, 120_000)
      assert.isAtMost(settings.httpMaxConnections, 4_096)
    }))
})

class Site extends Context.Service<Site, AppStack>()("test/probes/SlowSite") {}

const SiteLive = Layer.effect(Site, appStack({
  httpHeadersTimeoutMs: HEADERS_TIMEOUT_MS,
  httpRequestTimeoutMs: REQUEST_TIMEOUT_MS,
  httpMaxConnections: MAX_CONNECTIONS
}))

layer(SiteLive, { timeout: 120_000, excludeTestServices: true })("slow clients on both ports", (it) => {
  const ports = Site.useSync((site) => [["api", portOf(site.baseUrl), site.baseUrl], ["gateway", portOf(site.gateway.gatewayUrl), site.gateway.gatewayUrl]] as const)

  it.effect("dribbled headers are cut at the headers timeout", () =>
    Effect.gen(function*() {
      for (const [name, port] of yield* ports) {
        const cut = yield* dribble(port, "GET /healthz HTTP/1.1\r\nHost: probe\r\nX-Dribble: ")
        assert.isBelow(cut.closedAfterMs, HEADERS_TIMEOUT_MS + 2_500, `${name}: open for ${cut.closedAfterMs} ms`)
        assert.notInclude(cut.answer, "200 OK", name)
      }
    }))

  it.effect("a dribbled body is cut at the request timeout", () =>
    Effect.gen(function*() {
      const site = yield* Site
      const forms = {
        api: `POST /signin HTTP/1.1\r\nHost: probe\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n`,
        gateway: `POST /v1/chat/completions HTTP/1.1\r\nHost: probe\r\nAuthorization: Bearer ${site.gateway.gatewayKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"`
      }
      for (const [name, port] of yield* ports) {
        const cut = yield* dribble(port, forms[name])
        assert.isAtLeast(cut.closedAfterMs, HEADERS_TIMEOUT_MS, `${name}: the body's clock is the request's, not the headers'`)
        assert.isBelow(cut.closedAfterMs, REQUEST_TIMEOUT_MS + 2_500, `${name}: open for ${cut.closedAfterMs} ms`)
      }
    }))

  it.effect("a port holds at most its cap of connections, and serves again once they go", () =>
    Effect.gen(function*() {
      for (const [name, port, url] of yield* ports) {
        yield* Effect.scoped(Effect.gen(function*() {
          yield* idleConnections(port, MAX_CONNECTIONS)
          const over = yield* dribble(port, "GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n", 3_000)
          assert.isBelow(over.closedAfterMs, 1_000, `${name}: a connection over the cap is dropped at once`)
          assert.strictEqual(over.answer, "", name)
        }))
        const again = yield* Effect.tryPromise(() => fetch(`${url}/healthz`).then((response) => response.status)).pipe(
          Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 30 }),
          Effect.orDie
        )
        assert.strictEqual(again, 200, name)
      }
    }))
})
