/**
 * Session health rules (src/query/health.ts), on hand-made windows: each status and the reason it names.
 */
import { assert, describe, it } from "@effect/vitest"
import { countLoops, type HealthSample, sessionHealth } from "../../src/query/health.ts"

const START = Date.UTC(2025, 10, 3, 9, 0, 0)

const call = (i: number, overrides: Partial<HealthSample> = {}): HealthSample => ({
  created_at: new Date(START + i * 60_000),
  outcome: "success",
  latency_ms: 1_000 + i,
  prompt_tokens: 1_000,
  model: "gpt-4o",
  last_step: `answer number ${i}: ${"abcdefghij"[i % 10]}`,
  ...overrides
})

const health = (window: ReadonlyArray<HealthSample>, options: { readonly quietMinutes?: number; readonly cost?: number } = {}) => {
  const ended = window.at(-1)?.created_at ?? new Date(START)
  return sessionHealth({
    window,
    started_at: window[0]?.created_at ?? new Date(START),
    ended_at: ended,
    total_cost_usd: options.cost ?? 0.5,
    now: ended.getTime() + (options.quietMinutes ?? 1) * 60_000,
    sessionGapMinutes: 30
  })
}

describe("session health", () => {
  it("healthy: says why", () => {
    const result = health(Array.from({ length: 10 }, (_, i) => call(i)))
    assert.strictEqual(result.status, "healthy")
    assert.deepStrictEqual(result.reasons, ["no errors, loops, slow calls or token growth over the last 10 decisions"])
    assert.strictEqual(result.error_rate, 0)
    assert.strictEqual(result.loops, 0)
    assert.strictEqual(result.p95_latency_ms, 1_009)
    assert.strictEqual(result.token_growth, 1)
    // $0.50 over 9 minutes
    assert.closeTo(result.cost_per_hour_usd!, 0.5 / (9 / 60), 1e-6)
    assert.strictEqual(result.last_activity_at, new Date(START + 9 * 60_000).toISOString())
  })

  it("loops: the same output again, ignoring digits, case and spacing; failed calls are not loops", () => {
    const same = (i: number) => call(i, { last_step: `Calling  search(${i}) AGAIN` })
    assert.strictEqual(countLoops([same(1), same(2), same(3)]), 2)
    assert.strictEqual(countLoops([same(1), call(2, { model: "gpt-4.1", last_step: "calling search(2) again" })]), 0)
    assert.strictEqual(countLoops([call(1, { outcome: "error", last_step: "x" }), call(2, { outcome: "error", last_step: "x" })]), 0)
    const degraded = health([call(0), same(1), same(2), same(3)])
    assert.strictEqual(degraded.status, "degraded")
    assert.match(degraded.reasons[0]!, /^2 calls repeated/)
    const failing = health(Array.from({ length: 7 }, (_, i) => same(i)))
    assert.strictEqual(failing.status, "failing")
    assert.strictEqual(failing.loops, 6)
  })

  it("errors: degraded from 10 %, failing from 50 % or three failures in a row", () => {
    const some = health(Array.from({ length: 10 }, (_, i) => call(i, { outcome: i === 3 ? "error" : "success" })))
    assert.strictEqual(some.status, "degraded")
    assert.strictEqual(some.error_rate, 0.1)
    const half = health(Array.from({ length: 4 }, (_, i) => call(i, { outcome: i % 2 === 0 ? "error" : "success" })))
    assert.strictEqual(half.status, "failing")
    const streak = health(Array.from({ length: 20 }, (_, i) => call(i, { outcome: i >= 17 ? "error" : "success" })))
    assert.strictEqual(streak.status, "failing")
    assert.include(streak.reasons, "the last 3 calls all failed")
  })

  it("slow calls and growing prompts degrade; a quiet session is idle", () => {
    const slow = health(Array.from({ length: 20 }, (_, i) => call(i, { latency_ms: i >= 18 ? 45_000 : 2_000 })))
    assert.strictEqual(slow.status, "degraded")
    assert.match(slow.reasons[0]!, /^p95 latency 45 s/)
    const growing = health(Array.from({ length: 5 }, (_, i) => call(i, { prompt_tokens: 1_000 * 4 ** i })))
    assert.strictEqual(growing.status, "degraded")
    assert.strictEqual(growing.token_growth, 256)
    const idle = health(Array.from({ length: 3 }, (_, i) => call(i)), { quietMinutes: 90 })
    assert.strictEqual(idle.status, "idle")
    assert.deepStrictEqual(idle.reasons, ["no activity for 1 h 30 min (a session ends after 30 min without calls)"])
    // problems outrank idleness: a session that ended failing stays failing
    const endedBadly = health(Array.from({ length: 3 }, (_, i) => call(i, { outcome: "error" })), { quietMinutes: 600 })
    assert.strictEqual(endedBadly.status, "failing")
    assert.isTrue(endedBadly.reasons.at(-1)!.startsWith("no activity for 10 h"))
  })
})
