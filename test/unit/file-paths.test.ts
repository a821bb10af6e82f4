/**
 * findFilePaths tries its pattern only where a path can start (a run of path characters holding a hint, at the run's
 * start or after a `~`): it must find what the pattern finds scanning the whole text as a global match.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { FILE_PATH_AT, findFilePaths, NOT_FILES } from "../../src/derive/text.ts"

const EXTENSIONS = "ts|tsx|js|mjs|py|go|rs|c|h|cpp|md|json|yaml|yml|toml|sh|lock|log|png|svg|sql|txt|html|css|env"
const EXTENSIONLESS = "Dockerfile|Makefile|Procfile|Gemfile|Jenkinsfile|Containerfile"

/** The definition: the same pattern run over the text with URLs blanked, as `matchAll` runs a global pattern. */
const scanned = (text: string): Array<string> =>
  Array.from(text.replace(/\bhttps?:\/\/[^\s<>"'`\\)\]}]+/gi, " ").matchAll(new RegExp(FILE_PATH_AT.source, "g")), (match) => match[1]!)
    .filter((path) => !NOT_FILES.test(path))

/** Fragments of paths, words, separators and URLs, run together at random. */
const fragment = fc.oneof(
  fc.constantFrom(...EXTENSIONS.split("|").map((extension) => `.${extension}`)),
  fc.constantFrom(...EXTENSIONLESS.split("|")),
  fc.constantFrom("src", "a", "B2", "x_y", "@scope", "pkg+1", "-", ".", "..", "/", "~", "~/", "./", "../", "Node.js",
    " ", "\n", "`", "(", ")", ",", ":", "é", "→", "#", "http://h.io/a.ts", "https://x.dev/p?q=1 ", "tsx", "A.B"),
  fc.string({ unit: fc.constantFrom("a", ".", "/", "~", "-", "@", "+", "_", "1", " ", "t", "s"), maxLength: 8 })
)
const text = fc.array(fragment, { maxLength: 40 }).map((parts) => parts.join(""))

describe("findFilePaths", () => {
  it("finds what the pattern finds scanning the whole text", () => {
    fc.assert(fc.property(text, (input) => {
      assert.deepStrictEqual(findFilePaths(input), scanned(input))
    }), { numRuns: 20_000 })
  })

  it("finds paths after a tilde, inside runs and at sentence ends", () => {
    const input = "See a~/b.ts, ~/c.py and ~~/d.md; then src/app.ts. Also x.ts~/y.ts and Node.js, https://h.io/e.ts"
    assert.deepStrictEqual(findFilePaths(input), ["/b.ts", "~/c.py", "~/d.md", "src/app.ts", "x.ts", "/y.ts"])
    assert.deepStrictEqual(findFilePaths(input), scanned(input))
  })
})
