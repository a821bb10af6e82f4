/**
 * Token buckets in this process's memory, for the per-address limits of the browser forms and the OAuth endpoints
 * (sign-ups, registrations, metadata-document fetches): cheap and synchronous, each replica limiting on its own.
 * The REST API's per-credential limit, which replicas share, is RequestRateLimit.ts.
 */
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
