/**
 * Relaying an Anthropic Messages stream to a caller that speaks Messages: every event goes on as it arrives, its data
 * unchanged (thinking blocks and their signatures byte for byte), and the events are assembled into the Message the
 * capture keeps only when the capture asks (off the relay path).
 *
 * Usage follows Anthropic's rule: `message_start` carries it and each `message_delta` repeats the fields it updates
 * as cumulative totals, so they are merged, never added.
 */
import { type AnthropicUsage, fromAnthropicUsage, mergeAnthropicUsage } from "../../domain/usage.ts"
import { STATUS_BY_TYPE } from "../../providers/anthropic.ts"
import { providerError } from "../../providers/errors.ts"
import type { StreamAnswer } from "../../providers/index.ts"
import { EventRelay, parsedEvents } from "../../providers/stream.ts"
import type { ProviderError } from "../../providers/types.ts"
import { anthropicErrorBody } from "./errors.ts"

/** One SSE event in Anthropic's framing. */
export const messagesEvent = (type: string, data: string): string => `event: ${type}\ndata: ${data}\n\n`

interface Block {
  type: string
  text?: string
  thinking?: string
  signature?: string
  input?: unknown
  citations?: Array<unknown>
  /** tool input as streamed, parsed when the block stops */
  partial?: string
  [key: string]: unknown
}

interface Event {
  type?: string
  index?: number
  message?: Record<string, unknown> & { content?: Array<Block>; usage?: AnthropicUsage }
  content_block?: Block
  delta?: {
    type?: string
    text?: string
    thinking?: string
    signature?: string
    partial_json?: string
    citation?: unknown
    stop_reason?: string | null
    stop_sequence?: string | null
  }
  usage?: AnthropicUsage
  error?: { type?: string; message?: string }
}

/** Builds the Message from the stream's events (as text), tolerating any of them being unreadable. */
const assemble = (events: ReadonlyArray<string>): { message: Record<string, unknown> | null; usage: AnthropicUsage; error: ProviderError | null } => {
  let message: (Record<string, unknown> & { content: Array<Block> }) | null = null
  const usage: AnthropicUsage = {}
  let error: ProviderError | null = null
  for (const event of parsedEvents<Event>(events)) {
    switch (event.type) {
      case "message_start":
        message = { ...event.message, content: [] }
        mergeAnthropicUsage(usage, event.message?.usage)
        break
      case "content_block_start":
        if (message && event.content_block && event.index !== undefined) message.content[event.index] = { ...event.content_block }
        break
      case "content_block_delta": {
        const block = event.index === undefined ? undefined : message?.content[event.index]
        const delta = event.delta
        if (!block || !delta) break
        if (delta.type === "text_delta") block.text = (block.text ?? "") + (delta.text ?? "")
        else if (delta.type === "thinking_delta") block.thinking = (block.thinking ?? "") + (delta.thinking ?? "")
        else if (delta.type === "signature_delta") block.signature = delta.signature ?? ""
        else if (delta.type === "input_json_delta") block.partial = (block.partial ?? "") + (delta.partial_json ?? "")
        else if (delta.type === "citations_delta") (block.citations ??= []).push(delta.citation)
        break
      }
      case "content_block_stop": {
        const block = event.index === undefined ? undefined : message?.content[event.index]
        if (block?.partial !== undefined) {
          try {
            block.input = block.partial === "" ? {} : JSON.parse(block.partial)
          } catch {
            block.input = { arguments: block.partial }
          }
          delete block.partial
        }
        break
      }
      case "message_delta":
        if (message && event.delta) {
          if (event.delta.stop_reason !== undefined) message.stop_reason = event.delta.stop_reason
          if (event.delta.stop_sequence !== undefined) message.stop_sequence = event.delta.stop_sequence
        }
        mergeAnthropicUsage(usage, event.usage)
        break
      case "error": {
        const type = event.error?.type ?? "api_error"
        error = providerError(STATUS_BY_TYPE[type] ?? 500, event.error?.message ?? "the provider failed mid-stream", type, type)
        break
      }
    }
  }
  if (message) {
    // a block still streaming when the call ended keeps what arrived of its input
    for (const block of message.content) {
      if (block?.partial !== undefined) {
        block.input = { arguments: block.partial }
        delete block.partial
      }
    }
    message.content = message.content.filter((block) => block !== undefined)
    message.usage = usage
  }
  return { message, usage, error }
}

/**
 * The relay of one Anthropic event stream. `decoder` turns upstream bytes into events (SSE from Anthropic, AWS
 * event-stream frames from Bedrock); events without a type (Bedrock's keep-alives) are dropped.
 */
export class MessagesRelay extends EventRelay {
  protected relay(event: string, data: string): void {
    let type = event
    if (type === "") {
      // Bedrock's chunks carry the event's JSON only; its type names it
      type = /"type"\s*:\s*"([^"]+)"/.exec(data)?.[1] ?? ""
      if (type === "") return
    }
    if (type === "ping") return this.emit(messagesEvent(type, data))
    this.keep(data)
    this.emit(messagesEvent(type, data))
    if (type === "message_stop" || type === "error") this.complete = true
  }

  fail(error: ProviderError): string {
    this.keep(anthropicErrorBody(error))
    return messagesEvent("error", anthropicErrorBody(error))
  }

  assembled(): StreamAnswer {
    const { message, usage, error } = assemble(this.kept())
    return { text: message === null ? "" : JSON.stringify(message), usage: fromAnthropicUsage(usage), error }
  }
}
