/**
 * The pure parts of analytics, without a database: local vectors and similarity, call signatures, hand-off
 * fingerprints, stable ids, subject tokens, merge scoring, ROI arithmetic, pulse periods, and what a decision
 * row yields for analytics.
 */
import { assert, describe, it } from "@effect/vitest"
import { analyseDecision, type BuiltDecision } from "../../src/analytics/analyse.ts"
import { scoreMerge } from "../../src/analytics/Features.ts"
import { periodOf } from "../../src/analytics/Pulse.ts"
import { computeRoi } from "../../src/analytics/Roi.ts"
import { MERGE_MIN_SCORE } from "../../src/analytics/rules.ts"
import {
  callSignature,
  centroid,
  fingerprints,
  localVector,
  similarity,
  stableUuid,
  subjectTokens,
  VECTOR_DIMENSIONS,
  words
} from "../../src/analytics/text.ts"
import { derive } from "../../src/derive/derive.ts"
import { extractSubjects } from "../../src/derive/subjects.ts"
import * as fixtures from "../fixtures/captures/index.ts"

describe("analytics text representations", () => {
  it("local vectors: paraphrases close, unrelated texts apart, scores in [0,1]", () => {
    const a = localVector("How do we rotate the signing keys of the webhook-gateway without any downtime?")
    const b = localVector("What is the procedure to rotate webhook-gateway signing keys with zero downtime?")
    const c = localVector("Summarize the sales call notes for the warehouse prospect.")
    assert.strictEqual(a.length, VECTOR_DIMENSIONS)
    assert.closeTo(Math.hypot(...a), 1, 1e-3)
    assert.isAbove(similarity(a, b), 0.6)
    assert.isBelow(similarity(a, c), 0.2)
    assert.strictEqual(similarity(a, a), 1)
    assert.strictEqual(similarity(a, localVector("")), 0)
    assert.deepStrictEqual(localVector("Rotate keys"), localVector("Rotate keys"), "deterministic")
    assert.deepStrictEqual(words("The API-key of ÉTÉ is 42"), ["api", "key", "ete", "42"])
  })

  it("centroid of vectors is normalised; empty input gives an empty centroid", () => {
    const mean = centroid([localVector("retry policy"), localVector("retry loop")])
    assert.closeTo(Math.hypot(...mean), 1, 1e-3)
    assert.deepStrictEqual(centroid([]), [])
  })

  it("call signatures ignore ids, numbers and whitespace, not words", () => {
    const base = callSignature("Check job 1234 status", "job_status({\"id\":\"0193a7f0-8f00-7000-8000-000000000001\"})")
    assert.strictEqual(base, callSignature("check  job 98 status", "job_status({\"id\":\"0193a7f0-8f00-7000-8000-0000000000ff\"})"))
    assert.notStrictEqual(base, callSignature("Check job 1234 result", "job_status({\"id\":\"x\"})"))
  })

  it("fingerprints keep distinctive lines only, normalised, bounded", () => {
    const text = "Short line\n> Fake answer to: Draft a plan for PAY-245 with exponential backoff\n\n- FAKE answer to:   draft a plan for PAY-245 with exponential backoff"
    const prints = fingerprints([text])
    assert.strictEqual(prints.length, 1, "the quoted and the bulleted copy are the same line")
    assert.deepStrictEqual(fingerprints(["tiny"]), [])
    assert.strictEqual(fingerprints([Array.from({ length: 100 }, (_, i) => `a distinctive line number ${i} with enough characters`).join("\n")]).length, 24)
  })

  it("stable ids are uuid-shaped and deterministic; subject tokens drop path noise", () => {
    const id = stableUuid("tenant/workspace/feature/session")
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.strictEqual(id, stableUuid("tenant/workspace/feature/session"))
    assert.deepStrictEqual(subjectTokens("src/payments/retry_policy.ts"), ["payments", "retry", "policy"])
    assert.deepStrictEqual(subjectTokens("PaymentRetry"), ["payment", "retry"])
    assert.deepStrictEqual(subjectTokens("payment-service"), ["payment"])
  })
})

