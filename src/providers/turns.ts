/**
 * The conversation walk shared by the translated providers (Anthropic, Gemini, Bedrock): chat-completions
 * messages become alternating user/assistant turns of provider content blocks. Each provider supplies only
 * how one block is written.
 */
import type { ChatMessage, ToolCall } from "./chatCompletions.ts"
import { textOf, toolNamesById } from "./chatCompletions.ts"
import { UnsupportedRequest } from "./types.ts"

export interface BlockWriter<B> {
  /** provider name, for error messages */
  readonly provider: string
  text(text: string): B
  /** an `image_url` part; `param` locates it for an error */
  image(url: string, param: string): B
  /** a tool call the assistant issued */
  toolCall(call: ToolCall): B
  /** a tool message: the result of call `callId` of tool `name` */
  toolResult(callId: string, name: string, text: string): B
  /** an assistant turn's signed reasoning, for providers that take it back (Anthropic thinking); left out otherwise */
  reasoning?(text: string, signature: string): B
}

export interface Turn<B> {
  readonly role: "user" | "assistant"
  readonly blocks: Array<B>
}

/**
 * System and developer messages are left out (providers take them apart, see `systemTexts`). Consecutive
 * messages of one role are merged into one turn: providers want turns to alternate, and want all the tool
 * results answering one assistant step in a single user turn. Empty texts are dropped (providers refuse them).
 */
export const toTurns = <B>(messages: ReadonlyArray<ChatMessage>, writer: BlockWriter<B>): Array<Turn<B>> => {
  const turns: Array<Turn<B>> = []
  const toolNames = toolNamesById(messages)
  const append = (role: Turn<B>["role"], block: B): void => {
    const last = turns[turns.length - 1]
    if (last?.role === role) last.blocks.push(block)
    else turns.push({ role, blocks: [block] })
  }
  messages.forEach((message, i) => {
    switch (message.role) {
      case "system":
      case "developer":
        return
      case "user":
      case "assistant": {
        const role = message.role
        if (role === "assistant" && message.reasoning_signature && writer.reasoning) {
          append(role, writer.reasoning(message.reasoning_content ?? "", message.reasoning_signature))
        }
        if (typeof message.content === "string") {
          if (message.content) append(role, writer.text(message.content))
        } else if (message.content) {
          message.content.forEach((part, j) => {
            if (part.type === "text" || part.type === "refusal") {
              const text = part.text ?? part.refusal
              if (text) append(role, writer.text(text))
            } else if (part.type === "image_url" && part.image_url) {
              append(role, writer.image(part.image_url.url, `messages[${i}].content[${j}].image_url`))
            } else {
              throw new UnsupportedRequest(
                `content part type "${part.type}" is not supported for ${writer.provider}`,
                `messages[${i}].content[${j}].type`
              )
            }
          })
        }
        if (role === "assistant" && message.tool_calls) {
          for (const call of message.tool_calls) append(role, writer.toolCall(call))
        }
        return
      }
      case "tool": {
        const callId = message.tool_call_id ?? ""
        append("user", writer.toolResult(callId, toolNames.get(callId) ?? message.name ?? callId, textOf(message.content)))
        return
      }
      default:
        throw new UnsupportedRequest(
          `message role "${message.role}" is not supported for ${writer.provider} (use tools and tool messages)`,
          `messages[${i}].role`
        )
    }
  })
  return turns
}
