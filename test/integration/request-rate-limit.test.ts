/**
 * The REST API's per-credential limit across replicas: with REDIS_URL two API processes draw from one bucket per
 * credential (a burst spent on one is spent on the other); without it each limits on its own. Against the local Redis.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { RequestRateLimit } from "../../src/serving/RequestRateLimit.ts"
import { replicasOnRedis, TEST_REDIS_URL } from "../support/redis.ts"
import { serviceOn } from "../support/settings.ts"

/** One API replica's limit: 2 requests a second, bursts of 4. */
const replica = (streamKey: string, redis: boolean, redisUrl = TEST_REDIS_URL) =>
  serviceOn(RequestRateLimit.layer, RequestRateLimit, {
    apiRateLimit: 2,
    streamKey,
    redisUrl: redis ? Option.some(Redacted.make(redisUrl)) : Option.none()
  })

const takes = (limit: RequestRateLimit["Service"], key: string, count: number) =>
  Effect.forEach(Array.from({ length: count }), () => limit.take(key))

describe("REST rate limit across replicas", () => {
  it.live("with Redis, a burst spent on one replica is spent on the other; the bucket refills at the rate", () =>
    Effect.gen(function*() {
      const [a, b] = yield* replicasOnRedis("ratelimit", (streamKey) => replica(streamKey, true))
      assert.deepStrictEqual(yield* takes(a, "token-1", 4), [0, 0, 0, 0], "the burst")
      const refused = yield* b.take("token-1")
      assert.strictEqual(refused, 1, "the other replica refuses, with Retry-After 1 s")
      assert.strictEqual(yield* b.take("token-2"), 0, "another credential has its own bucket")
      yield* Effect.sleep("1100 millis")
      assert.strictEqual(yield* b.take("token-1"), 0, "tokens come back at the rate")
    }).pipe(Effect.scoped))

  it.live("without Redis, each replica limits on its own", () =>
    Effect.gen(function*() {
      const a = yield* replica("memory", false)
      const b = yield* replica("memory", false)
      assert.deepStrictEqual(yield* takes(a, "token-1", 5), [0, 0, 0, 0, 1])
      assert.strictEqual(yield* b.take("token-1"), 0)
    }).pipe(Effect.scoped))

  it.live("with Redis unreachable at start, the replica starts and limits on its own", () =>
    Effect.gen(function*() {
      // a privileged port nothing listens on
      const alone = yield* replica("unreachable", true, "redis://127.0.0.1:1")
      assert.deepStrictEqual(yield* takes(alone, "token-1", 5), [0, 0, 0, 0, 1])
    }).pipe(Effect.scoped))
})
