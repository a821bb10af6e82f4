/** An answer cut to the capture limit: within it, valid JSON in its own shape, marked with its full size. */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { answerWithin, truncatedAnswer, truncationOf } from "../../src/domain/truncation.ts"

const LIMIT = 64 * 1024

const completion = (content: string, reasoning = "") =>
  JSON.stringify({
    id: "c-1",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content, reasoning_content: reasoning }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 }
  })

describe("truncatedAnswer", () => {
  it("keeps the answer's shape, its short fields whole, and the full size", () => {
    const text = completion("é".repeat(200_000), "thinking ".repeat(5_000))
    const kept = truncatedAnswer(text, LIMIT, 1_234_567)
    assert.isAtMost(Buffer.byteLength(kept), LIMIT)
    const answer = JSON.parse(kept)
    assert.deepStrictEqual(truncationOf(answer), { response_bytes: 1_234_567, limit_bytes: LIMIT })
    assert.strictEqual(answer.id, "c-1")
    assert.strictEqual(answer.choices[0].finish_reason, "stop")
    assert.deepStrictEqual(answer.usage, { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 })
    assert.isTrue(answer.choices[0].message.content.startsWith("éé"))
    assert.isTrue(answer.choices[0].message.content.endsWith("…"))
  })

  it("an answer too large to parse, or not JSON, is kept as the mark and an excerpt", () => {
    for (const text of ["not json at all ".repeat(10_000), completion("x".repeat(10 * LIMIT))]) {
      const answer = JSON.parse(truncatedAnswer(text, LIMIT, text.length))
      assert.deepStrictEqual(truncationOf(answer), { response_bytes: text.length, limit_bytes: LIMIT })
      assert.isTrue(text.startsWith(answer.excerpt))
    }
  })

  it("whatever the answer, the result is JSON within the limit with the mark", () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), fc.string({ unit: "grapheme", maxLength: 40 }), fc.integer({ min: 1, max: 400 }), (json, piece, times) => {
        const text = JSON.stringify({ data: JSON.parse(json), big: piece.repeat(times * 50) })
        const kept = truncatedAnswer(text, 16 * 1024, text.length)
        return Buffer.byteLength(kept) <= 16 * 1024 && truncationOf(JSON.parse(kept))?.response_bytes === text.length
      }),
      { numRuns: 300 }
    )
  })

  it("answerWithin: an answer within the limit is kept as it is, unless its assembly was already cut", () => {
    const small = completion("é".repeat(LIMIT / 2 - 200))
    assert.strictEqual(answerWithin(small, LIMIT), small)
    assert.strictEqual(truncationOf(JSON.parse(answerWithin(small, LIMIT, 10 * LIMIT)))?.response_bytes, 10 * LIMIT)
    const large = completion("é".repeat(LIMIT))
    assert.strictEqual(truncationOf(JSON.parse(answerWithin(large, LIMIT)))?.response_bytes, Buffer.byteLength(large))
  })
})
