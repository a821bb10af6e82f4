/**
 * Forwarding a caller's JSON body without parsing and serialising it again: pass-through adapters edit only the
 * model (and, for a chat-completions stream, ask for the usage chunk) in the text they received, and send the
 * caller's own bytes spliced around the edits when it sent valid UTF-8. An agent's call carries its whole
 * conversation, often a two-byte string of a hundred kilobytes and more: copying it into an edited string and
 * encoding that again cost the gateway more than the rest of the call (bench/notes/gateway.md, "The gateway on long
 * agent conversations").
 */
import { isUtf8 } from "node:buffer"
import type { CallContext } from "./types.ts"

const MODEL_KEY = '"model"'

/** A change to the caller's body text: `remove` characters at `at` replaced by `insert`. */
export interface TextEdit {
  readonly at: number
  readonly remove: number
  readonly insert: string
}

/**
 * The edit setting the top-level `model` (written exactly as `from`, e.g. `"model":"openai/gpt-4o"`) to `to` — none
 * when they are the same; undefined when it cannot be done safely. Quotes inside JSON strings are escaped, so when
 * `"model"` occurs once in the text it is the top-level key.
 */
export const modelEdit = (text: string, from: string, to: string): ReadonlyArray<TextEdit> | undefined => {
  if (from === to) return []
  const key = text.indexOf(MODEL_KEY)
  if (key === -1 || key !== text.lastIndexOf(MODEL_KEY)) return undefined
  const written = `${MODEL_KEY}:${JSON.stringify(from)}`
  if (!text.startsWith(written, key)) return undefined
  return [{ at: key, remove: written.length, insert: `${MODEL_KEY}:${JSON.stringify(to)}` }]
}

/** The caller's body bytes, kept for forwarding only when they are exactly its text's UTF-8 (valid UTF-8). */
export const forwardableBytes = (bytes: Buffer): Buffer | undefined => (isUtf8(bytes) ? bytes : undefined)

/**
 * The caller's body (`ctx.requestText`, and `ctx.requestBytes` when it has them) with `edits` applied, in order of
 * position and not overlapping: the caller's bytes spliced around the edits, or else the edited text.
 */
export const editedBody = (ctx: CallContext, edits: ReadonlyArray<TextEdit>): string | Buffer => {
  const text = ctx.requestText ?? ""
  const bytes = ctx.requestBytes
  if (bytes === undefined) {
    let out = ""
    let from = 0
    for (const edit of edits) {
      out += text.slice(from, edit.at) + edit.insert
      from = edit.at + edit.remove
    }
    return from === 0 ? text : out + text.slice(from)
  }
  if (edits.length === 0) return bytes
  const parts: Array<Buffer> = []
  let from = 0
  let byteFrom = 0
  for (const edit of edits) {
    const byteAt = byteFrom + Buffer.byteLength(text.slice(from, edit.at))
    parts.push(bytes.subarray(byteFrom, byteAt), Buffer.from(edit.insert))
    from = edit.at + edit.remove
    byteFrom = byteAt + Buffer.byteLength(text.slice(edit.at, from))
  }
  parts.push(bytes.subarray(byteFrom))
  return Buffer.concat(parts)
}

/** The caller's body with only the model edited; undefined without a body or when the edit cannot be made safely. */
export const withModel = (ctx: CallContext, from: string): string | Buffer | undefined => {
  if (ctx.requestText === undefined) return undefined
  const edits = modelEdit(ctx.requestText, from, ctx.model)
  return edits === undefined ? undefined : editedBody(ctx, edits)
}

/** Whether the first character after any whitespace (or a byte-order mark) is `{`: a JSON object, not a proxy's page. */
export const opensObject = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x7b) return true
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09 && c !== 0xfeff) return false
  }
  return false
}
