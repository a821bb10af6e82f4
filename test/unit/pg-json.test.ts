/**
 * pgJson: JSON text PostgreSQL's jsonb takes — no NUL, no unpaired surrogate — whatever strings the value holds, and
 * the plain JSON.stringify text when there is nothing to replace (its fast path skips the pattern without a `\u`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { pgJson } from "../../src/store/pgValues.ts"

/** Strings of the characters that matter: NUL and control characters, both halves of a pair, a backslash and `u`. */
const tricky = fc.array(
  fc.constantFrom("a", "u", "\\", "\\u", "\u0000", "\u0001", "\n", "\"", "\ud83d", "\ude00", "🤖", "→", "\u2028", "0"),
  { maxLength: 24 }
).map((parts) => parts.join(""))

describe("pgJson", () => {
  it("is JSON of the value with NUL as U+FFFD and unpaired surrogates as U+FFFD, and no more than that", () => {
    fc.assert(fc.property(fc.array(tricky, { maxLength: 4 }), (strings) => {
      const value = { strings, nested: { text: strings.join("") } }
      const text = pgJson(value)
      // what the text says, not how: a literal backslash and "u0000" is an escaped backslash in it, and allowed
      const clean = (s: string) => s.replaceAll("\u0000", "\ufffd").toWellFormed()
      assert.deepStrictEqual(JSON.parse(text), { strings: strings.map(clean), nested: { text: clean(strings.join("")) } })
      if (strings.every((s) => s === clean(s))) assert.strictEqual(text, JSON.stringify(value))
    }), { numRuns: 5_000 })
  })

  it("leaves a literal backslash-u in a string as it is, and replaces a NUL", () => {
    assert.strictEqual(pgJson({ text: "\\u0000 and \\ud800" }), JSON.stringify({ text: "\\u0000 and \\ud800" }))
    assert.strictEqual(pgJson({ text: "a\u0000b" }), JSON.stringify({ text: "a\ufffdb" }))
  })
})
