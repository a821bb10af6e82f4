/**
 * Connections to the providers: one undici `Pool` per origin, kept alive between calls, with the timeouts of
 * LEDGER_UPSTREAM_TIMEOUT_MS and at most LEDGER_UPSTREAM_CONNECTIONS connections per origin (requests beyond it
 * wait in the pool's queue). Pools are created on first use and closed with the layer.
 */
import { Context, Effect, Layer } from "effect"
import { Pool } from "undici"
import { LedgerConfig } from "../config/LedgerConfig.ts"

/** Connecting is quick or it is not happening; a slow answer is bounded by the upstream timeout instead. */
const CONNECT_TIMEOUT_MS = 10_000
export const connectTimeoutMs = (upstreamTimeoutMs: number) => Math.min(CONNECT_TIMEOUT_MS, upstreamTimeoutMs)
/** idle keep-alive sockets are closed after this (unless the provider's keep-alive hint says otherwise) */
const KEEP_ALIVE_MS = 30_000
const CLOSE_TIMEOUT_MS = 5_000

export class Upstreams extends Context.Service<Upstreams, {
  /** The connection pool for an origin (`scheme://host[:port]`). */
  pool(origin: string): Pool
}>()("ledger/providers/Upstreams") {
  static readonly layer = Layer.effect(
    Upstreams,
    Effect.gen(function*() {
      const config = yield* LedgerConfig
      const pools = new Map<string, Pool>()
      const options: Pool.Options = {
        connections: config.upstreamConnections,
        connectTimeout: connectTimeoutMs(config.upstreamTimeoutMs),
        headersTimeout: config.upstreamTimeoutMs,
        bodyTimeout: config.upstreamTimeoutMs,
        keepAliveTimeout: KEEP_ALIVE_MS
      }
      yield* Effect.addFinalizer(() =>
        Effect.promise(() =>
          Promise.all([...pools.values()].map((pool) =>
            // in-flight calls were finished by the server's shutdown; anything left is cut
            Promise.race([pool.close(), new Promise((resolve) => setTimeout(resolve, CLOSE_TIMEOUT_MS).unref())])
              .then(() => pool.destroyed ? undefined : pool.destroy())
          ))
        )
      )
      const pool = (origin: string): Pool => {
        let existing = pools.get(origin)
        if (existing === undefined) {
          existing = new Pool(origin, options)
          pools.set(origin, existing)
        }
        return existing
      }
      return Upstreams.of({ pool })
    })
  )
}