describe("analytics rules", () => {
  const feature = (id: string, tokens: Array<string>, text: string, agents: Array<string>, from: number, to: number) => ({
    feature_id: id,
    title: id,
    subject_tokens: tokens,
    centroid: localVector(text),
    agents,
    first_at: new Date(from),
    last_at: new Date(to)
  })
  const H = 3_600_000

  it("merge suggestions need a strong signal, and explain themselves", () => {
    const x = feature("x", ["231", "pay", "payment", "payments", "retry"], "fix the retry loop in the payment service", ["coder", "reviewer"], 0, 8 * H)
    const y = feature("y", ["245", "pay", "payment", "payments", "retry", "policy"], "retry policy with backoff for the payment service", ["coder", "planner"], 9 * H, 12 * H)
    const z = feature("z", ["auth", "login", "limiter"], "rate limit failed logins", ["coder", "reviewer"], 0, 8 * H)
    const xy = scoreMerge(x, y)!
    assert.isAtLeast(xy.score, MERGE_MIN_SCORE)
    assert.include(xy.reason, "subjects share pay, payment, payments, retry")
    assert.include(xy.reason, "same agents: coder")
    assert.include(xy.reason, "1 h apart")
    // same agents at the same time, but different work
    assert.isUndefined(scoreMerge(x, z))
  })

  it("ROI: value of successful work over cost, with its inputs", () => {
    const roi = computeRoi({ hourly_rate_usd: 60, minutes_saved: { debugging: 30, planning: 20 } }, { debugging: 2, planning: 1, other: 4 }, 0.5)
    assert.strictEqual(roi.value_usd, 80)
    assert.strictEqual(roi.roi, 160)
    assert.deepStrictEqual(roi.minutes_saved_by_intent, { debugging: 30, other: 0, planning: 20 })
    assert.strictEqual(computeRoi({ hourly_rate_usd: 60, minutes_saved: {} }, {}, 0).roi, null)
  })

  it("pulse periods: UTC days, Monday-based weeks", () => {
    const day = periodOf("day", new Date("2025-11-05T13:14:15Z"))
    assert.deepStrictEqual([day.start.toISOString(), day.end.toISOString()], ["2025-11-05T00:00:00.000Z", "2025-11-06T00:00:00.000Z"])
    const week = periodOf("week", new Date("2025-11-09T23:59:59Z"))
    assert.deepStrictEqual([week.start.toISOString(), week.end.toISOString()], ["2025-11-03T00:00:00.000Z", "2025-11-10T00:00:00.000Z"])
  })
})

describe("what analytics takes from a decision", () => {
  const built = (capture: ReturnType<typeof fixtures.toolCallingAgent>): BuiltDecision => {
    const derivation = derive(capture)
    return {
      ledger_id: capture.ledger_id,
      session_id: "0193a7f0-8f00-7000-8000-000000000010",
      agent_id: capture.agent_id,
      execution_id: null,
      created_at: new Date(capture.started_at),
      built_at: new Date(capture.ended_at),
      provider: capture.provider,
      model: capture.model,
      title: derivation.title,
      intent: derivation.intent,
      outcome: derivation.outcome,
      cost_usd: derivation.cost.total_usd,
      quality: derivation.quality.value,
      latency_ms: capture.ended_at - capture.started_at,
      total_tokens: capture.usage?.total_tokens ?? 0,
      completion_tokens: capture.usage?.completion_tokens ?? 0,
      status: capture.status,
      derivation,
      api: capture.api,
      raw_request: capture.request,
      raw_response: capture.response,
      subjects: extractSubjects(capture, derivation)
    }
  }

  it("a tool-calling agent: its newest input is the tool result; sources and subjects named", () => {
    const analysis = analyseDecision(built(fixtures.toolCallingAgent()))
    assert.include(analysis.searchText, "Find the open invoices for ACME Corp")
    assert.deepInclude(analysis.sources, { source_id: "tool:search_invoices", kind: "tool", label: "search_invoices" })
    assert.isTrue(analysis.subjects.some((s) => s.kind === "ticket" && s.key === "BILL-142"))
    assert.isAbove(analysis.inputPrints.length, 0, "the tool result's lines are the newest input")
    assert.strictEqual(analysis.outputPrints.length, 1, "the call's arguments are its output")
  })

  it("an error keeps a signature; a malformed request degrades without throwing", () => {
    assert.match(analyseDecision(built(fixtures.rateLimited())).signature, /^[0-9a-f]{16}$/)
    const broken = analyseDecision(built(fixtures.malformedRequest()))
    assert.deepStrictEqual(broken.inputPrints, [])
    assert.isString(broken.searchText)
  })
})
