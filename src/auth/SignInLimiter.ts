/**
 * Password guessing limits, for every surface that takes a password (the app's sign-in, the MCP authorization
 * server's sign-in): at most `MAX_FAILURES` failed attempts per account in a sliding `WINDOW_MS`, and
 * `PER_ADDRESS_PER_MINUTE` attempts per connecting address whatever the account. Counted in this process's memory:
 * each API replica limits on its own, which bounds guessing to replicas × the limit.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { BoundedMap } from "../collections/BoundedMap.ts"

export const MAX_FAILURES = 5
export const WINDOW_MS = 15 * 60_000
export const PER_ADDRESS_PER_MINUTE = 30
const MAX_TRACKED = 10_000

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
    waitFor: (times: ReadonlyArray<number>, now: number) => Math.max(1, Math.ceil((times[0]! + windowMs - now) / 1000))
  }
}

export class SignInLimiter extends Context.Service<SignInLimiter, {
  /** Counts an attempt: 0 when it may be made, else the seconds to wait. */
  attempt(email: string, address: string): Effect.Effect<number>
  failed(email: string): Effect.Effect<void>
  succeeded(email: string): Effect.Effect<void>
}>()("ledger/auth/SignInLimiter") {
  static readonly layer = Layer.sync(SignInLimiter, () => {
    const failures = slidingWindow(WINDOW_MS)
    const attempts = slidingWindow(60_000)
    const account = (email: string) => email.trim().toLowerCase()

    return SignInLimiter.of({
      attempt: (email, address) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const failed = failures.recent(account(email), now)
          if (failed.length >= MAX_FAILURES) return failures.waitFor(failed, now)
          const tried = attempts.recent(address, now)
          if (tried.length >= PER_ADDRESS_PER_MINUTE) return attempts.waitFor(tried, now)
          attempts.add(address, now)
          return 0
        }),
      failed: (email) => Effect.map(Clock.currentTimeMillis, (now) => failures.add(account(email), now)),
      succeeded: (email) => Effect.sync(() => failures.clear(account(email)))
    })
  })
}
