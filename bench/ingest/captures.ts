/**
 * Realistic capture records, as the gateway publishes them, for the ingest benchmark and the builder's tests:
 * the call shapes of test/fixtures/captures (tool calls, code answers, refusals, truncation, provider errors,
 * cached Anthropic/Gemini usage, log-probabilities, an unpriced upstream) re-keyed to real tenant ids and times.
 */
import type { Capture } from "../../src/domain/capture.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import * as Fixtures from "../../test/fixtures/captures/index.ts"

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

export const realisticCapture = (identity: CaptureIdentity, options: CaptureOptions): Capture => {
  const template = TEMPLATES[(options.variant ?? 0) % TEMPLATES.length]!()
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
