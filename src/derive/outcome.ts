/**
 * The outcome of a call, decided in this order (first match wins):
 *
 * 1. `error`     — the caller got an error (capture.error, or HTTP status ≥ 400), or the caller disconnected
 *                  before any output was produced (nothing was delivered, so nothing succeeded).
 * 2. `truncated` — the caller disconnected mid-answer (what was delivered is incomplete), or the provider
 *                  stopped at the token limit (finish_reason `length`; any tool call it was writing is cut too).
 * 3. `filtered`  — finish_reason `content_filter`.
 * 4. `refusal`   — the message's `refusal` field is set.
 * 5. `tool_call` — the model asked for tools (finish_reason `tool_calls` or tool calls present).
 * 6. `refusal`   — the answer opens with refusal phrasing ("I'm sorry, but I can't help with that").
 * 7. `success`   — anything else, including a 2xx whose body could not be read (the caller was served;
 *                  the unreadable body lowers quality instead).
 */
import type { Capture } from "../domain/capture.ts"
import type { Outcome } from "../domain/decision.ts"
import type { ChatCall } from "./chatCall.ts"

export interface OutcomeVerdict {
  readonly outcome: Outcome
  /** which rule decided it, for quality and confidence reasons */
  readonly reason: string
}

/** Refusals open the answer; phrasing further down is usually a caveat inside a helpful answer. */
const REFUSAL_OPENING =
  /^(?:(?:i'?m sorry|i am sorry|sorry|unfortunately|apologies)[,.!]? (?:but )?)?(?:i|we)(?: really)? (?:can(?:'|no)t|cannot|won'?t|am (?:not able|unable)|'m (?:not able|unable)|must decline|have to decline|(?:am|'m) not (?:allowed|permitted)) (?:to )?(?:help|assist|provide|comply|do that|fulfil|support|answer|create|write|generate|share|engage)/i
const REFUSAL_WINDOW = 200

const looksLikeRefusal = (answer: string): boolean =>
  REFUSAL_OPENING.test(answer.trim().slice(0, REFUSAL_WINDOW).replace(/[’‘]/g, "'"))

export const decideOutcome = (capture: Capture, call: ChatCall): OutcomeVerdict => {
  const { answer } = call
  const produced = answer.text.trim() !== "" || answer.toolCalls.length > 0
  if (capture.error !== null) {
    return { outcome: "error", reason: `provider error ${capture.error.status} ${capture.error.type}` }
  }
  if (capture.status >= 400) return { outcome: "error", reason: `HTTP status ${capture.status}` }
  if (capture.aborted && !produced) return { outcome: "error", reason: "caller disconnected before any output" }
  if (capture.aborted) return { outcome: "truncated", reason: "caller disconnected mid-answer" }
  if (answer.finishReason === "length") return { outcome: "truncated", reason: "finish_reason length" }
  if (answer.finishReason === "content_filter") return { outcome: "filtered", reason: "finish_reason content_filter" }
  if (answer.refusal.trim() !== "") return { outcome: "refusal", reason: "refusal field set" }
  if (answer.finishReason === "tool_calls" || answer.toolCalls.length > 0) {
    return { outcome: "tool_call", reason: `tool calls: ${answer.toolCalls.map((tool) => tool.name).join(", ")}` }
  }
  if (looksLikeRefusal(answer.text)) return { outcome: "refusal", reason: "answer opens with refusal phrasing" }
  return { outcome: "success", reason: answer.finishReason === undefined ? "no finish reason" : `finish_reason ${answer.finishReason}` }
}
