/**
 * collapseWhitespace skips its `replace` for texts with single spaces only: it must give what the replace gives.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { collapseWhitespace } from "../../src/derive/text.ts"

/** Words and whitespace of every kind \s matches, single and in runs. */
const spaced = fc.array(fc.constantFrom("a", "Fix it.", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\ufeff", "\u2028", "x y"), { maxLength: 30 })
  .map((parts) => parts.join(""))

describe("collapseWhitespace", () => {
  it("collapses every run of whitespace to one space and trims, as replace(/\\s+/g, ' ').trim() does", () => {
    fc.assert(fc.property(spaced, (text) => {
      assert.strictEqual(collapseWhitespace(text), text.replace(/\s+/g, " ").trim())
    }), { numRuns: 5_000 })
  })

  it("leaves single-spaced text as it is, trimmed", () => {
    assert.strictEqual(collapseWhitespace(" Fix the login bug "), "Fix the login bug")
    assert.strictEqual(collapseWhitespace("one\t two\n\nthree"), "one two three")
  })
})
