/**
 * Text helpers shared by the derivation modules: truncation, hashing, safe JSON, markdown fences,
 * and the URL / file-path scanners used by both evidence and subjects.
 */
import { hash } from "node:crypto"

/** Longest excerpt kept for trace steps and evidence; the hash always covers the full text. */
const EXCERPT_CHARS = 500

/** Cuts `text` to at most `max` characters, marking the cut with an ellipsis; never inside a surrogate pair (an emoji). */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  const end = max - 1
  const code = text.charCodeAt(end - 1)
  return `${text.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end).trimEnd()}…`
}

/** A trimmed excerpt for display in trace steps and evidence. */
export const excerpt = (text: string): string => truncate(text.trim(), EXCERPT_CHARS)

/** Whitespace that collapsing changes: any but a space, or two in a row (what `\s+` → " " leaves alone otherwise). */
const UNCOLLAPSED = /[^\S ]| {2}/

/**
 * Runs of whitespace as one space, trimmed. Most texts the derivation collapses (sentences, titles) have single spaces
 * only, and `replace` would copy them whole for nothing: they take a test and the trim.
 */
export const collapseWhitespace = (text: string): string =>
  (UNCOLLAPSED.test(text) ? text.replace(/\s+/g, " ") : text).trim()

/** One-shot `hash`: a Hash object per call cost the builder ~3 µs a decision more (bench/notes/ingest.md, "Backlog drain of short captures"). */
export const sha256Hex = (text: string): string => hash("sha256", text, "hex")

const NO_MATCHES: ReadonlyArray<RegExpExecArray> = []

/**
 * Every match of a global `pattern` in `text`, as `matchAll` gives them. `matchAll` makes a copy of its pattern on
 * every call (~0.25 µs, ten times an `exec` that finds nothing), and a derivation runs a dozen patterns over texts
 * most of which hold no match.
 */
export const matchesOf = (pattern: RegExp, text: string): ReadonlyArray<RegExpExecArray> => {
  pattern.lastIndex = 0
  let match = pattern.exec(text)
  if (match === null) return NO_MATCHES
  const matches: Array<RegExpExecArray> = []
  while (match !== null) {
    matches.push(match)
    // an empty match would match again at the same place
    if (match[0] === "") pattern.lastIndex++
    match = pattern.exec(text)
  }
  return matches
}

/** `JSON.parse` that answers `undefined` instead of throwing. */
export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** True when `text` is a JSON object or array (the shapes a structured output takes). */
export const isJsonDocument = (text: string): boolean => {
  const trimmed = text.trim()
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return false
  const value = parseJson(trimmed)
  return typeof value === "object" && value !== null
}

export interface FencedBlock {
  /** the fence's info string as written, e.g. `ts title="src/app.ts"` */
  readonly info: string
  /** first word of the info string, lowercased; undefined for a bare fence */
  readonly language: string | undefined
  readonly content: string
  /** the closest non-blank prose line above the fence (often "Update `src/app.ts`:") */
  readonly precedingLine: string
}

export interface FencedText {
  /** the text with every fenced block replaced by a blank line */
  readonly prose: string
  readonly blocks: ReadonlyArray<FencedBlock>
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})\s*(.*)$/
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})\s*$/

/**
 * Splits markdown into prose and fenced code blocks. An unclosed fence runs to the end of the text,
 * which is what a truncated answer looks like.
 */
export const splitFences = (text: string): FencedText => {
  // no fence can open without three backticks or tildes: most texts, split here several times a derivation
  if (!text.includes("```") && !text.includes("~~~")) return { prose: text.replaceAll("\r\n", "\n"), blocks: NO_BLOCKS }
  let split = recentSplits.get(text)
  if (split === undefined) {
    split = splitFencedText(text)
    if (recentSplits.size >= RECENT_SPLITS) recentSplits.clear()
    recentSplits.set(text, split)
  }
  return split
}

const NO_BLOCKS: ReadonlyArray<FencedBlock> = []

/**
 * The last texts with fences split, and their parts: a derivation splits its ask and its answer several times (for
 * the title, the intent, evidence, subjects, findings and artifacts), and the parts are read, never changed.
 */
const recentSplits = new Map<string, FencedText>()
const RECENT_SPLITS = 16

