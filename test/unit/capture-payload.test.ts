/**
 * The gateway builds a capture's payload as bytes when the caller's body is valid UTF-8, escaping the request
 * straight from those bytes: what the builder parses must be the capture JSON.stringify would have written, for any
 * text — quotes, backslashes, every control character, any script or emoji.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { CAPTURE_VERSION, type Capture } from "../../src/domain/capture.ts"
import { capturePayload, jsonStringBytes } from "../../src/gateway/capturePayload.ts"

/** Well-formed text (a caller's valid UTF-8 decodes to no lone surrogate) rich in what JSON escapes. */
const text = fc.array(
  fc.oneof(
    fc.string({ unit: "grapheme" }),
    fc.string({ unit: fc.integer({ min: 0, max: 0x7f }).map((code) => String.fromCharCode(code)) }),
    fc.constantFrom('"', "\\", "\n", "\r\n", "\t", "\u0000", "\u001f", "\u007f", "\u2028", "❯ → ✅", "🚀", "é")
  )
).map((parts) => parts.join(""))

const capture = (request: string): Capture => ({
  v: CAPTURE_VERSION,
  api: "chat",
  ledger_id: "0194a000-0000-7000-8000-000000000009",
  tenant_id: "0194a000-0000-7000-8000-000000000001",
  workspace_id: "0194a000-0000-7000-8000-000000000002",
  user_id: "0194a000-0000-7000-8000-000000000003",
  key_id: "0194a000-0000-7000-8000-000000000004",
  agent_id: "coder ❯",
  agent_name: null,
  execution_id: null,
  provider: "openai",
  provider_type: "openai",
  model: "gpt-4o-mini",
  stream: false,
  request,
  response: "{\"id\":\"chatcmpl-1\",\"note\":\"é\\n\"}",
  error: null,
  status: 200,
  aborted: false,
  usage: null,
  started_at: 1_700_000_000_000,
  first_token_at: null,
  ended_at: 1_700_000_001_000,
  upstream_ms: 990
})

describe("capture payload", () => {
  it("escapes bytes exactly as JSON.stringify escapes their text", () => {
    fc.assert(
      fc.property(text, (input) => assert.strictEqual(jsonStringBytes(Buffer.from(input)).toString("utf8"), JSON.stringify(input).slice(1, -1))),
      { numRuns: 3_000 }
    )
  })

  it("built from the request's bytes, parses to the same capture as its JSON text", () => {
    fc.assert(
      fc.property(text, (request) => {
        // past the size below which a request is built in as text
        const large = request + " ".repeat(4096)
        const payload = capturePayload(capture(large), Buffer.from(large))
        assert.instanceOf(payload, Buffer)
        const text = payload.toString("utf8")
        assert.notInclude(text, "\n", "one line: the spool and the retention are line-delimited")
        assert.deepStrictEqual(JSON.parse(text), capture(large))
      }),
      { numRuns: 1_000 }
    )
  })

  it("without the bytes, or for a small request, is the capture's JSON text", () => {
    const small = capture("{\"a\":\"❯\"}")
    assert.strictEqual(capturePayload(small, undefined), JSON.stringify(small))
    assert.strictEqual(capturePayload(small, Buffer.from(small.request)), JSON.stringify(small))
  })
})
