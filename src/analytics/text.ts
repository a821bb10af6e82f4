/**
 * Local text representations for analytics, pure and deterministic (no model, no network):
 *
 * - `localVector`: a 256-dimension hashed vector of word and character-trigram features, L2-normalised. Two texts
 *   that say the same thing in other words still share most stems and trigrams, so their cosine stays high, while
 *   unrelated texts land near 0. Signed feature hashing keeps collisions from inflating similarity.
 * - `callSignature`: what a call asked and answered, normalised so that repeats of the same call (ids, numbers and
 *   timestamps aside) get the same signature — the loop detector counts these.
 * - `fingerprints`: hashes of the distinctive lines of a text, to recognise one agent's output reused as another
 *   agent's input (hand-offs).
 */
import { hash } from "node:crypto"

export const VECTOR_DIMENSIONS = 256

const STOPWORDS = new Set(
  ("a an and are as at be been but by can could did do does for from had has have how i if in into is it its me my " +
    "no not of on or our please should so than that the their them then there these they this those to us was we " +
    "were what when where which while who why will with would you your")
    .split(" ")
)

/** Lowercase words of two or more letters or digits, stopwords removed. */
export const words = (text: string): Array<string> =>
  text.normalize("NFKD").replace(/[\u0300-\u036f]/g, "").toLowerCase().split(/[^a-z0-9]+/).filter((word) =>
    word.length >= 2 && !STOPWORDS.has(word)
  )

/** 32-bit FNV-1a, as int32 steps: `fnv1a(prefix + text)` is `fnv1aFrom(fnv1aFrom(FNV_OFFSET, prefix), text)`. */
const FNV_OFFSET = 0x811c9dc5
const fnvStep = (hash: number, code: number): number => Math.imul(hash ^ code, 0x01000193)
const fnv1aFrom = (hash: number, text: string): number => {
  for (let i = 0; i < text.length; i++) hash = fnvStep(hash, text.charCodeAt(i))
  return hash
}

/** A feature's hash picks its dimension and, by its top bit, its sign. */
const addFeature = (vector: Float64Array, hash: number, weight: number) => {
  const unsigned = hash >>> 0
  vector[unsigned % VECTOR_DIMENSIONS]! += unsigned & 0x80000000 ? -weight : weight
}

/** The hash states after the features' prefixes, `w:` (a word) and `g:` (a trigram of `^word$`). */
const WORD = fnv1aFrom(FNV_OFFSET, "w:")
const TRIGRAM = fnv1aFrom(FNV_OFFSET, "g:")
const CARET = 0x5e
const DOLLAR = 0x24

/**
 * Hashed word + trigram vector. Each word counts once as a whole (weight 1) and once spread over its trigrams
 * (weight 1 in total), so a paraphrase with other inflections ("retrying" / "retries") still matches on trigrams.
 * Features are hashed as the texts `w:<word>` and `g:<trigram of ^word$>`, character by character without making
 * those strings (they were a tenth of the materialiser's CPU a decision).
 */
export const localVector = (text: string): Array<number> => {
  const vector = new Float64Array(VECTOR_DIMENSIONS)
  const counts = new Map<string, number>()
  for (const word of words(text)) counts.set(word, (counts.get(word) ?? 0) + 1)
  for (const [word, count] of counts) {
    // sublinear term frequency: a word repeated ten times is not ten times the topic
    const weight = 1 + Math.log(count)
    addFeature(vector, fnv1aFrom(WORD, word), weight)
    // the trigrams of `^word$`: as many as the word has characters
    const length = word.length
    const share = weight / length
    const code = (at: number) => at === 0 ? CARET : at > length ? DOLLAR : word.charCodeAt(at - 1)
    for (let i = 0; i < length; i++) addFeature(vector, fnvStep(fnvStep(fnvStep(TRIGRAM, code(i)), code(i + 1)), code(i + 2)), share)
  }
  return normalise(vector)
}

/**
 * L2-normalised copy, rounded to six decimals; the zero vector stays zero. Plain loops over a filled array:
 * `Array.from` of the typed array and `reduce`/`map` cost half of what a vector did.
 */
