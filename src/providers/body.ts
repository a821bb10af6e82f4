/**
 * Forwarding a caller's JSON body without parsing and serialising it again: pass-through adapters edit only the
 * model in the text they received.
 */

const MODEL_KEY = '"model"'

/**
 * The body text with the top-level `model` (written exactly as `from`, e.g. `"model":"openai/gpt-4o"`) set to `to`;
 * undefined when that cannot be done safely. Quotes inside JSON strings are escaped, so when `"model"` occurs once in
 * the text it is the top-level key.
 */
export const withModel = (text: string, from: string, to: string): string | undefined => {
  if (from === to) return text
  const key = text.indexOf(MODEL_KEY)
  if (key === -1 || key !== text.lastIndexOf(MODEL_KEY)) return undefined
  const written = `${MODEL_KEY}:${JSON.stringify(from)}`
  if (!text.startsWith(written, key)) return undefined
  return text.slice(0, key) + `${MODEL_KEY}:${JSON.stringify(to)}` + text.slice(key + written.length)
}

/** Whether the first character after any whitespace (or a byte-order mark) is `{`: a JSON object, not a proxy's page. */
export const opensObject = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x7b) return true
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09 && c !== 0xfeff) return false
  }
  return false
}
