/**
 * Evidence: what the model was given to rely on. User turns, tool results, documents pasted into user
 * turns, and the URLs, files and images the inputs point at, each with where it came from and the
 * sha256 of its full content. The model's own earlier turns are not evidence.
 */
import type { Evidence } from "../../domain/decision.ts"
import { type ChatCall, type ChatMessage, isInstruction } from "./chat.ts"
import { excerpt, findFilePaths, findUrls, sha256Hex, splitFences, uniqueBy } from "./text.ts"

/** A prose paragraph at least this long in a user turn is treated as a pasted document. */
const DOCUMENT_MIN_CHARS = 800
/** Bounds the stored trail for agents that send very long conversations. */
const MAX_EVIDENCE = 100

/** `shown` replaces the content in the excerpt when the content itself is not readable (a base64 payload). */
const item = (kind: Evidence["kind"], source: string, content: string, shown: string = content): Evidence => ({
  kind,
  source,
  content: excerpt(shown),
  hash: sha256Hex(content)
})

/** `data:image/png;base64,...` is labelled `data:image/png`; the payload only feeds the hash. */
const imageSource = (url: string): string => (url.startsWith("data:") ? url.split(/[;,]/, 1)[0]! : url)

const userEvidence = (message: ChatMessage, source: string): Array<Evidence> => {
  const found: Array<Evidence> = []
  if (message.text.trim() !== "") found.push(item("user_content", source, message.text))
  const { prose, blocks } = splitFences(message.text)
  for (const block of blocks) {
    if (block.content.trim() !== "") found.push(item("document", source, block.content))
  }
  for (const paragraph of prose.split(/\n\s*\n/)) {
    if (paragraph.trim().length >= DOCUMENT_MIN_CHARS) found.push(item("document", source, paragraph.trim()))
  }
  for (const url of message.images) {
    const label = imageSource(url)
    found.push(item("image", label, url, url.startsWith("data:") ? `${label} (${url.length} chars)` : url))
  }
  for (const file of message.files) found.push(item("file", file.name, file.data, file.name))
  return found
}

/** URLs and file paths named in an input message. */
const mentions = (text: string): Array<Evidence> => [
  ...findUrls(text).map((url) => item("url", url, url)),
  ...findFilePaths(text).map((path) => item("file", path, path))
]

export const collectEvidence = (call: ChatCall): Array<Evidence> => {
  const found: Array<Evidence> = []
  for (const message of call.messages) {
    const { source } = message
    if (message.role === "user") {
      found.push(...userEvidence(message, source), ...mentions(message.text))
    } else if (message.role === "tool") {
      found.push(item("tool_result", message.toolName ?? source, message.text), ...mentions(message.text))
    } else if (isInstruction(message)) {
      found.push(...mentions(message.text))
    }
  }
  return uniqueBy(found, (evidence) => evidence.hash).slice(0, MAX_EVIDENCE)
}
