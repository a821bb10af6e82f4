/**
 * The logic trace: what the model was told, what happened earlier in the conversation, and what it did
 * in this call, as ordered steps.
 */
import type { Usage } from "../domain/usage.ts"
import type { LogicStep } from "../domain/decision.ts"
import { type ChatCall, type ChatMessage, isInstruction, type ToolCall } from "./chatCall.ts"
import { excerpt } from "./text.ts"

type StepKind = LogicStep["kind"]

const attachmentNote = (message: ChatMessage): string => {
  const notes = [
    message.images.length > 0 ? `${message.images.length} image${message.images.length === 1 ? "" : "s"}` : "",
    message.files.length > 0 ? `files: ${message.files.map((file) => file.name).join(", ")}` : ""
  ].filter((note) => note !== "")
  return notes.length === 0 ? "" : ` [${notes.join("; ")}]`
}

const toolCallStep = (call: ToolCall): Omit<LogicStep, "index"> => ({
  kind: "tool_call",
  text: excerpt(`${call.name}(${call.arguments})`),
  tool_name: call.name,
  tool_call_id: call.id
})

export const buildLogicTrace = (call: ChatCall, usage: Usage | null): Array<LogicStep> => {
  const steps: Array<Omit<LogicStep, "index">> = []
  const push = (kind: StepKind, text: string) => steps.push({ kind, text: excerpt(text) })

  for (const message of call.messages) {
    if (isInstruction(message)) {
      push("instruction", message.text)
    } else if (message.role === "user") {
      push("user_turn", message.text + attachmentNote(message))
    } else if (message.role === "assistant") {
      if (message.text.trim() !== "") push("assistant_turn", message.text)
      for (const tool of message.toolCalls) steps.push(toolCallStep(tool))
    } else if (message.role === "tool") {
      steps.push({
        kind: "tool_result",
        text: excerpt(message.text),
        ...(message.toolName === undefined ? {} : { tool_name: message.toolName }),
        ...(message.toolCallId === undefined ? {} : { tool_call_id: message.toolCallId })
      })
    }
  }

  // This call's own output, in the order the model produces it: reasoning, text, tool calls.
  const { answer } = call
  if (answer.reasoning !== "") {
    push("reasoning", answer.reasoning)
  } else if ((usage?.reasoning_tokens ?? 0) > 0) {
    push("reasoning", `${usage?.reasoning_tokens} reasoning tokens (content not returned by the provider)`)
  }
  const answerText = answer.text.trim() !== "" ? answer.text : answer.refusal
  if (answerText.trim() !== "") push("answer", answerText)
  for (const tool of answer.toolCalls) steps.push(toolCallStep(tool))

  return steps.map((step, index) => ({ index, ...step }))
}

/** The most steps a continued call carries over from the calls it continues (the most recent are kept). */
const MAX_CONTINUED_STEPS = 400

/**
 * The trace of a call that continues another (`previous_response_id`): its predecessor's trace — the turns it
 * continues, themselves carried over from earlier calls — then its own steps.
 */
export const continueTrace = (earlier: ReadonlyArray<LogicStep>, own: ReadonlyArray<LogicStep>): Array<LogicStep> =>
  [...earlier.slice(-MAX_CONTINUED_STEPS), ...own].map((step, index) => ({ ...step, index }))
