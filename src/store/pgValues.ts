/** Values for Postgres columns: text cannot hold NUL, and jsonb refuses the \u0000 escape and unpaired surrogates. */

const NUL = "\u0000"
const REPLACEMENT = "\uFFFD"

/** Text for a text column: NUL (which Postgres text cannot hold) becomes U+FFFD. */
export const pgText = (text: string): string => (text.includes(NUL) ? text.replaceAll(NUL, REPLACEMENT) : text)

/** A lone surrogate's escape (half of a pair): valid JSON text, but jsonb refuses it. */
const LONE_SURROGATE = /\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i

const storable = (_key: string, value: unknown) => (typeof value === "string" ? pgText(value).toWellFormed() : value)

/**
 * JSON text for a jsonb column (cast from text in SQL), with NUL and unpaired surrogates in strings replaced. Both
 * are `\u` escapes in JSON.stringify's text, and most texts have none: a search for `\u` spares them the pattern.
 */
export const pgJson = (value: unknown): string => {
  const json = JSON.stringify(value)
  return json.includes("\\u") && (json.includes("\\u0000") || LONE_SURROGATE.test(json)) ? JSON.stringify(value, storable) : json
}
