/**
 * splitFences, which the derivation runs on every ask and answer several times: a text without a fence takes a
 * shortcut (no line split), which must split exactly as the line-by-line path does.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { splitFences } from "../../src/derive/text.ts"

/** Text with no fence in it: prose, code-like lines, line ends of every kind, and backticks or tildes short of three. */
const fenceFree = fc.array(fc.constantFrom("a", "Fix it.", " ", "  ", "\t", "\n", "\r\n", "\r", "`", "``", "~", "~~", "`x`", "- item", "    code"), { maxLength: 40 })
  .map((parts) => parts.join(""))
  .filter((text) => !text.includes("```") && !text.includes("~~~"))

describe("splitFences", () => {
  it("a text without fences splits as it does with a fenced block after it (the full path)", () => {
    fc.assert(fc.property(fenceFree, (text) => {
      const plain = splitFences(`${text}\n`)
      const fenced = splitFences(`${text}\n\`\`\`js\nconst a = 1\n\`\`\``)
      assert.deepStrictEqual(plain.blocks, [])
      assert.strictEqual(fenced.prose, plain.prose)
      assert.deepStrictEqual(fenced.blocks.map((block) => [block.language, block.content]), [["js", "const a = 1"]])
    }), { numRuns: 2_000 })
  })

  it("line ends: CRLF becomes LF, a lone CR stays", () => {
    assert.deepStrictEqual(splitFences("one\r\ntwo\rthree\n"), { prose: "one\ntwo\rthree\n", blocks: [] })
    assert.deepStrictEqual(splitFences("one\r\n```\nx\r\n```\r\ntwo"), {
      prose: "one\n\ntwo",
      blocks: [{ info: "", language: undefined, content: "x", precedingLine: "one" }]
    })
  })
})
