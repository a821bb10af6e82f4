/**
 * bench/RESULTS.md is one table of where each benchmark target stands, short enough to read at a glance; the stories
 * are in bench/notes/. Every row gives a command and a link to its note, and every citation of a note — a link
 * `bench/notes/X.md#anchor` or a quoted heading `bench/notes/X.md, "Heading"` — anywhere in the repository names a
 * heading that is there (anchors as GitHub makes them).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const RESULTS = Path.resolve("bench/RESULTS.md")
const NOTES = Path.resolve("bench/notes")
const MAX_BYTES = 30 * 1024

/** Where citations may be: the code, the tests, the benchmarks, the docs and the top-level texts. */
const ROOTS = ["src", "layers", "test", "bench", "docs", "README.md", "CHANGELOG.md", "docker-compose.yml"]
const TEXT = /\.(ts|js|mjs|md|ya?ml|json|sh|sql)$/

const textFiles = (path: string): Array<string> => {
  if (!Fs.existsSync(path)) return []
  if (!Fs.statSync(path).isDirectory()) return TEXT.test(path) ? [path] : []
  return Fs.readdirSync(path, { withFileTypes: true }).flatMap((entry) =>
    entry.name === "node_modules" || entry.name.startsWith(".") ? [] : textFiles(Path.join(path, entry.name))
  )
}

/** GitHub's anchor for a heading: lowercase, punctuation and symbols dropped, spaces to hyphens. */
const slug = (heading: string): string =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-")

/** A note's headings (outside code blocks) and their anchors, repeated anchors numbered as GitHub numbers them. */
const headingsOf = (file: string): { readonly headings: Array<string>; readonly anchors: Set<string> } => {
  const headings: Array<string> = []
  const anchors = new Set<string>()
  let fenced = false
  for (const line of Fs.readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced
    const heading = fenced ? null : /^#{1,6} (.+?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    headings.push(heading[1]!)
    const base = slug(heading[1]!)
    let anchor = base
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`
    anchors.add(anchor)
  }
  return { headings, anchors }
}

const notes = new Map(
  Fs.readdirSync(NOTES).filter((name) => name.endsWith(".md")).map((name) => [name, headingsOf(Path.join(NOTES, name))])
)

/** A file's text with line breaks inside comments joined, so that a citation wrapped over two lines reads as one. */
const joined = (file: string): string => Fs.readFileSync(file, "utf8").replace(/\n[ \t]*(?:\*(?!\/)|\/\/|#(?!#))?[ \t]*/g, " ")

/** Citations in a file: `[bench/]notes/X.md#anchor` links and `notes/X.md, "Heading"` (relative inside bench/). */
const citations = (file: string) => {
  const text = joined(file)
  const inBench = file.startsWith(Path.resolve("bench") + Path.sep)
  const inNotes = file.startsWith(NOTES + Path.sep)
  const prefix = inNotes ? "(?:bench/notes/|notes/)?" : inBench ? "(?:bench/)?notes/" : "(?:\\.\\./)*bench/notes/"
  const links = [...text.matchAll(new RegExp(`(?<![\\w/.-])${prefix}([\\w-]+\\.md)#([\\w-]+)`, "g"))]
    .map((match) => ({ note: match[1]!, anchor: match[2]! }))
  const quoted = [...text.matchAll(new RegExp(`(?<![\\w/.-])${prefix}([\\w-]+\\.md), "([^"]+)"`, "g"))]
    .map((match) => ({ note: match[1]!, heading: match[2]! }))
  return { links, quoted }
}

/** every text file but this one, whose comments show the forms it checks */
const files = ROOTS.flatMap((root) => textFiles(Path.resolve(root))).filter((file) => file !== Path.resolve("test/unit/bench-results.test.ts"))

describe("bench/RESULTS.md", () => {
  const text = Fs.readFileSync(RESULTS, "utf8")

  it("fits in 30 KB", () => {
    const bytes = Buffer.byteLength(text)
    assert.isAtMost(bytes, MAX_BYTES, `bench/RESULTS.md is ${bytes} bytes`)
  })

  it("holds one table whose every row gives a command and a link to a note", () => {
    const rows = text.split("\n").filter((line) => line.startsWith("|"))
    const cells = (row: string) => row.slice(1, row.endsWith("|") ? -1 : undefined).split("|").map((cell) => cell.trim())
    const header = cells(rows[0]!)
    const command = header.indexOf("Command")
    const story = header.indexOf("Story")
    assert.isAtLeast(command, 0, "a Command column")
    assert.isAtLeast(story, 0, "a Story column")
    assert.match(rows[1]!, /^\|(\s*:?-+:?\s*\|)+$/)
    const body = rows.slice(2)
    assert.isAtLeast(body.length, 10)
    for (const row of body) {
      const row_ = cells(row)
      assert.strictEqual(row_.length, header.length, `cells of: ${row}`)
      assert.match(row_[command]!, /`npx node bench\/[\w/-]+\.ts[^`]*`/, `a command in: ${row}`)
      assert.match(row_[story]!, /\]\(notes\/[\w-]+\.md#[\w-]+\)/, `a link to a note in: ${row}`)
    }
    assert.strictEqual(text.split("\n").filter((line) => /^\|(\s*:?-+:?\s*\|)+$/.test(line)).length, 1, "one table")
  })
})

describe("bench/notes", () => {
  it("has notes, and no heading carries a date", () => {
    assert.isAtLeast(notes.size, 1)
    for (const [name, { headings }] of notes) {
      for (const heading of headings) assert.notMatch(heading, /\b20\d\d-\d\d-\d\d\b/, `${name}: ${heading}`)
    }
  })

  /** Checks every citation of one kind in every file against the note it names; at least 20 are checked. */
  const eachCitation = <C extends { readonly note: string }>(
    kind: (file: string) => ReadonlyArray<C>,
    check: (where: string, note: NonNullable<ReturnType<typeof notes.get>>, citation: C) => void
  ) => {
    let checked = 0
    for (const file of files) {
      for (const citation of kind(file)) {
        checked++
        const where = Path.relative(".", file)
        const target = notes.get(citation.note)
        assert.isDefined(target, `${where} cites bench/notes/${citation.note}, which does not exist`)
        check(where, target!, citation)
      }
    }
    assert.isAtLeast(checked, 20)
  }

  it("every link to a note's anchor resolves to one of its headings", () =>
    eachCitation((file) => citations(file).links, (where, target, { anchor, note }) =>
      assert.isTrue(target.anchors.has(anchor), `${where} links to ${note}#${anchor}: no such heading`)))

  it("every citation of a note by heading names one of its headings", () =>
    eachCitation((file) => citations(file).quoted, (where, target, { heading, note }) =>
      assert.include(target.headings, heading, `${where} cites ${note}, "${heading}": no such heading`)))

  it("nothing cites a section of bench/RESULTS.md any more", () => {
    for (const file of files) {
      assert.notMatch(joined(file), /RESULTS\.md(?:\)|`)?,\s*"/, `${Path.relative(".", file)} cites a section of bench/RESULTS.md`)
    }
  })
})
