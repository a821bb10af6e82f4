/**
 * Capture records, as the gateway publishes them, for the ingest benchmark and the builder's tests:
 * - realistic: the call shapes of test/fixtures/captures (tool calls, code answers, refusals, truncation, provider
 *   errors, cached Anthropic/Gemini usage, log-probabilities, an unpriced upstream) re-keyed to real tenant ids and times;
 * - short: the call the gateway benchmark makes (one user message, a one-sentence answer with its usage), the captures
 *   a gateway under bench/gateway's load fills the stream with.
 */
import type { Capture } from "../../src/domain/capture.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import * as Fixtures from "../../test/fixtures/captures/index.ts"

const SHORT_ASK = "Summarise the incident report for the payments outage in two sentences."
const SHORT_ANSWER = "The payments service failed for 42 minutes after a certificate expired. Renewing it restored service."

const short = (): Capture =>
  Fixtures.capture({
    model: "gpt-4o-mini",
    request: JSON.stringify({ model: "openai/gpt-4o-mini", stream: false, messages: [{ role: "user", content: SHORT_ASK }] }),
    response: Fixtures.completion({ model: "gpt-4o-mini-2024-07-18", content: SHORT_ANSWER }),
    usage: { prompt_tokens: 19, completion_tokens: 21, total_tokens: 40 }
  })

/** Which captures a benchmark publishes: `realistic` rotates through the fixtures' shapes, `short` is one small call. */
export type CaptureShape = "realistic" | "short"
export const CAPTURE_SHAPES: ReadonlyArray<CaptureShape> = ["realistic", "short"]

const TEMPLATES: ReadonlyArray<() => Capture> = [
  Fixtures.toolCallingAgent,
  Fixtures.codingAgent,
  Fixtures.refusal,
  Fixtures.truncatedSummary,
  Fixtures.rateLimited,
  Fixtures.anthropicCached,
  Fixtures.geminiCached,
  Fixtures.withLogprobs,
  Fixtures.unknownModel
]

/** Who made the call: ids of a real tenant, workspace, user and gateway key (they must be uuids). */
export interface CaptureIdentity {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly key_id: string
}

export interface CaptureOptions {
  readonly agent_id: string
  readonly agent_name?: string | null
  readonly execution_id?: string | null
  /** epoch ms */
  readonly started_at: number
  readonly duration_ms?: number
  /** picks the call shape (modulo the number of templates) */
  readonly variant?: number
  readonly ledger_id?: string
}

export const TEMPLATE_COUNT = TEMPLATES.length

export const realisticCapture = (identity: CaptureIdentity, options: CaptureOptions, shape: CaptureShape = "realistic"): Capture => {
  const template = shape === "short" ? short() : TEMPLATES[(options.variant ?? 0) % TEMPLATES.length]!()
  const duration = options.duration_ms ?? 1_500
  return {
    ...template,
    ...identity,
    // minted like the gateway does: uuid v7, time-ordered
    ledger_id: options.ledger_id ?? uuidv7(),
    agent_id: options.agent_id,
    agent_name: options.agent_name ?? null,
    execution_id: options.execution_id ?? null,
    started_at: options.started_at,
    first_token_at: template.first_token_at === null ? null : options.started_at + Math.min(400, duration),
    ended_at: options.started_at + duration,
    upstream_ms: Math.max(0, duration - 5)
  }
}
