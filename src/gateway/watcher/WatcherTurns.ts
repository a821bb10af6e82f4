/**
 * `POST /v1/watcher/turns`: the model turns `ledger watch` read from coding assistants' transcripts, each made a
 * capture on the capture stream, the same record a call through the gateway makes (docs/ARCHITECTURE.md, "Surfaces").
 *
 * Authenticated by a Gateway Key like every gateway route (a PAT is refused). The body is `{"turns": [...]}`, at
 * most MAX_TURNS_PER_REQUEST turns within the gateway's body limit. Each turn is taken or refused on its own: the
 * answer lists, in order, `{"status":"accepted","ledger_id"}` or `{"status":"rejected","error"}`, so one turn a
 * newer client wrote differently does not hold back the others. A request that cannot be read at all gets a 400 in
 * the gateway's error shape. Nothing waits for the stream: captures go to the publisher like a call's.
 */
import { Cause, type Context, Exit, Metric, Schema } from "effect"
import type * as Http from "node:http"
import type { CapturePublisher } from "../../capture/CapturePublisher.ts"
import { MAX_TURNS_PER_REQUEST, TranscriptTurn, TranscriptTurns, type TurnOutcome } from "../../domain/transcript.ts"
import type { GatewayAuth } from "../GatewayAuth.ts"
import { gatewayError, type RouteHandler, sendJson } from "../GatewayServer.ts"
import { intake } from "../intake.ts"
import { uuidv7 } from "../uuidv7.ts"
import { captureOfTurn } from "./captureOfTurn.ts"

const decodeTurns = Schema.decodeUnknownExit(TranscriptTurns)
const decodeTurn = Schema.decodeUnknownExit(TranscriptTurn, { errors: "first" })

const turnsReceived = (outcome: TurnOutcome["status"]) =>
  Metric.counter("ledger_watcher_turns_total", {
    description: "transcript turns sent by `ledger watch`, by what became of them (accepted: captured; rejected: unreadable)",
    incremental: true,
    attributes: { outcome }
  })

const firstLine = (message: string) => message.split("\n", 1)[0]!

export interface WatcherTurnsDependencies {
  readonly auth: GatewayAuth
  readonly publisher: CapturePublisher["Service"]
  readonly maxBodyBytes: number
  readonly maxAnswerBytes: number
  readonly context: Context.Context<never>
}

export const watcherTurns = (deps: WatcherTurnsDependencies): RouteHandler => {
  const accepted = turnsReceived("accepted")
  const rejected = turnsReceived("rejected")
  const refuse = (res: Http.ServerResponse, status: number, message: string, code: string) => {
    const error = gatewayError(status, message, code)
    sendJson(res, error.status, error.body)
  }
  return (req, res) => {
    res.setHeader("x-ledger-id", uuidv7(Date.now()))
    intake(req, {
      auth: deps.auth,
      maxBodyBytes: deps.maxBodyBytes,
      apiKeyHeader: false,
      refused: (error) => sendJson(res, error.status, error.body),
      ready: (principal, text) => {
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch (cause) {
          return refuse(res, 400, `the request body is not valid JSON: ${(cause as Error).message}`, "invalid_json")
        }
        const body = decodeTurns(json)
        if (Exit.isFailure(body)) return refuse(res, 400, `the request body must be {"turns": [...]}`, "invalid_request")
        const { turns } = body.value
        if (turns.length > MAX_TURNS_PER_REQUEST) {
          return refuse(res, 400, `at most ${MAX_TURNS_PER_REQUEST} turns per request (${turns.length} sent)`, "too_many_turns")
        }
        const outcomes = turns.map((value): TurnOutcome => {
          const turn = decodeTurn(value)
          if (Exit.isFailure(turn)) {
            rejected.updateUnsafe(1, deps.context)
            const error = Cause.squash(turn.cause)
            return { status: "rejected", error: firstLine(error instanceof Error ? error.message : String(error)) }
          }
          const capture = captureOfTurn(principal, turn.value, deps.maxAnswerBytes)
          deps.publisher.offer(JSON.stringify(capture), capture)
          accepted.updateUnsafe(1, deps.context)
          return { status: "accepted", ledger_id: capture.ledger_id }
        })
        sendJson(res, 200, { turns: outcomes })
      }
    })
  }
}
