/**
 * The derivation: one capture in, the decision's audit trail out (docs/ARCHITECTURE.md, "Deriving a decision").
 *
 * Pure and deterministic — no clock, no network, no model — so `ledger rebuild` reproduces it exactly and
 * improving a heuristic is a matter of re-running it. Odd input never throws: unreadable parts of the
 * capture degrade to empty sections, and the quality and intent reasons say why.
 */
import type { Capture } from "../domain/capture.ts"
import type { Derivation } from "../domain/decision.ts"
import { extractArtifacts } from "./artifacts.ts"
import { askedText, type ChatCall, isInstruction } from "./chatCall.ts"
import { classifyIntent } from "./classify.ts"
import { collectEvidence } from "./evidence.ts"
import { extractFindings } from "./findings.ts"
import { decideOutcome } from "./outcome.ts"
import { priceCall } from "./pricing.ts"
import { readCall } from "./read.ts"
import { scoreConfidence, scoreQuality } from "./scores.ts"
import { collapseWhitespace, splitFences, truncate } from "./text.ts"
import { buildLogicTrace } from "./trace.ts"

const TITLE_CHARS = 120

/**
 * The first user ask (its prose, so pasted code does not fill the line, and without what a coding agent's harness
 * added to it); failing that the instructions; for embeddings, what was embedded.
 */
const titleOf = (call: ChatCall, capture: Capture): string => {
  if (call.embeddings !== undefined) {
    const { inputs, characters } = call.embeddings
    return `Embed ${inputs} input${inputs === 1 ? "" : "s"} (${characters} characters) with ${capture.model}`
  }
  const asked = call.messages.map((message) => (message.role === "user" ? askedText(message.text) : "")).find((text) => text.trim() !== "")
  const text = asked ?? call.messages.find((message) => isInstruction(message) && message.text.trim() !== "")?.text
  if (text === undefined) return `${capture.provider}/${capture.model} call`
  const prose = collapseWhitespace(splitFences(text).prose)
  return truncate(prose === "" ? collapseWhitespace(text) : prose, TITLE_CHARS)
}

export const derive = (capture: Capture): Derivation => deriveFromCall(capture, readCall(capture))

/** `derive` for a caller that has already read the call (the builder reads it once for derivation and subjects). */
export const deriveFromCall = (capture: Capture, call: ChatCall): Derivation => {
  const verdict = decideOutcome(capture, call)
  const { intent, reason: intentReason } = classifyIntent(call)
  const artifacts = extractArtifacts(call)
  const findings = extractFindings(call.answer.text, { cutOff: verdict.outcome === "truncated" })
  return {
    outcome: verdict.outcome,
    intent,
    intent_reason: intentReason,
    cost: priceCall(capture),
    quality: scoreQuality({ call, verdict, intent, artifacts, findings }),
    confidence: scoreConfidence(call, verdict),
    logic_trace: buildLogicTrace(call, capture.usage),
    evidence: collectEvidence(call),
    findings,
    artifacts,
    title: titleOf(call, capture)
  }
}
