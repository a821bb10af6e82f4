/**
 * The REST API's per-credential request rate limit (LEDGER_API_RATE_LIMIT requests per second, bursts up to twice
 * that): a token bucket per credential id through Effect's persistence `RateLimiter`. With REDIS_URL the buckets are
 * in Redis, so every API replica draws from the same bucket; otherwise in this process's memory. It keeps one runaway
 * client from starving the database for everyone else. When Redis does not answer (down at start: this replica limits
 * in memory; down or slow later: within STORE_TIMEOUT), requests pass — the limit protects the database, and refusing
 * every read for a Redis outage would do more harm — logged at most once a minute.
 */
import { NodeRedis } from "@effect/platform-node"
import { Cause, Clock, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { RateLimiter } from "effect/persistence"
import { LedgerConfig } from "../config/LedgerConfig.ts"

const STORE_WARNING_EVERY_MS = 60_000
const STORE_TIMEOUT = Duration.millis(250)

export class RequestRateLimit extends Context.Service<RequestRateLimit, {
  /** 0 when the request may proceed, else the seconds to wait (Retry-After) */
  take(key: string): Effect.Effect<number>
}>()("ledger/serving/RequestRateLimit") {
  static readonly layer = Layer.unwrap(LedgerConfig.useSync((config) => {
    const shared = Option.isSome(config.redisUrl) && config.redisCluster.length === 0
    const store = shared
      ? RateLimiter.layerStoreRedis({ prefix: `${config.streamKey}:ratelimit:` }).pipe(
        // commands fail at once while disconnected, rather than wait in node-redis' offline queue
        Layer.provide(NodeRedis.layer({ url: Redacted.value(Option.getOrThrow(config.redisUrl)), disableOfflineQueue: true })),
        Layer.catchCause((cause) =>
          RateLimiter.layerStoreMemory.pipe(
            Layer.tap(() => Effect.logWarning("Redis unreachable at start: the API rate limit is this replica's own", { cause: Cause.pretty(cause) }))
          )
        )
      )
      : RateLimiter.layerStoreMemory
    return Layer.effect(
      RequestRateLimit,
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const rate = config.apiRateLimit
        let warnedAt = -Infinity
        const take = Effect.fn("RequestRateLimit.take")(function*(key: string) {
          if (rate <= 0) return 0
          const unavailable = (error: { readonly message: string }) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) => {
              if (now - warnedAt < STORE_WARNING_EVERY_MS) return Effect.succeed(0)
              warnedAt = now
              return Effect.as(Effect.logWarning("API rate limit store unavailable; requests pass unlimited", { error: error.message }), 0)
            })
          return yield* limiter.consume({ algorithm: "token-bucket", onExceeded: "fail", limit: Math.max(1, Math.round(rate * 2)), window: Duration.seconds(2), key }).pipe(
            Effect.as(0),
            Effect.timeout(STORE_TIMEOUT),
            Effect.catchTags({
              RateLimiterError: (error) =>
                error.reason._tag === "RateLimitExceeded"
                  ? Effect.succeed(Math.max(1, Math.ceil(Duration.toMillis(error.reason.retryAfter) / 1000)))
                  : unavailable(error),
              TimeoutError: unavailable
            })
          )
        })
        return RequestRateLimit.of({ take })
      })
    ).pipe(Layer.provide(RateLimiter.layer), Layer.provide(store))
  }))
}
