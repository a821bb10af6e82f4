/**
 * An answer larger than the capture limit is kept cut to fit, in its own JSON shape: its long strings are cut to
 * one length (the longest first), and the object gains `ledger_truncated` with the answer's full size — which the
 * decision's derivation reads, and which stays in the stored raw answer. An answer too large to parse cheaply, or
 * not a JSON object, is kept as the mark with an excerpt of its beginning.
 */

export const TRUNCATION_FIELD = "ledger_truncated"

export interface Truncation {
  /** the answer's size as the provider sent it, bytes */
  readonly response_bytes: number
  /** the capture limit it was cut to */
  readonly limit_bytes: number
}

/** above this many times the limit, the answer is not parsed to be cut (its parse would hold the event loop) */
const PARSE_CEILING = 8
const EXCERPT_CHARS = 16 * 1024
const ELLIPSIS = "…"

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

const byteLength = (text: string) => Buffer.byteLength(text, "utf8")

/** strings this short are never cut: ids, roles, finish reasons */
const SHORTEST_CUT = 64

const stringBytes = (value: unknown, into: Array<number>): Array<number> => {
  if (typeof value === "string") into.push(byteLength(value))
  else if (Array.isArray(value)) for (const item of value) stringBytes(item, into)
  else if (isObject(value)) for (const key in value) stringBytes(value[key], into)
  return into
}

/** Every string over `longest` bytes cut to about that many (by its own bytes per character). */
const cutStrings = (value: unknown, longest: number): unknown => {
  if (typeof value === "string") {
    const bytes = byteLength(value)
    return bytes > longest ? value.slice(0, Math.floor((longest * value.length) / bytes)) + ELLIPSIS : value
  }
  if (Array.isArray(value)) return value.map((item) => cutStrings(item, longest))
  if (isObject(value)) {
    const out: Record<string, unknown> = {}
    for (const key in value) out[key] = cutStrings(value[key], longest)
    return out
  }
  return value
}

/** The longest string size (bytes, at least SHORTEST_CUT) that removes at least `excess` bytes from strings of these sizes. */
const waterLevel = (sizes: ReadonlyArray<number>, excess: number): number => {
  let low = SHORTEST_CUT
  let high = sizes.reduce((max, size) => Math.max(max, size), SHORTEST_CUT)
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    let removed = 0
    for (const size of sizes) if (size > mid) removed += size - mid
    if (removed >= excess) low = mid
    else high = mid - 1
  }
  return low
}

const excerptOnly = (text: string, mark: Truncation) =>
  JSON.stringify({ [TRUNCATION_FIELD]: mark, excerpt: text.slice(0, Math.min(EXCERPT_CHARS, Math.floor(mark.limit_bytes / 4))) })

/** `text` (an answer's JSON) within `limit` bytes, marked with its full size `responseBytes`. */
export const truncatedAnswer = (text: string, limit: number, responseBytes: number): string => {
  const mark: Truncation = { response_bytes: responseBytes, limit_bytes: limit }
  let value: unknown
  if (text.length <= PARSE_CEILING * limit) {
    try {
      value = JSON.parse(text)
    } catch {
      value = undefined
    }
  }
  if (!isObject(value)) return excerptOnly(text, mark)
  let kept = JSON.stringify({ ...value, [TRUNCATION_FIELD]: mark })
  // escapes make the JSON larger than its strings: each round cuts what is still over, at most a few rounds
  for (let round = 0; round < 4 && byteLength(kept) > limit; round++) {
    const excess = byteLength(kept) - limit + 1024
    const cut = cutStrings(value, waterLevel(stringBytes(value, []), excess)) as Record<string, unknown>
    kept = JSON.stringify({ ...cut, [TRUNCATION_FIELD]: mark })
    value = cut
  }
  return byteLength(kept) <= limit ? kept : excerptOnly(text, mark)
}

/**
 * An answer as a capture keeps it: whole when within `limit` bytes and not cut already (`receivedBytes`: the size
 * the provider sent, given when the assembly stopped keeping it), else cut to the limit and marked.
 */
export const answerWithin = (answer: string, limit: number, receivedBytes?: number): string => {
  // a UTF-16 unit is at most three UTF-8 bytes: most answers are known to fit without counting
  if (receivedBytes === undefined && answer.length <= limit / 3) return answer
  const bytes = byteLength(answer)
  if (receivedBytes === undefined && bytes <= limit) return answer
  return truncatedAnswer(answer, limit, Math.max(receivedBytes ?? 0, bytes))
}

/** The mark of a captured answer that was cut to fit, when it was. */
export const truncationOf = (answer: unknown): Truncation | undefined => {
  if (!isObject(answer)) return undefined
  const mark = answer[TRUNCATION_FIELD]
  return isObject(mark) && typeof mark.response_bytes === "number" && typeof mark.limit_bytes === "number"
    ? { response_bytes: mark.response_bytes, limit_bytes: mark.limit_bytes }
    : undefined
}
