/**
 * A capture as the gateway publishes it. The request in it is the caller's body — for an agent, its whole
 * conversation, usually a two-byte string past a hundred kilobytes — and JSON.stringify escaping that string, then
 * the publisher encoding the result, cost a long call more than forwarding it. When the caller's bytes are valid
 * UTF-8 the payload is built as bytes instead: the other fields by JSON.stringify, the request escaped straight from
 * the caller's bytes. The bytes are those of the text JSON.stringify would make, the fields in another order
 * (bench/notes/gateway.md, "The gateway on long agent conversations").
 */
import type { Capture } from "../domain/capture.ts"
import type { CapturePayload } from "../capture/CaptureStream.ts"

/** JSON's escape of each byte below 0x80 that needs one — `"`, `\` and the control characters — as JSON.stringify writes it. */
const ESCAPES: ReadonlyArray<Uint8Array | undefined> = Array.from({ length: 0x80 }, (_, byte) => {
  const short: Record<number, string> = { 0x08: "\\b", 0x09: "\\t", 0x0a: "\\n", 0x0c: "\\f", 0x0d: "\\r", 0x22: '\\"', 0x5c: "\\\\" }
  const escape = short[byte] ?? (byte < 0x20 ? `\\u${byte.toString(16).padStart(4, "0")}` : undefined)
  return escape === undefined ? undefined : Buffer.from(escape, "latin1")
})

/**
 * The inside of a JSON string literal (no quotes) for the text `bytes` encode, as UTF-8: `JSON.stringify(text)`
 * without its quotes, for valid UTF-8 (which holds no lone surrogate, the only other thing JSON.stringify escapes).
 */
export const jsonStringBytes = (bytes: Uint8Array): Buffer => {
  let extra = 0
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!
    if (byte < 0x20 || byte === 0x22 || byte === 0x5c) extra += ESCAPES[byte]!.length - 1
  }
  const out = Buffer.allocUnsafe(bytes.length + extra)
  if (extra === 0) {
    out.set(bytes)
    return out
  }
  let at = 0
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!
    if (byte >= 0x20 && byte !== 0x22 && byte !== 0x5c) {
      out[at++] = byte
      continue
    }
    const escape = ESCAPES[byte]!
    for (let k = 0; k < escape.length; k++) out[at++] = escape[k]!
  }
  return out
}

const REQUEST_KEY = Buffer.from(',"request":"')
const CLOSE = Buffer.from('"}')

/** Below this many bytes a request is built into the capture as text: small texts are cheap either way. */
const BYTES_FROM = 4096

/** The capture's payload: its JSON text, or — given the request's bytes (valid UTF-8), if large — that JSON as bytes. */
export const capturePayload = (capture: Capture, requestBytes: Buffer | undefined): CapturePayload => {
  if (requestBytes === undefined || requestBytes.length < BYTES_FROM) return JSON.stringify(capture)
  const { request: _, ...rest } = capture
  // a capture has fields besides its request, so the text of the rest is `{…}` with something inside
  const head = JSON.stringify(rest)
  return Buffer.concat([Buffer.from(head.slice(0, -1)), REQUEST_KEY, jsonStringBytes(requestBytes), CLOSE])
}