export const normalise = (vector: ArrayLike<number>): Array<number> => {
  let squares = 0
  for (let i = 0; i < vector.length; i++) squares += vector[i]! * vector[i]!
  const norm = Math.sqrt(squares)
  const normalised = new Array<number>(vector.length).fill(0)
  if (norm === 0) return normalised
  for (let i = 0; i < vector.length; i++) normalised[i] = Math.round((vector[i]! / norm) * 1e6) / 1e6
  return normalised
}

/** Cosine of two vectors, clamped to [0,1] (a negative cosine means unrelated here, not opposite). */
export const similarity = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  let dot = 0
  let normA = 0
  let normB = 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    dot += a[i]! * b[i]!
    normA += a[i]! * a[i]!
    normB += b[i]! * b[i]!
  }
  if (normA === 0 || normB === 0) return 0
  return Math.min(1, Math.max(0, Math.round((dot / Math.sqrt(normA * normB)) * 1e4) / 1e4))
}

/** Mean of vectors, normalised (a feature's centroid); empty when there are none. */
export const centroid = (vectors: ReadonlyArray<ReadonlyArray<number>>): Array<number> => {
  if (vectors.length === 0) return []
  const sum = new Array<number>(VECTOR_DIMENSIONS).fill(0)
  for (const vector of vectors) for (let i = 0; i < VECTOR_DIMENSIONS; i++) sum[i]! += vector[i] ?? 0
  return normalise(sum)
}

const shortHash = (text: string): string => hash("sha256", text, "hex").slice(0, 16)

/** Numbers, hex ids, uuids and timestamps vary between otherwise identical calls. */
const normaliseForSignature = (text: string): string =>
  text.toLowerCase()
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>")
    .replace(/\b[0-9a-f]{12,}\b/g, "<id>")
    .replace(/\d+/g, "0")
    .replace(/\s+/g, " ")
    .trim()

/** The signature of a call: its newest input and its answer (text or tool calls), normalised. */
export const callSignature = (lastInput: string, answer: string): string =>
  shortHash(`${normaliseForSignature(lastInput)}\u0000${normaliseForSignature(answer)}`)

/** A line shorter than this is too generic ("Sure, here it is:") to prove that content was passed on. */
const FINGERPRINT_MIN_CHARS = 40
const MAX_FINGERPRINTS = 24

/** Hashes of the distinctive lines of `texts` (whitespace and case normalised), at most MAX_FINGERPRINTS. */
export const fingerprints = (texts: ReadonlyArray<string>): Array<string> => {
  const found = new Set<string>()
  for (const text of texts) {
    for (const line of text.split(/\r?\n/)) {
      const normalised = line.toLowerCase().replace(/\s+/g, " ").replace(/^[\s>*#-]+/, "").trim()
      if (normalised.length >= FINGERPRINT_MIN_CHARS) found.add(shortHash(normalised))
      if (found.size >= MAX_FINGERPRINTS) return [...found]
    }
  }
  return [...found]
}

/** A deterministic uuid-shaped id for a named thing (feature ids from their anchor session). */
export const stableUuid = (name: string): string => {
  const hex = hash("sha256", name, "hex")
  // version nibble 8 ("custom", RFC 9562) and the RFC variant bits
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${
    hex.slice(17, 20)
  }-${hex.slice(20, 32)}`
}

/** Tokens of a subject key (`src/pay/retry_policy.ts` → pay, retry, policy) for comparing features. */
export const subjectTokens = (key: string): Array<string> =>
  words(key.replace(/([a-z])([A-Z])/g, "$1 $2")).filter((token) => token.length >= 3 && !SUBJECT_NOISE.has(token))

/** Path and language noise that says nothing about which work a subject belongs to. */
const SUBJECT_NOISE = new Set([
  "src", "lib", "test", "tests", "spec", "index", "main", "app", "ts", "tsx", "js", "py", "go", "rs", "java", "md",
  "json", "yaml", "yml", "sql", "http", "https", "www", "com", "org", "service", "svc", "api", "worker", "gateway"
])
