/**
 * Password guessing limits, for every surface that takes a password (the app's sign-in, the MCP authorization
 * server's sign-in): at most `MAX_FAILURES` failed attempts per account in a sliding `WINDOW_MS`, and
 * `PER_ADDRESS_PER_MINUTE` attempts per connecting address whatever the account. With REDIS_URL the counts are in
 * Redis (a sorted set of times per key), so every API replica counts the same attempts; otherwise, or while Redis
 * does not answer, in this process's memory (replicas × the limit then bounds guessing).
 */
import { NodeRedis } from "@effect/platform-node"
import { Cause, Clock, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { Redis } from "effect/persistence"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

export const MAX_FAILURES = 5
export const WINDOW_MS = 15 * 60_000
export const PER_ADDRESS_PER_MINUTE = 30
const MAX_TRACKED = 10_000
const REDIS_TIMEOUT = Duration.millis(250)

const secondsUntilOldestLeaves = (times: ReadonlyArray<number>, windowMs: number, now: number) =>
  Math.max(1, Math.ceil((times[0]! + windowMs - now) / 1000))

/** Times of events per key within a sliding window, for at most MAX_TRACKED keys (least recently used dropped). */
export const slidingWindow = (windowMs: number) => {
  const events = new BoundedMap<string, Array<number>>(MAX_TRACKED)
  const recent = (key: string, now: number) => (events.get(key) ?? []).filter((at) => now - at < windowMs)
  return {
    recent,
    add: (key: string, now: number) => {
      const times = recent(key, now)
      times.push(now)
      events.set(key, times)
    },
    clear: (key: string) => void events.delete(key),
    /** seconds until the oldest event of a full window leaves it */
    waitFor: (times: ReadonlyArray<number>, now: number) => secondsUntilOldestLeaves(times, windowMs, now)
  }
}

/** Times of events per key within a window, oldest first. */
interface EventLog {
  readonly recent: (key: string, now: number) => Effect.Effect<ReadonlyArray<number>>
  readonly add: (key: string, now: number) => Effect.Effect<void>
  readonly clear: (key: string) => Effect.Effect<void>
}

const memoryLog = (windowMs: number): EventLog => {
  const window = slidingWindow(windowMs)
  return {
    recent: (key, now) => Effect.sync(() => window.recent(key, now)),
    add: (key, now) => Effect.sync(() => window.add(key, now)),
    clear: (key) => Effect.sync(() => window.clear(key))
  }
}

/** The log in Redis under `prefix`; a command that fails or is slow falls back to `local` for that call. */
const redisLog = (redis: Redis.Redis["Service"], prefix: string, windowMs: number, local: EventLog): EventLog => {
  let added = 0
  const orLocal = <A>(remote: Effect.Effect<A, Redis.RedisError>, fallback: Effect.Effect<A>) =>
    remote.pipe(Effect.timeout(REDIS_TIMEOUT), Effect.catch(() => fallback))
  return {
    recent: (key, now) =>
      orLocal(
        Effect.gen(function*() {
          yield* redis.send("ZREMRANGEBYSCORE", prefix + key, "-inf", String(now - windowMs))
          const members = yield* redis.send<ReadonlyArray<string>>("ZRANGE", prefix + key, "0", "-1")
          return members.map((member) => Number(member.split(":", 1)[0]))
        }),
        local.recent(key, now)
      ),
    add: (key, now) =>
      orLocal(
        Effect.gen(function*() {
          yield* redis.send("ZADD", prefix + key, String(now), `${now}:${process.pid}:${added++}`)
          yield* redis.send("PEXPIRE", prefix + key, String(windowMs))
        }),
        local.add(key, now)
      ),
    clear: (key) => orLocal(Effect.asVoid(redis.send("DEL", prefix + key)), local.clear(key))
  }
}

const limiter = (failures: EventLog, attempts: EventLog) => {
  const account = (email: string) => email.trim().toLowerCase()
  return SignInLimiter.of({
    attempt: Effect.fnUntraced(function*(email: string, address: string) {
      const now = yield* Clock.currentTimeMillis
      const failed = yield* failures.recent(account(email), now)
      if (failed.length >= MAX_FAILURES) return secondsUntilOldestLeaves(failed, WINDOW_MS, now)
      const tried = yield* attempts.recent(address, now)
      if (tried.length >= PER_ADDRESS_PER_MINUTE) return secondsUntilOldestLeaves(tried, 60_000, now)
      yield* attempts.add(address, now)
      return 0
    }),
    failed: (email) => Effect.flatMap(Clock.currentTimeMillis, (now) => failures.add(account(email), now)),
    succeeded: (email) => failures.clear(account(email))
  })
}

export class SignInLimiter extends Context.Service<SignInLimiter, {
  /** Counts an attempt: 0 when it may be made, else the seconds to wait. */
  attempt(email: string, address: string): Effect.Effect<number>
  failed(email: string): Effect.Effect<void>
  succeeded(email: string): Effect.Effect<void>
}>()("ledger/auth/SignInLimiter") {
  static readonly layer = Layer.unwrap(LedgerConfig.useSync((config) => {
    const localFailures = memoryLog(WINDOW_MS)
    const localAttempts = memoryLog(60_000)
    const local = Layer.succeed(SignInLimiter, limiter(localFailures, localAttempts))
    if (Option.isNone(config.redisUrl) || config.redisCluster.length > 0) return local
    const prefix = `${config.streamKey}:signin:`
    return Layer.effect(SignInLimiter, Redis.Redis.useSync((redis) =>
      limiter(
        redisLog(redis, `${prefix}failures:`, WINDOW_MS, localFailures),
        redisLog(redis, `${prefix}attempts:`, 60_000, localAttempts)
      ))).pipe(
      // commands fail at once while disconnected, rather than wait in node-redis' offline queue
      Layer.provide(NodeRedis.layer({ url: Redacted.value(config.redisUrl.value), disableOfflineQueue: true })),
      Layer.catchCause((cause) =>
        local.pipe(Layer.tap(() => Effect.logWarning("Redis unreachable at start: sign-in limits are this replica's own", { cause: Cause.pretty(cause) })))
      )
    )
  }))
}
