/**
 * A model turn read from a coding assistant's transcript: what `ledger watch` sends to the gateway's
 * `POST /v1/watcher/turns`, which makes it a capture on the capture stream like any call through the gateway.
 *
 * The turn carries the call in the format of the API the client speaks — Claude Code's turns as Anthropic Messages,
 * Codex's as the Responses API — rebuilt from the transcript: the request with the conversation up to the call, and
 * the answer the provider gave, with its own id (`turn_id`: `msg_…`, `resp_…`). That id is the turn's identity: the
 * same turn sent twice, or a call also recorded through the gateway, is one decision.
 */
import { Schema } from "effect"
import { CallerIdentifier, MAX_ID_LENGTH } from "./identifiers.ts"
import { ProviderType, WatchedClient } from "./capture.ts"


/** epoch ms between 1970 and 2100 */
const EpochMs = Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: Date.UTC(2100, 0, 1) }))

const JsonText = Schema.String.check(Schema.makeFilter((text: string) => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return "must be JSON text"
  }
}))

/** A turn as read from a transcript, before the watcher names the agent it is for. */
export const ReadTurn = Schema.Struct({
  client: WatchedClient,
  client_version: Schema.NullOr(Schema.String.check(Schema.isMaxLength(64))),
  /** the client's own session id: the decisions' execution id, so a session of the client is a session here */
  session_id: CallerIdentifier,
  /** the provider's id of the answer */
  turn_id: CallerIdentifier,
  api: Schema.Literals(["messages", "responses"]),
  /** `anthropic`, `openai`, or the name the client gives its provider */
  provider: CallerIdentifier,
  provider_type: ProviderType,
  model: CallerIdentifier,
  /** the request, in the format of `api` (JSON text) */
  request: JsonText,
  /** the provider's answer, in the format of `api` (JSON text), usage included */
  response: JsonText,
  started_at: EpochMs,
  ended_at: EpochMs,
  cwd: Schema.NullOr(Schema.String.check(Schema.isMaxLength(4096))),
  git_branch: Schema.NullOr(Schema.String.check(Schema.isMaxLength(MAX_ID_LENGTH)))
})
export type ReadTurn = typeof ReadTurn.Type

export const TranscriptTurn = Schema.Struct({
  ...ReadTurn.fields,
  /** who the decisions are for: by default the client (`claude-code`, `codex`) */
  agent_id: CallerIdentifier,
  agent_name: Schema.NullOr(CallerIdentifier)
})
export type TranscriptTurn = typeof TranscriptTurn.Type

/** The body of `POST /v1/watcher/turns`. */
export const TranscriptTurns = Schema.Struct({ turns: Schema.Array(Schema.Unknown) })

/** What became of each turn sent, in order: taken (with its decision's id), or refused and why. */
export const TurnOutcome = Schema.Union([
  Schema.Struct({ status: Schema.Literal("accepted"), ledger_id: Schema.String }),
  Schema.Struct({ status: Schema.Literal("rejected"), error: Schema.String })
])
export type TurnOutcome = typeof TurnOutcome.Type

/** The most turns one request may carry. */
export const MAX_TURNS_PER_REQUEST = 500
