/**
 * Codex's rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`) as model turns in the format of the
 * Responses API.
 *
 * The file holds one entry a line: `session_meta` (the session's id, working directory, client version, provider
 * and base instructions), `turn_context` (the model), `response_item` (the conversation's items in order: messages,
 * function calls and their outputs, reasoning) and, after each model call, a `token_usage_record` with the
 * provider's response id and the call's usage. A call's answer is the items the model produced since the call
 * before it; its request is every item before those. Older versions write no `token_usage_record`: there a
 * `token_count` event closes the call, and the turn's id is made of the session's id and the call's number.
 * Other entries (`event_msg`, `world_state`, …) are no model turn.
 */
import { asRecord, asString, type CompletedTurn, parseLine, type ReadTurn, type SkippedLines, timeOf, type TranscriptReader } from "./transcript.ts"

const OTHER_ENTRIES = new Set(["event_msg", "world_state", "compacted"])

/** Items the model produces (the rest — user and developer messages, tool outputs — are what it is sent). */
const isOutput = (item: Record<string, unknown>): boolean => {
  const type = asString(item.type)
  return type === "message" ? item.role === "assistant" : type !== undefined && !type.endsWith("_output")
}

/** Codex's own bookkeeping on an item, which no provider sent or receives. */
const asSent = (item: Record<string, unknown>): Record<string, unknown> => {
  const { internal_chat_message_metadata_passthrough: _internal, metadata: _metadata, ...sent } = item
  return sent
}

/** Codex's token counts as the Responses API's usage. */
const responsesUsage = (usage: Record<string, unknown> | undefined) =>
  usage === undefined
    ? null
    : {
      input_tokens: usage.input_tokens ?? 0,
      input_tokens_details: { cached_tokens: usage.cached_input_tokens ?? 0 },
      output_tokens: usage.output_tokens ?? 0,
      output_tokens_details: { reasoning_tokens: usage.reasoning_output_tokens ?? 0 },
      total_tokens: usage.total_tokens ?? 0
    }

const PROVIDER_TYPES: Record<string, ReadTurn["provider_type"]> = { openai: "openai", azure: "azure" }

export class CodexRollout implements TranscriptReader {
  readonly skipped: SkippedLines = { corrupt: 0, unknown: 0 }
  private session:
    | { id: string; version: string | null; cwd: string | null; branch: string | null; provider: string; instructions: string | null }
    | undefined
  private model: string | undefined
  private readonly items: Array<Record<string, unknown>> = []
  /** index in `items` where the open call's output begins, and when its input was last added to */
  private outputFrom: number | undefined
  private inputAt: number | undefined
  private calls = 0

  line(text: string, end: number): ReadonlyArray<CompletedTurn> {
    const entry = parseLine(text, this.skipped)
    if (entry === undefined) return []
    const payload = asRecord(entry.payload)
    const timestamp = timeOf(entry.timestamp)
    switch (entry.type) {
      case "session_meta": {
        const id = asString(payload?.id) ?? asString(payload?.session_id)
        if (id !== undefined && this.session === undefined) {
          this.session = {
            id,
            version: asString(payload?.cli_version) ?? null,
            cwd: asString(payload?.cwd) ?? null,
            branch: asString(asRecord(payload?.git)?.branch) ?? null,
            provider: asString(payload?.model_provider) ?? "openai",
            instructions: asString(asRecord(payload?.base_instructions)?.text) ?? null
          }
        }
        return []
      }
      case "turn_context":
        this.model = asString(payload?.model) ?? this.model
        return []
      case "response_item": {
        if (payload === undefined) return []
        if (isOutput(payload)) this.outputFrom ??= this.items.length
        else if (this.outputFrom === undefined) this.inputAt = timestamp ?? this.inputAt
        this.items.push(asSent(payload))
        return []
      }
      case "token_usage_record":
        return this.close(asString(payload?.response_id), asRecord(payload?.usage), timestamp, end)
      case "event_msg": {
        // older versions: the token count after a call is what closes it
        const info = asRecord(payload?.info)
        if (payload?.type !== "token_count" || info === undefined) return []
        return this.close(undefined, asRecord(info.last_token_usage), timestamp, end)
      }
      default:
        if (typeof entry.type !== "string" || !OTHER_ENTRIES.has(entry.type)) this.skipped.unknown++
        return []
    }
  }

  idle(): ReadonlyArray<CompletedTurn> {
    return []
  }

  /** The open call's answer is complete: the turn, if there is one. */
  private close(responseId: string | undefined, usage: Record<string, unknown> | undefined, endedAt: number | undefined, end: number): ReadonlyArray<CompletedTurn> {
    const from = this.outputFrom
    const session = this.session
    if (from === undefined || session === undefined || this.model === undefined || endedAt === undefined) return []
    this.outputFrom = undefined
    const number = ++this.calls
    const id = responseId ?? `${session.id}:${number}`
    const output = this.items.slice(from)
    const model = this.model
    const provider = session.provider
    const turn: ReadTurn = {
      client: "codex",
      client_version: session.version,
      session_id: session.id,
      turn_id: id,
      api: "responses",
      provider,
      provider_type: PROVIDER_TYPES[provider] ?? "openai_compatible",
      model,
      request: JSON.stringify({
        model,
        ...(session.instructions === null ? {} : { instructions: session.instructions }),
        input: this.items.slice(0, from),
        stream: true
      }),
      response: JSON.stringify({ id, object: "response", status: "completed", model, output, usage: responsesUsage(usage) }),
      started_at: Math.min(this.inputAt ?? endedAt, endedAt),
      ended_at: endedAt,
      cwd: session.cwd,
      git_branch: session.branch
    }
    this.inputAt = endedAt
    return [{ turn, completedAt: end }]
  }
}
