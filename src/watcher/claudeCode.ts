/**
 * Claude Code's transcripts (`~/.claude/projects/<project>/<session>.jsonl`) as model turns in the Anthropic
 * Messages format.
 *
 * The file holds one entry a line. `user` entries carry a prompt or tool results, `assistant` entries the model's
 * answer — one entry per content block, several entries sharing the provider's message id (`msg_…`) and its usage.
 * Every entry names its parent (`parentUuid`), so the conversation a call was sent is the chain of entries above
 * its answer. Many other entry types (attachments, queue operations, request journals, cost state, …) are no model
 * turn; they are passed over, and counted when this reader does not know them.
 *
 * A turn is complete when its message has a stop reason, when the conversation goes on (a user entry, or another
 * message), or when the file stops growing. What is sent: the conversation's user and assistant messages up to
 * the call (not the system prompt or tool definitions, which the transcript does not keep whole) and the answer with
 * its usage, id, model and stop reason. Synthetic entries (errors Claude Code writes itself) are not model calls.
 */
import { asRecord, asString, type CompletedTurn, parseLine, type ReadTurn, type SkippedLines, timeOf, type TranscriptReader } from "./transcript.ts"

/** Entry types that are no model turn and that this reader knows to pass over. */
const OTHER_ENTRIES = new Set([
  "attachment",
  "queue-operation",
  "api-request",
  "api-request-shape",
  "api-request-blob",
  "last-prompt",
  "atis-latch",
  "cost-state",
  "tools-used",
  "summary",
  "system",
  "file-history-snapshot",
  "progress",
  "custom-title",
  "tag"
])

interface Entry {
  readonly parent: string | undefined
  readonly timestamp: number | undefined
  /** a user or assistant message, as sent to or received from the model */
  readonly message?: { readonly role: "user" | "assistant"; readonly content: unknown; readonly id?: string }
}

interface Pending {
  readonly id: string
  readonly model: string
  readonly firstParent: string | undefined
  readonly requestRef: string | undefined
  readonly blocks: Array<unknown>
  stopReason: unknown
  usage: unknown
  endedAt: number | undefined
  readonly context: { sessionId: string; version: string | null; cwd: string | null; gitBranch: string | null }
}

const contentBlocks = (content: unknown): Array<unknown> =>
  Array.isArray(content) ? content : typeof content === "string" ? [{ type: "text", text: content }] : []

export class ClaudeCodeTranscript implements TranscriptReader {
  readonly skipped: SkippedLines = { corrupt: 0, unknown: 0 }
  private readonly entries = new Map<string, Entry>()
  /** when each request the client journaled was sent (newer versions write `api-request` entries) */
  private readonly requestTimes = new Map<string, number>()
  private readonly pending = new Map<string, Pending>()
  private readonly emitted = new Set<string>()

  line(text: string, end: number): ReadonlyArray<CompletedTurn> {
    const entry = parseLine(text, this.skipped)
    if (entry === undefined) return []
    const type = asString(entry.type)
    const uuid = asString(entry.uuid)
    const parent = asString(entry.parentUuid)
    const timestamp = timeOf(entry.timestamp)
    if (type === "api-request") {
      const id = asString(entry.id)
      if (id !== undefined && timestamp !== undefined) this.requestTimes.set(id, timestamp)
      return []
    }
    if (type !== "user" && type !== "assistant") {
      if (type === undefined || !OTHER_ENTRIES.has(type)) this.skipped.unknown++
      // entries of any type can sit in the chain between a message and its parent
      if (uuid !== undefined) this.entries.set(uuid, { parent, timestamp })
      return []
    }
    const message = asRecord(entry.message)
    if (type === "user") {
      if (uuid !== undefined) this.entries.set(uuid, { parent, timestamp, ...(message === undefined ? {} : { message: { role: "user", content: message.content } }) })
      // the conversation goes on: the calls before it are over
      return this.complete(end, () => true)
    }
    const id = asString(message?.id)
    const model = asString(message?.model)
    if (uuid !== undefined) {
      this.entries.set(uuid, { parent, timestamp, ...(message === undefined || id === undefined ? {} : { message: { role: "assistant", content: message.content, id } }) })
    }
    if (message === undefined || id === undefined || model === undefined || model === "<synthetic>" || entry.isApiErrorMessage === true) return []
    if (this.emitted.has(id)) return []
    let turn = this.pending.get(id)
    if (turn === undefined) {
      turn = {
        id,
        model,
        firstParent: parent,
        requestRef: asString(entry.requestRef),
        blocks: [],
        stopReason: null,
        usage: undefined,
        endedAt: undefined,
        context: {
          sessionId: asString(entry.sessionId) ?? "",
          version: asString(entry.version) ?? null,
          cwd: asString(entry.cwd) ?? null,
          gitBranch: asString(entry.gitBranch) ?? null
        }
      }
      this.pending.set(id, turn)
    }
    turn.blocks.push(...contentBlocks(message.content))
    if (message.stop_reason != null) turn.stopReason = message.stop_reason
    if (message.usage !== undefined) turn.usage = message.usage
    turn.endedAt = timestamp ?? turn.endedAt
    // another message began, or this one has stopped: those before it (and it, if stopped) are over
    return this.complete(end, (other) => other.id !== id || turn.stopReason !== null)
  }

