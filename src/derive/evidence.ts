/**
 * Evidence: what the model was given to rely on. User turns, tool results, documents pasted into user
 * turns, and the URLs, files and images the inputs point at, each with where it came from and the
 * sha256 of its full content. The model's own earlier turns are not evidence.
 */
import type { Evidence } from "../domain/decision.ts"
import { type ChatCall, type ChatMessage, isInstruction } from "./chatCall.ts"
import { excerpt, findFilePaths, findUrls, sha256Hex, splitFences } from "./text.ts"

/** A prose paragraph at least this long in a user turn is treated as a pasted document. */
const DOCUMENT_MIN_CHARS = 800
/** Bounds the stored trail for agents that send very long conversations. */
const MAX_EVIDENCE = 100

/**
 * The trail as it is gathered, in the conversation's order: the first item of each content, up to MAX_EVIDENCE.
 * An agent's call carries its whole conversation, so the trail fills within the first turns of a long one and the
 * rest is neither scanned nor hashed: contents are told apart as text, and only the items kept are hashed
 * (bench/notes/builder.md, "Long agent conversations").
 */
interface Trail {
  readonly items: Array<Evidence>
  readonly seen: Set<string>
}

const isFull = (trail: Trail) => trail.items.length >= MAX_EVIDENCE

/** `shown` replaces the content in the excerpt when the content itself is not readable (a base64 payload). */
const add = (trail: Trail, kind: Evidence["kind"], source: string, content: string, shown: string = content) => {
  if (isFull(trail) || trail.seen.has(content)) return
  trail.seen.add(content)
  trail.items.push({ kind, source, content: excerpt(shown), hash: sha256Hex(content) })
}

/** `data:image/png;base64,...` is labelled `data:image/png`; the payload only feeds the hash. */
const imageSource = (url: string): string => (url.startsWith("data:") ? url.split(/[;,]/, 1)[0]! : url)

const addUserTurn = (trail: Trail, message: ChatMessage, source: string) => {
  if (message.text.trim() !== "") add(trail, "user_content", source, message.text)
  if (isFull(trail)) return
  const { prose, blocks } = splitFences(message.text)
  for (const block of blocks) {
    if (block.content.trim() !== "") add(trail, "document", source, block.content)
  }
  for (const paragraph of prose.split(/\n\s*\n/)) {
    if (paragraph.trim().length >= DOCUMENT_MIN_CHARS) add(trail, "document", source, paragraph.trim())
  }
  for (const url of message.images) {
    const label = imageSource(url)
    add(trail, "image", label, url, url.startsWith("data:") ? `${label} (${url.length} chars)` : url)
  }
  for (const file of message.files) add(trail, "file", file.name, file.data, file.name)
}

/** URLs and file paths named in an input message. */
const addMentions = (trail: Trail, text: string) => {
  if (isFull(trail)) return
  for (const url of findUrls(text)) add(trail, "url", url, url)
  if (isFull(trail)) return
  for (const path of findFilePaths(text)) add(trail, "file", path, path)
}

export const collectEvidence = (call: ChatCall): Array<Evidence> => {
  const trail: Trail = { items: [], seen: new Set() }
  for (const message of call.messages) {
    if (isFull(trail)) break
    const { source } = message
    if (message.role === "user") {
      addUserTurn(trail, message, source)
      addMentions(trail, message.text)
    } else if (message.role === "tool") {
      add(trail, "tool_result", message.toolName ?? source, message.text)
      addMentions(trail, message.text)
    } else if (isInstruction(message)) {
      addMentions(trail, message.text)
    }
  }
  return trail.items
}
