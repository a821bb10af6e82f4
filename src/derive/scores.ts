/**
 * Quality and confidence in [0,1], each with the reasons that moved it.
 *
 * Confidence is the model's certainty in what it said: the mean token probability when the response
 * carries log-probabilities, otherwise a heuristic from the outcome and hedging language.
 * Quality is how well the call served the ask: a baseline from the outcome, adjusted for an empty or
 * thin answer, whether code or JSON was delivered when it was asked for, and well-formed tool calls.
 */
import type { Artifact, Finding, Intent, Outcome, Score } from "../domain/decision.ts"
import { type ChatCall, lastUserText } from "./chatCall.ts"
import { clamp01, roundTo } from "./numbers.ts"
import type { OutcomeVerdict } from "./outcome.ts"
import { matchesOf, parseJson } from "./text.ts"

/** Accumulates a score from a baseline and signed adjustments, recording each as a reason. */
const scorer = (base: number, why: string) => {
  let value = base
  const reasons = [`${why}: ${base}`]
  return {
    adjust: (delta: number, reason: string) => {
      value += delta
      reasons.push(`${reason}: ${delta > 0 ? "+" : ""}${roundTo(delta, 3)}`)
    },
    done: (): Score => ({ value: roundTo(clamp01(value), 3), source: "heuristic", reasons })
  }
}

const CONFIDENCE_BASE: Record<Outcome, number> = {
  success: 0.75,
  // asking for a tool is neither confident nor hesitant about an answer not yet given
  tool_call: 0.75,
  truncated: 0.5,
  refusal: 0.2,
  filtered: 0.2,
  error: 0.05
}

const HEDGES =
  /\b(i think|i believe|i'm not sure|i am not sure|not (?:entirely )?(?:sure|certain)|probably|possibly|perhaps|maybe|might|may be|could be|it seems|seems to|likely|unclear|i don't know|i do not know|as far as i know|if i recall|i guess|hard to say)\b/g
const HEDGE_PENALTY = 0.08
const MAX_HEDGES_COUNTED = 5

const logprobConfidence = (call: ChatCall): Score | undefined => {
  const tokens = call.answer.logprobs
  if (tokens === undefined || tokens.length === 0) return undefined
  const probabilities = tokens.map((token) => Math.exp(token.logprob))
  const mean = probabilities.reduce((sum, p) => sum + p, 0) / probabilities.length
  const weakest = tokens.reduce((low, token) => (token.logprob < low.logprob ? token : low))
  return {
    value: roundTo(clamp01(mean), 3),
    source: "logprobs",
    reasons: [
      `mean token probability ${roundTo(mean, 3)} over ${tokens.length} tokens`,
      `least likely token ${JSON.stringify(weakest.token)} at ${roundTo(Math.exp(weakest.logprob), 3)}`
    ]
  }
}

export const scoreConfidence = (call: ChatCall, verdict: OutcomeVerdict): Score => {
  const fromLogprobs = logprobConfidence(call)
  if (fromLogprobs !== undefined) return fromLogprobs
  const score = scorer(CONFIDENCE_BASE[verdict.outcome], `outcome ${verdict.outcome} (${verdict.reason})`)
  if (verdict.outcome !== "error") {
    const hedges = [...new Set(matchesOf(HEDGES, call.answer.text.toLowerCase()).map((match) => match[1]!))]
    if (hedges.length > 0) {
      const counted = hedges.slice(0, MAX_HEDGES_COUNTED)
      score.adjust(-HEDGE_PENALTY * counted.length, `hedging ${counted.map((hedge) => `"${hedge}"`).join(", ")}`)
    }
  }
  return score.done()
}

const QUALITY_BASE: Record<Outcome, number> = {
  success: 0.7,
  tool_call: 0.7,
  truncated: 0.35,
  refusal: 0.2,
  filtered: 0.15,
  error: 0.05
}

const CODE_INTENTS: ReadonlySet<Intent> = new Set(["code_generation", "code_change", "debugging"])
const CODE_ARTIFACTS: ReadonlySet<Artifact["kind"]> = new Set(["code", "file", "command"])
/** Intents whose right answer is short whatever the length of the ask. */
const TERSE_INTENTS: ReadonlySet<Intent> = new Set(["classification", "extraction", "conversation"])
const LONG_ASK_CHARS = 300
const THIN_ANSWER_CHARS = 80

export interface QualityInputs {
  readonly call: ChatCall
  readonly verdict: OutcomeVerdict
  readonly intent: Intent
  readonly artifacts: ReadonlyArray<Artifact>
  readonly findings: ReadonlyArray<Finding>
}

export const scoreQuality = ({ artifacts, call, findings, intent, verdict }: QualityInputs): Score => {
  const score = scorer(QUALITY_BASE[verdict.outcome], `outcome ${verdict.outcome} (${verdict.reason})`)
  for (const problem of call.problems) score.adjust(-0.1, problem)
  const answer = call.answer.text.trim()
  const ask = lastUserText(call).trim()

  if (verdict.outcome === "tool_call") {
    const offered = new Set(call.toolsOffered)
    let wellFormed = true
    for (const tool of call.answer.toolCalls) {
      if (parseJson(tool.arguments === "" ? "{}" : tool.arguments) === undefined) {
        wellFormed = false
        score.adjust(-0.3, `arguments of ${tool.name} are not valid JSON`)
      }
      if (offered.size > 0 && !offered.has(tool.name)) {
        wellFormed = false
        score.adjust(-0.2, `${tool.name} was not among the offered tools`)
      }
    }
    if (wellFormed) score.adjust(0.15, "tool calls well-formed")
  }

  if (verdict.outcome === "success") {
    if (answer === "") score.adjust(-0.5, "empty answer")
    else if (ask.length >= LONG_ASK_CHARS && answer.length < THIN_ANSWER_CHARS && !TERSE_INTENTS.has(intent)) {
      score.adjust(-0.15, "answer thin for a long ask")
    }
    if (intent === "summarization" && answer.length > ask.length) score.adjust(-0.15, "summary longer than its source")
    if (CODE_INTENTS.has(intent)) {
      if (artifacts.some((artifact) => CODE_ARTIFACTS.has(artifact.kind))) score.adjust(0.15, "code provided as asked")
      else score.adjust(-0.2, "code asked for but none provided")
    }
    if (call.responseFormat !== "text") {
      if (artifacts.some((artifact) => artifact.kind === "structured_output")) score.adjust(0.1, "JSON delivered as asked")
      else score.adjust(-0.3, "JSON asked for but the answer does not parse")
    }
    if (findings.length > 0) score.adjust(0.05, `states ${findings.length} conclusion${findings.length === 1 ? "" : "s"}`)
  }
  return score.done()
}
