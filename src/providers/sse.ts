/**
 * Server-sent events decoding for upstream streams (OpenAI, Anthropic, Gemini), tolerant of any chunking:
 * bytes split inside a UTF-8 character, a line or an event, and `\n` or `\r\n` line endings.
 */

/** Called once per complete event; `event` is "" when the event has no `event:` field. */
export type SseHandler = (event: string, data: string) => void

export class SseDecoder {
  private readonly utf8 = new TextDecoder()
  private readonly onEvent: SseHandler
  private buffer = ""
  private event = ""
  private data: string | null = null

  constructor(onEvent: SseHandler) {
    this.onEvent = onEvent
  }

  push(bytes: Uint8Array): void {
    this.feed(this.utf8.decode(bytes, { stream: true }))
  }

  /** The upstream ended: an event without its closing blank line still counts. */
  end(): void {
    this.feed(this.utf8.decode() + "\n\n")
  }

  private feed(text: string): void {
    const buffer = this.buffer + text
    let start = 0
    let newline = buffer.indexOf("\n", start)
    while (newline >= 0) {
      const end = newline > start && buffer.charCodeAt(newline - 1) === 13 ? newline - 1 : newline
      this.line(buffer.slice(start, end))
      start = newline + 1
      newline = buffer.indexOf("\n", start)
    }
    this.buffer = start === 0 ? buffer : buffer.slice(start)
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data !== null) this.onEvent(this.event, this.data)
      this.event = ""
      this.data = null
      return
    }
    const colon = line.indexOf(":")
    if (colon === 0) return // comment (keep-alive)
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? "" : line.slice(colon + 1)
    if (value.charCodeAt(0) === 32) value = value.slice(1)
    if (field === "data") this.data = this.data === null ? value : this.data + "\n" + value
    else if (field === "event") this.event = value
  }
}