const splitFencedText = (text: string): FencedText => {
  const prose: Array<string> = []
  const blocks: Array<FencedBlock> = []
  let open: { fence: string; info: string; precedingLine: string; lines: Array<string> } | undefined
  let lastProseLine = ""
  const closeBlock = (block: NonNullable<typeof open>) => {
    const info = block.info.trim()
    const language = info.split(/[\s:{]/, 1)[0]?.toLowerCase()
    blocks.push({
      info,
      language: language === "" ? undefined : language,
      content: block.lines.join("\n"),
      precedingLine: block.precedingLine
    })
  }
  for (const line of text.split(/\r?\n/)) {
    if (open !== undefined) {
      const closing = FENCE_CLOSE.exec(line)?.[1]
      if (closing !== undefined && closing[0] === open.fence[0] && closing.length >= open.fence.length) {
        closeBlock(open)
        open = undefined
        prose.push("")
        lastProseLine = ""
      } else {
        open.lines.push(line)
      }
      continue
    }
    const opening = FENCE_OPEN.exec(line)
    // a backtick fence's info string may not contain backticks (CommonMark), which rules out inline code
    if (opening !== null && !(opening[1]!.startsWith("`") && opening[2]!.includes("`"))) {
      open = { fence: opening[1]!, info: opening[2]!, precedingLine: lastProseLine, lines: [] }
      continue
    }
    prose.push(line)
    if (line.trim() !== "") lastProseLine = line.trim()
  }
  if (open !== undefined) closeBlock(open)
  return { prose: prose.join("\n"), blocks }
}

const URL_PATTERN = /\bhttps?:\/\/[^\s<>"'`\\)\]}]+/gi
const TRAILING_PUNCTUATION = /[.,;:!?*_]+$/

/** http(s) URLs mentioned in `text`, in order of appearance, without trailing sentence punctuation. */
export const findUrls = (text: string): Array<string> =>
  matchesOf(URL_PATTERN, text).map((match) => match[0].replace(TRAILING_PUNCTUATION, ""))

const FILE_EXTENSIONS = [
  "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "py", "ipynb", "rb", "go", "rs", "java", "kt", "kts",
  "scala", "swift", "c", "h", "cc", "cpp", "hpp", "cs", "php", "pl", "lua", "dart", "ex", "exs", "erl", "hs",
  "sql", "prisma", "graphql", "gql", "proto", "md", "mdx", "rst", "txt", "json", "jsonc", "yaml", "yml", "toml",
  "ini", "cfg", "conf", "env", "properties", "xml", "html", "htm", "css", "scss", "sass", "less", "vue",
  "svelte", "sh", "bash", "zsh", "ps1", "tf", "tfvars", "hcl", "gradle", "lock", "csv", "tsv", "log", "pdf",
  "docx", "xlsx", "png", "jpg", "jpeg", "gif", "svg"
].join("|")
const EXTENSIONLESS_FILES = "Dockerfile|Makefile|Procfile|Gemfile|Jenkinsfile|Containerfile"

/**
 * A path-like token: optional `~`, `./` or `/` root, directory segments, then a name with a known extension
 * (or a well-known extensionless build file). The look-arounds keep it from starting or ending inside a word;
 * the bounded repetitions keep a long blob (base64 is made of these characters) from costing quadratic time.
 * Sticky: `findFilePaths` tries it only where a match can start.
 */
export const FILE_PATH_AT = new RegExp(
  String.raw`(?<![\w/.@+-])((?:~\/|\.{1,2}\/|\/)?(?:[\w@+-][\w@.+-]{0,99}\/){0,24}(?:[\w@+-][\w@.+-]{0,99}\.(?:${FILE_EXTENSIONS})|${EXTENSIONLESS_FILES}))(?![\w/-])`,
  "y"
)
/** Product names that look like file names ("Node.js"). */
export const NOT_FILES = /^(?:node|next|nuxt|vue|react|express|three|chart|d3|p5|ember|backbone|alpine|solid|nest)\.js$/i

/**
 * What every path contains: a name character, a dot and an extension's first letter — or a well-known file name.
 * Most texts have none, and this test is far cheaper than the full pattern.
 */
const FILE_HINT = new RegExp(String.raw`[\w@.+-]\.[a-z]|${EXTENSIONLESS_FILES}`)
const FILE_HINTS = new RegExp(FILE_HINT.source, "g")

/** The characters a path is made of (ASCII: the patterns have no `u` flag). */
const PATH_CHARACTERS = new Uint8Array(128)
for (const character of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@.+-/~") {
  PATH_CHARACTERS[character.charCodeAt(0)] = 1
}
const isPathCharacter = (code: number) => code < 128 && PATH_CHARACTERS[code] === 1

/**
 * File paths mentioned in `text` (URLs excluded), as written, in order of appearance: what the pattern finds scanning
 * the text as a global match would, without trying it at every position. A path lies within one run of path
 * characters that holds a hint, and can start only where its look-behind allows — at the run's start or just after a
 * `~` (the one path character the look-behind does not refuse) — so only those places are tried (3–4× faster on
 * agents' conversations: bench/notes/builder.md, "The derivation's text scans"). test/unit/file-paths.test.ts holds it to
 * the scan.
 */
export const findFilePaths = (text: string): Array<string> => {
  if (!FILE_HINT.test(text)) return []
  const scanned = text.replace(URL_PATTERN, " ")
  const paths: Array<string> = []
  FILE_HINTS.lastIndex = 0
  for (let hint = FILE_HINTS.exec(scanned); hint !== null; hint = FILE_HINTS.exec(scanned)) {
    let start = hint.index
    while (start > 0 && isPathCharacter(scanned.charCodeAt(start - 1))) start--
    let end = hint.index + hint[0].length
    while (end < scanned.length && isPathCharacter(scanned.charCodeAt(end))) end++
    for (let at = start; at < end;) {
      FILE_PATH_AT.lastIndex = at
      const match = FILE_PATH_AT.exec(scanned)
      if (match !== null && !NOT_FILES.test(match[1]!)) paths.push(match[1]!)
      const tilde = scanned.indexOf("~", match === null ? at : FILE_PATH_AT.lastIndex)
      at = tilde === -1 || tilde >= end ? end : tilde + 1
    }
    FILE_HINTS.lastIndex = end
  }
  return paths
}

/** Keeps the first item for each key, preserving order. */
export const uniqueBy = <A>(items: Iterable<A>, key: (item: A) => string): Array<A> => {
  const seen = new Set<string>()
  const kept: Array<A> = []
  for (const item of items) {
    const k = key(item)
    if (seen.has(k)) continue
    seen.add(k)
    kept.push(item)
  }
  return kept
}
