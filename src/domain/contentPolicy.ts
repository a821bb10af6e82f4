/**
 * What a workspace keeps of each call (docs/integrity.md; OWASP AISVS C13.1.2 asks that audit logs can hold no
 * prompt or response content):
 * - `full` (the default): the raw exchange as captured, credentials removed — what `ledger rebuild` re-derives from;
 * - `redacted`: secrets and common personal data masked in the exchange before anything is derived or stored;
 * - `metadata`: no prompt or answer text at all — ids, attribution, model, timings, status, usage, cost, outcome.
 * The chain covers what is kept, so `ledger verify` holds under each.
 */
import { Schema } from "effect"
import type { Derivation } from "./decision.ts"

export const CONTENT_POLICIES = ["full", "redacted", "metadata"] as const
export const ContentPolicy = Schema.Literals(CONTENT_POLICIES)
export type ContentPolicy = typeof ContentPolicy.Type

/** What a decision's title says when its content is not kept. */
export const NO_CONTENT_TITLE = "(content not kept)"

/** A derivation with every text drawn from the exchange removed; labels, scores and cost stay. */
export const withoutContent = (derivation: Derivation): Derivation => ({
  ...derivation,
  intent_reason: "",
  logic_trace: [],
  evidence: [],
  findings: [],
  artifacts: [],
  title: NO_CONTENT_TITLE
})
