/**
 * A transcript turn (src/domain/transcript.ts) as the capture of the call it records: the same record a call
 * through the gateway makes, attributed to the Gateway Key that sent it, with the transcript named as its source.
 */
import { type Capture, CAPTURE_VERSION } from "../../domain/capture.ts"
import type { Principal } from "../../domain/principal.ts"
import type { TranscriptTurn } from "../../domain/transcript.ts"
import { answerWithin } from "../../domain/truncation.ts"
import { namedUuidv7 } from "../uuidv7.ts"

/**
 * The decision's id: one per turn of a workspace, whenever and however often it is sent. Time-ordered like the
 * gateway's ids, on the turn's end.
 */
export const turnLedgerId = (principal: Principal, turn: TranscriptTurn): string =>
  namedUuidv7(turn.ended_at, `${principal.tenant_id}/${principal.workspace_id}/${turn.client}/${turn.turn_id}`)

/** `maxAnswerBytes`: the most of the turn's answer the capture keeps, as for calls through the gateway. */
export const captureOfTurn = (principal: Principal, turn: TranscriptTurn, maxAnswerBytes: number): Capture => {
  const startedAt = Math.min(turn.started_at, turn.ended_at)
  return {
    v: CAPTURE_VERSION,
    api: turn.api,
    ledger_id: turnLedgerId(principal, turn),
    tenant_id: principal.tenant_id,
    workspace_id: principal.workspace_id,
    user_id: principal.user_id,
    key_id: principal.token_id,
    agent_id: turn.agent_id,
    agent_name: turn.agent_name,
    execution_id: turn.session_id,
    provider: turn.provider,
    provider_type: turn.provider_type,
    model: turn.model,
    // both clients stream their calls
    stream: true,
    request: turn.request,
    response: answerWithin(turn.response, maxAnswerBytes),
    error: null,
    status: 200,
    aborted: false,
    usage: null,
    started_at: startedAt,
    first_token_at: null,
    ended_at: turn.ended_at,
    upstream_ms: turn.ended_at - startedAt,
    source: { kind: "watcher", client: turn.client, client_version: turn.client_version, cwd: turn.cwd, git_branch: turn.git_branch }
  }
}