  idle(end: number): ReadonlyArray<CompletedTurn> {
    return this.complete(end, () => true)
  }

  private complete(end: number, isOver: (turn: Pending) => boolean): ReadonlyArray<CompletedTurn> {
    const done: Array<CompletedTurn> = []
    for (const turn of this.pending.values()) {
      if (!isOver(turn)) continue
      this.pending.delete(turn.id)
      this.emitted.add(turn.id)
      const read = this.turnOf(turn)
      if (read !== undefined) done.push({ turn: read, completedAt: end })
    }
    return done
  }

  /** The conversation above an answer, oldest first: its user and assistant messages, an answer's blocks joined. */
  private conversation(from: string | undefined): { messages: Array<{ role: string; content: unknown }>; sentAt: number | undefined } {
    const chain: Array<Entry> = []
    const seen = new Set<string>()
    let sentAt: number | undefined
    for (let at = from; at !== undefined && !seen.has(at);) {
      seen.add(at)
      const entry = this.entries.get(at)
      if (entry === undefined) break
      sentAt ??= entry.timestamp
      if (entry.message !== undefined) chain.push(entry)
      at = entry.parent
    }
    chain.reverse()
    const messages: Array<{ role: string; content: unknown; id?: string }> = []
    for (const { message } of chain) {
      const last = messages.at(-1)
      if (message!.role === "assistant" && last?.role === "assistant" && last.id === message!.id) {
        last.content = [...contentBlocks(last.content), ...contentBlocks(message!.content)]
      } else {
        messages.push({ ...message! })
      }
    }
    return { messages: messages.map(({ role, content }) => ({ role, content })), sentAt }
  }

  private turnOf(turn: Pending): ReadTurn | undefined {
    const { messages, sentAt } = this.conversation(turn.firstParent)
    const endedAt = turn.endedAt
    if (endedAt === undefined || turn.context.sessionId === "") return undefined
    const startedAt = (turn.requestRef === undefined ? undefined : this.requestTimes.get(turn.requestRef)) ?? sentAt ?? endedAt
    return {
      client: "claude-code",
      client_version: turn.context.version,
      session_id: turn.context.sessionId,
      turn_id: turn.id,
      api: "messages",
      provider: "anthropic",
      provider_type: "anthropic",
      model: turn.model,
      request: JSON.stringify({ model: turn.model, messages, stream: true }),
      response: JSON.stringify({
        id: turn.id,
        type: "message",
        role: "assistant",
        model: turn.model,
        content: turn.blocks,
        stop_reason: turn.stopReason,
        stop_sequence: null,
        usage: turn.usage ?? null
      }),
      started_at: Math.min(startedAt, endedAt),
      ended_at: endedAt,
      cwd: turn.context.cwd,
      git_branch: turn.context.gitBranch
    }
  }
}
