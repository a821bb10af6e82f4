/**
 * Sign-in limits across replicas: with REDIS_URL two API processes count the same failures per account and attempts
 * per address (five wrong passwords on one lock the account on the other; a success on either clears them); with Redis
 * unreachable at start, a replica limits on its own. Against the local Redis.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { MAX_FAILURES, PER_ADDRESS_PER_MINUTE, SignInLimiter } from "../../src/auth/SignInLimiter.ts"
import { replicasOnRedis, TEST_REDIS_URL } from "../support/redis.ts"
import { serviceOn } from "../support/settings.ts"

const replica = (streamKey: string, redisUrl: string) =>
  serviceOn(SignInLimiter.layer, SignInLimiter, { streamKey, redisUrl: Option.some(Redacted.make(redisUrl)) })

describe("sign-in limits across replicas", () => {
  it.live("failures on one replica lock the account on the other; a success clears them; attempts per address are shared", () =>
    Effect.gen(function*() {
      const [a, b] = yield* replicasOnRedis("signin", (streamKey) => replica(streamKey, TEST_REDIS_URL))
      for (let i = 0; i < MAX_FAILURES; i++) {
        assert.strictEqual(yield* a.attempt("Ann@acme.test", `10.0.0.${i}`), 0)
        yield* a.failed("Ann@acme.test")
      }
      assert.isAbove(yield* b.attempt("ann@acme.test", "10.0.1.1"), 0, "locked on the other replica")
      yield* b.succeeded("ann@acme.test")
      assert.strictEqual(yield* a.attempt("ann@acme.test", "10.0.1.2"), 0, "a success on either clears the failures")

      for (let i = 0; i < PER_ADDRESS_PER_MINUTE; i++) {
        assert.strictEqual(yield* (i % 2 === 0 ? a : b).attempt(`user${i}@acme.test`, "10.9.9.9"), 0)
      }
      assert.isAbove(yield* a.attempt("someone@acme.test", "10.9.9.9"), 0, "the address's attempts are counted once across replicas")
    }).pipe(Effect.scoped))

  it.live("with Redis unreachable at start, a replica starts and limits on its own", () =>
    Effect.gen(function*() {
      const alone = yield* replica("unreachable", "redis://127.0.0.1:1")
      for (let i = 0; i < MAX_FAILURES; i++) yield* alone.failed("bob@acme.test")
      assert.isAbove(yield* alone.attempt("bob@acme.test", "10.0.0.1"), 0)
    }).pipe(Effect.scoped))
})
