/**
 * Password guessing limits of the app's sign-in (and the MCP authorization server's password step): at most
 * `MAX_FAILURES` failed attempts per account in a sliding `WINDOW_MS`, and `PER_ADDRESS_PER_MINUTE` attempts per
 * connecting address, whatever the account. Counted in this process's memory, like the REST rate limit: each API
 * replica limits on its own, which bounds guessing to replicas × the limit.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { tokenBuckets } from "../api/RateLimiter.ts"

export const MAX_FAILURES = 5
export const WINDOW_MS = 15 * 60_000
export const PER_ADDRESS_PER_MINUTE = 30
const MAX_TRACKED = 10_000

export class SignInLimiter extends Context.Service<SignInLimiter, {
  /** 0 when an attempt may be made, else the seconds to wait */
  check(email: string, address: string): Effect.Effect<number>
  failed(email: string): Effect.Effect<void>
  succeeded(email: string): Effect.Effect<void>
}>()("ledger/app/SignInLimiter") {
  static readonly layer = Layer.sync(SignInLimiter, () => {
    const failures = new Map<string, Array<number>>()
    const addresses = tokenBuckets(PER_ADDRESS_PER_MINUTE / 60, PER_ADDRESS_PER_MINUTE)
    const key = (email: string) => email.trim().toLowerCase()
    const recent = (email: string, now: number) => (failures.get(key(email)) ?? []).filter((at) => now - at < WINDOW_MS)

    return SignInLimiter.of({
      check: (email, address) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const times = recent(email, now)
          if (times.length >= MAX_FAILURES) return Math.ceil((times[0]! + WINDOW_MS - now) / 1000)
          return addresses(address, now)
        }),
      failed: (email) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const times = recent(email, now)
          times.push(now)
          failures.delete(key(email))
          if (failures.size >= MAX_TRACKED) failures.delete(failures.keys().next().value!)
          failures.set(key(email), times)
        }),
      succeeded: (email) => Effect.sync(() => void failures.delete(key(email)))
    })
  })
}
