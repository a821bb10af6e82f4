/** The chain hash is plain HMAC-SHA-256 over the documented encoding, whatever the key's length or the text. */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as Crypto from "node:crypto"
import { canonicalJson, type ChainFacts, chainHasher, encodeFacts, rawHash } from "../../src/chain/chain.ts"

const facts = (text: string, usage: unknown): ChainFacts => ({
  tenant_id: "00000000-0000-4000-8000-000000000001",
  workspace_id: "00000000-0000-4000-8000-000000000002",
  seq: 7,
  chain_key: 1,
  ledger_id: "00000000-0000-4000-8000-000000000003",
  user_id: "00000000-0000-4000-8000-000000000004",
  key_id: "00000000-0000-4000-8000-000000000005",
  agent_id: text,
  execution_id: null,
  provider: "openai",
  provider_type: "openai",
  model: text,
  api: "responses",
  stream: true,
  status: 200,
  aborted: false,
  created_at: 1_764_000_000_000,
  captured_at: 1_764_000_000_321,
  recorded_at: 1_764_000_000_400,
  first_token_ms: null,
  latency_ms: 321,
  upstream_ms: 300,
  usage,
  response_id: "resp_1",
  previous_response_id: null,
  capture_version: 2,
  source: null
})

const hmac = (secret: Uint8Array, f: ChainFacts, prev: Uint8Array, raw: Uint8Array) =>
  Crypto.createHmac("sha256", secret).update(encodeFacts(f)).update(prev).update(raw).digest()

describe("chain hash", () => {
  it("equals HMAC-SHA-256 for keys shorter, as long as and longer than a block, and texts past its buffer", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 150 }),
        fc.string({ unit: "binary", maxLength: 3000 }),
        fc.jsonValue(),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (secret, text, usage, prev, raw) => {
          const hash = chainHasher(secret)
          const f = facts(text, usage)
          assert.isTrue(hash(f, prev, raw).equals(hmac(secret, f, prev, raw)))
          // the buffers kept between decisions leave nothing behind
          const short = facts("a", null)
          assert.isTrue(hash(short, prev, raw).equals(hmac(secret, short, prev, raw)))
        }
      ),
      { numRuns: 300 }
    )
  })

  it("the encoding is the documented one, byte for byte (every chain stored so far was hashed over it)", () => {
    const f = { ...facts("agent→\"x\"", { output_tokens: 2, input_tokens: 5 }), model: "gpt-5" }
    assert.strictEqual(
      encodeFacts(f),
      "ledger-chain/1\n" +
        `["00000000-0000-4000-8000-000000000001","00000000-0000-4000-8000-000000000002",7,1,` +
        `"00000000-0000-4000-8000-000000000003","00000000-0000-4000-8000-000000000004",` +
        `"00000000-0000-4000-8000-000000000005","agent→\\"x\\"",null,"openai","openai","gpt-5","responses",true,200,false,` +
        `1764000000000,1764000000321,1764000000400,null,321,300,"resp_1",null,2]\n` +
        `{"input_tokens":5,"output_tokens":2}\nnull`
    )
  })

  it("lone surrogates are hashed as U+FFFD, as a string update of an Hmac does", () => {
    const secret = Crypto.randomBytes(32)
    const f = facts("a\uD800b\uDFFF", { "\uD83D": 1 })
    const zero = new Uint8Array(32)
    assert.isTrue(chainHasher(secret)(f, zero, zero).equals(hmac(secret, f, zero, zero)))
  })

  it("canonical JSON sorts keys at every level and keeps arrays in order", () => {
    assert.strictEqual(canonicalJson({ b: [{ d: 1, c: null }, "x"], a: { z: true, y: 1.5 } }), `{"a":{"y":1.5,"z":true},"b":[{"c":null,"d":1},"x"]}`)
    // the plain definition: JSON.stringify's text for every number, string and key
    const reference = (value: unknown): string =>
      value === null || value === undefined
        ? "null"
        : Array.isArray(value)
        ? `[${value.map(reference).join(",")}]`
        : typeof value === "object"
        ? `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${reference((value as Record<string, unknown>)[key])}`).join(",")}}`
        : JSON.stringify(value)
    fc.assert(fc.property(fc.jsonValue(), (value) => assert.strictEqual(canonicalJson(value), reference(value))), { numRuns: 500 })
    assert.strictEqual(canonicalJson([1e21, 1.5e-7, -0, 0.1]), "[1e+21,1.5e-7,0,0.1]")
  })

  it("the raw hash is sha256 over the parts' sha256 (32 zero bytes for a part absent)", () => {
    const digest = (text: string | null) => (text === null ? Buffer.alloc(32) : Crypto.createHash("sha256").update(text, "utf8").digest())
    fc.assert(fc.property(fc.string({ unit: "binary" }), fc.option(fc.string({ unit: "binary" })), fc.option(fc.string()), (request, response, context) => {
      const expected = Crypto.createHash("sha256").update(digest(request)).update(digest(response)).update(digest(context)).digest()
      assert.isTrue(rawHash(request, response, context).equals(expected))
    }))
  })
})
