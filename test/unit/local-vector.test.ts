/**
 * localVector hashes its features character by character. Stored vectors are compared with vectors made later, so
 * the hashing must stay what it is defined as: FNV-1a of the texts `w:<word>` and `g:<trigram of ^word$>`, signed by
 * the hash's top bit, the sum L2-normalised and rounded to six decimals. The definition, written plainly, is the
 * reference here.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { localVector, VECTOR_DIMENSIONS, words } from "../../src/analytics/text.ts"

const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

const definition = (text: string): Array<number> => {
  const vector = new Array<number>(VECTOR_DIMENSIONS).fill(0)
  const add = (feature: string, weight: number) => {
    const hash = fnv1a(feature)
    vector[hash % VECTOR_DIMENSIONS]! += hash & 0x80000000 ? -weight : weight
  }
  const counts = new Map<string, number>()
  for (const word of words(text)) counts.set(word, (counts.get(word) ?? 0) + 1)
  for (const [word, count] of counts) {
    const weight = 1 + Math.log(count)
    add(`w:${word}`, weight)
    const padded = `^${word}$`
    for (let i = 0; i < word.length; i++) add(`g:${padded.slice(i, i + 3)}`, weight / word.length)
  }
  const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0))
  return vector.map((value) => (norm === 0 ? 0 : Math.round((value / norm) * 1e6) / 1e6))
}

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.lorem({ maxCount: 40 }),
  // repeats, digits, separators, accents and ligatures that NFKD takes apart
  fc.string({ unit: fc.constantFrom("a", "b", "1", " ", "-", "é", "ﬁ", "Ä", "\u0301", "\n") })
)

/** The first non-zero dimensions of the vector below, as the code before the character-by-character hashing made it. */
const PINNED = [[2, -0.049166], [13, 0.344162], [14, 0.049166], [27, -0.344162], [29, 0.049166], [41, -0.097119]]

describe("localVector", () => {
  it("is the hashed word and trigram vector it is defined as", () => {
    fc.assert(fc.property(text, (input) => assert.deepStrictEqual(localVector(input), definition(input))), { numRuns: 3_000 })
  })

  it("keeps the vectors it made before (stored ones are compared with new ones)", () => {
    const vector = localVector("Rotate the webhook signing keys; rotate them again")
    assert.strictEqual(vector.length, VECTOR_DIMENSIONS)
    const nonZero = vector.flatMap((value, index) => (value === 0 ? [] : [[index, value]]))
    assert.deepStrictEqual(nonZero.slice(0, 6), PINNED)
  })
})
