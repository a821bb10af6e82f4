/**
 * Per-credential request rate limit of the REST API (LEDGER_API_RATE_LIMIT requests per second, bursts up to
 * twice that): a token bucket per credential id, in this process's memory — each API replica limits on its own.
 * It keeps one runaway client from starving the database for everyone else.
 */
import { Context, Layer } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

/** buckets kept at most; the least recently used is dropped (it refills to full anyway) */
const MAX_BUCKETS = 10_000

interface Bucket {
  tokens: number
  updatedAt: number
}

/**
 * A token bucket limiter: `burst` tokens at most, refilled at `ratePerSecond`. `take` spends one token for `key`
 * and returns 0, or — when the bucket is empty — the seconds until a token is available again.
 */
export const tokenBuckets = (ratePerSecond: number, burst = ratePerSecond * 2) => {
  const buckets = new BoundedMap<string, Bucket>(MAX_BUCKETS)
  return (key: string, now: number): number => {
    if (ratePerSecond <= 0) return 0
    let bucket = buckets.get(key)
    if (bucket === undefined) {
      bucket = { tokens: burst, updatedAt: now }
    } else {
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * ratePerSecond)
      bucket.updatedAt = now
    }
    // re-inserted on each use: the map's order is least recently used first
    buckets.set(key, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return Math.ceil((1 - bucket.tokens) / ratePerSecond)
  }
}

export class RateLimiter extends Context.Service<RateLimiter, {
  /** 0 when the request may proceed, else the seconds to wait (Retry-After) */
  take(key: string, now: number): number
}>()("ledger/serving/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    LedgerConfig.useSync((config) => RateLimiter.of({ take: tokenBuckets(config.apiRateLimit) }))
  )
}
