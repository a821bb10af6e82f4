/**
 * The provider side of one gateway call, whatever carried it in (an HTTP request, or a WebSocket turn): prepare the
 * provider request, dispatch it, relay the answer to the caller as it arrives, and capture the call.
 *
 * One `Exchange` object per call holds its state and is itself the undici dispatch handler, so the happy path
 * allocates little and runs no Effect: pass-through adapters get the caller's body text with only the model edited,
 * and chunks are written to the caller as the provider sends them. After the answer is on its way the capture (JSON
 * text built once) is handed to the CapturePublisher.
 *
 * What is captured: every call that was sent to a provider — answers, provider errors (with the provider's status),
 * upstream failures (502/504), and calls the caller abandoned (`aborted`, with what had arrived). Surfaces without an
 * API (count_tokens) are forwarded, not captured.
 *
 * An answer larger than `captureMaxAnswerBytes` is relayed whole, but its capture is cut to that size and marked with
 * the full size (domain/truncation.ts). A stream's translator stops assembling once the provider has sent a few times
 * the limit (its events repeat the text: Responses sends deltas, done events and the final response), so neither the
 * gateway's memory nor the capture grows with the answer.
 */
import type * as Http from "node:http"
import type { Dispatcher } from "undici"
import type { CapturePublisher } from "../capture/CapturePublisher.ts"
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import { CAPTURE_VERSION, type Capture, type CaptureError } from "../domain/capture.ts"
import type { Principal } from "../domain/principal.ts"
import { answerWithin } from "../domain/truncation.ts"
import type { Usage } from "../domain/usage.ts"
import type { Attribution } from "./attribution.ts"
import { capturePayload } from "./capturePayload.ts"
import type { GatewayAuth } from "./GatewayAuth.ts"
import type { GatewayMetrics } from "./GatewayMetrics.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError, StreamTranslator, UpstreamHeaders } from "../providers/index.ts"
import { UnsupportedRequest } from "../providers/index.ts"
import type { ProviderRoutes } from "../providers/routing.ts"
import { type CallPlan, type Surface, unreadable } from "./surfaces/surface.ts"
import { connectTimeoutMs, type Upstreams } from "../providers/Upstreams.ts"

export interface CallDependencies {
  readonly settings: LedgerSettings
  readonly auth: GatewayAuth
  readonly publisher: CapturePublisher["Service"]
  readonly upstreams: Upstreams["Service"]
  readonly providers: ProviderRoutes
  readonly metrics: GatewayMetrics
}

/** Where a call's answer goes: an HTTP response, or a WebSocket turn. */
export interface Caller {
  /** the answer streams: its start (status 200 and the stream's headers, with the decision's id) */
  openStream(ledgerId: string): void
  /** stream frames (server-sent events); false when the caller reads slower than the provider writes */
  write(frames: string): boolean
  /** calls `resume` once the caller has caught up */
  onceDrained(resume: () => void): void
  /** the last frames of the stream */
  endStream(frames: string): void
  /** a whole answer or an error (JSON text) with its status */
  send(status: number, text: string, headers: Http.OutgoingHttpHeaders): void
}

/** A call ready to go: who makes it, what they sent, and where it goes. */
export interface ExchangeInput {
  readonly principal: Principal
  readonly who: Attribution
  /** the request as the caller sent it (what the capture keeps) */
  readonly request: string
  /** the same request as the caller's bytes, when they are valid UTF-8 (the capture is then built as bytes) */
  readonly requestBytes: Buffer | undefined
  readonly plan: CallPlan
  readonly ledgerId: string
  /** epoch ms at arrival, and the monotonic clock at the same moment (durations use the latter) */
  readonly startedAt: number
  readonly t0: number
}

/** Provider answer headers a caller's client acts on (when and whether to retry), relayed with provider errors. */
const RELAYED_ERROR_HEADERS = ["retry-after", "retry-after-ms", "x-should-retry"] as const

/** The reason an upstream request is aborted when its caller goes away. */
class CallerGone extends Error {
  constructor() {
    super("the caller disconnected")
    this.name = "CallerGone"
  }
}

const errorCode = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === "string" ? code : undefined
}

const round = (ms: number) => Math.round(ms * 1000) / 1000

/** how many times the capture limit a stream may send before its translator stops assembling */
const WIRE_FACTOR = 4

export class Exchange implements Dispatcher.DispatchHandler {
  private readonly deps: CallDependencies
  private readonly surface: Surface
  private readonly caller: Caller
  private readonly principal: Principal
  private readonly who: Attribution
  private readonly request: string
  private readonly requestBytes: Buffer | undefined
  private readonly plan: CallPlan
  private readonly ledgerId: string
  private readonly startedAt: number
  private readonly t0: number

  /** an answer (or error) has been sent, or the call is over: later events are ignored */
  private answered = false
  private controller: Dispatcher.DispatchController | undefined
  private upstreamStart = 0
  private upstreamEnd = 0
  private firstTokenAt: number | null = null
  private status = 0
  /** the upstream's response headers (some providers name an error there, or count tokens) */
  private upstreamHeaders: UpstreamHeaders = {}
  private translator: StreamTranslator | undefined
  private responseChunks: Array<Buffer> = []
  /** the answer's bytes so far, as the provider sent them */
  private answerBytes = 0
  /** the answer passed the capture limit */
  private truncated = false
  private aborted = false
  private captured = false

  constructor(deps: CallDependencies, surface: Surface, caller: Caller, input: ExchangeInput) {
    this.deps = deps
    this.surface = surface
    this.caller = caller
    this.principal = input.principal
    this.who = input.who
    this.request = input.request
    this.requestBytes = input.requestBytes
    this.plan = input.plan
    this.ledgerId = input.ledgerId
    this.startedAt = input.startedAt
    this.t0 = input.t0
  }

  /** Builds the provider request and sends it; a request the provider cannot take is refused (not captured). */
  start(): void {
    const { plan } = this
    let upstream
    try {
      upstream = plan.adapter.prepare(plan.request, plan.ctx)
    } catch (cause) {
      this.answered = true
      const error = cause instanceof UnsupportedRequest
        ? { status: cause.status, body: cause.body }
        : unreadable(this.surface.shape, cause, plan.route.name)
      return this.caller.send(error.status, this.surface.errorText(error), { "x-ledger-id": this.ledgerId })
    }
    this.upstreamStart = performance.now()
    this.deps.upstreams.pool(plan.route.origin).dispatch(
      { path: upstream.url.slice(plan.route.origin.length), method: "POST", headers: upstream.headers, body: upstream.body },
      this
    )
  }

  // --- undici dispatch handler -----------------------------------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.aborted) controller.abort(new CallerGone())
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: UpstreamHeaders): void {
    this.status = statusCode
    this.upstreamHeaders = headers
    const plan = this.plan!
    if (statusCode >= 200 && statusCode < 300 && plan.ctx.stream) {
      this.translator = plan.adapter.stream(plan.ctx)
      this.caller.openStream(this.ledgerId)
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.firstTokenAt === null) this.firstTokenAt = performance.now()
    this.answerBytes += chunk.length
    if (!this.truncated && this.answerBytes > WIRE_FACTOR * this.deps.settings.captureMaxAnswerBytes) {
      this.truncated = true
      this.translator?.truncate()
    }
    if (this.translator === undefined) {
      this.responseChunks.push(chunk)
      return
    }
    const out = this.translator.push(chunk)
    if (out.length === 0) return
    if (!this.caller.write(out)) {
      // the caller reads slower than the provider writes: stop reading upstream until it catches up
      controller.pause()
      this.caller.onceDrained(() => controller.resume())
    }
  }

  onResponseEnd(): void {
    this.upstreamEnd = performance.now()
    const { plan, caller } = this
    if (this.translator !== undefined) {
      this.answered = true
      const last = this.translator.end()
      const answer = this.translator.assembled()
      // kept before the caller has the answer's last event, so its very next turn finds it (not when cut: a
      // continuation would build on part of it)
      if (answer.error === null && answer.text !== "" && !this.truncated) plan.answered?.(answer.text)
      caller.endStream(last)
      return this.capture(answer.text, answer.usage, answer.error === null ? null : captureError(answer.error), 200)
    }
    const text = this.responseChunks.length === 1
      ? this.responseChunks[0]!.toString("utf8")
      : Buffer.concat(this.responseChunks).toString("utf8")
    this.responseChunks = []
    if (this.status >= 200 && this.status < 300) {
      let answer
      try {
        answer = plan.adapter.response(text, plan.ctx, this.upstreamHeaders)
      } catch {
        return this.upstreamFailed(gatewayError(502, `provider ${plan.route.name} returned an answer that could not be read`, "bad_upstream_response", null, "api_error"))
      }
      this.answered = true
      if (!this.truncated) plan.answered?.(answer.text)
      caller.send(200, answer.text, { "x-ledger-id": this.ledgerId })
      return this.capture(answer.captured ?? answer.text, answer.usage, null, 200)
    }
    const error = plan.adapter.error(this.status, text, this.upstreamHeaders)
    this.answered = true
    const headers: Http.OutgoingHttpHeaders = { "x-ledger-id": this.ledgerId }
    for (const name of RELAYED_ERROR_HEADERS) {
      const value = this.upstreamHeaders[name]
      if (typeof value === "string") headers[name] = value
    }
    caller.send(error.status, this.surface.errorText(error), headers)
    this.capture(null, null, captureError(error), error.status)
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.upstreamEnd = performance.now()
    if (this.aborted || error instanceof CallerGone) return this.abandoned()
    const name = this.plan.route.name
    const code = errorCode(error)
    const timeout = this.deps.settings.upstreamTimeoutMs
    // undici's timeouts mean the provider took too long (504) rather than failed (502)
    this.upstreamFailed(
      code === "UND_ERR_CONNECT_TIMEOUT"
        ? gatewayError(504, `provider ${name} could not be connected to within ${connectTimeoutMs(timeout)} ms`, "upstream_timeout", null, "timeout_error")
        : code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT"
        ? gatewayError(504, `provider ${name} did not answer within ${timeout} ms`, "upstream_timeout", null, "timeout_error")
        : gatewayError(502, `provider ${name} could not be reached: ${code ?? error.message}`, "upstream_unavailable", null, "api_error")
    )
  }

  // --- endings ---------------------------------------------------------------------------------------------

  /** The provider failed without an answer: a 502/504 for the caller, or an error event mid-stream. */
  private upstreamFailed(error: ProviderError): void {
    if (this.answered) return
    this.answered = true
    if (this.translator !== undefined) {
      // the stream is under way (status 200 sent): end it with an error event, as providers do
      this.caller.endStream(this.translator.fail(error))
      const answer = this.translator.assembled()
      return this.capture(answer.text, answer.usage, captureError(error), 200)
    }
    this.caller.send(error.status, this.surface.errorText(error), { "x-ledger-id": this.ledgerId })
    this.capture(null, null, captureError(error), error.status)
  }

  /** The caller went away mid-call: the partial answer is captured (`aborted`). */
  private abandoned(): void {
    this.answered = true
    if (this.translator !== undefined) {
      const answer = this.translator.assembled()
      return this.capture(answer.text, answer.usage, answer.error === null ? null : captureError(answer.error), 200)
    }
    // nothing was sent: 499, the status proxies log for a client that closed the request
    this.capture(null, null, null, 499)
  }

  /** The caller went away: the provider call is stopped, and captured with what had arrived. */
  callerGone(): void {
    // a caller that leaves after the answer's terminal event has its whole answer
    if (this.answered || this.translator?.complete === true) return
    this.answered = true
    this.aborted = true
    this.controller?.abort(new CallerGone())
  }

  private capture(response: string | null, usage: Usage | null, error: CaptureError | null, status: number): void {
    if (this.captured) return
    this.captured = true
    const now = performance.now()
    const upstreamMs = (this.upstreamEnd || now) - this.upstreamStart
    this.deps.metrics.overhead(now - this.t0 - upstreamMs)
    const api = this.surface.api
    if (api === null) return
    const { principal, who } = this
    const { route, ctx, context } = this.plan
    const capture: Capture = {
      v: CAPTURE_VERSION,
      api,
      ledger_id: this.ledgerId,
      tenant_id: principal.tenant_id,
      workspace_id: principal.workspace_id,
      user_id: principal.user_id,
      key_id: principal.token_id,
      agent_id: who.agentId,
      agent_name: who.agentName,
      execution_id: who.executionId,
      provider: route.name,
      provider_type: route.type,
      model: ctx.model,
      stream: ctx.stream,
      request: this.request,
      ...(context === undefined ? {} : { context }),
      // a stream cut before its first event assembled nothing
      response: response === "" || response === null
        ? null
        : answerWithin(response, this.deps.settings.captureMaxAnswerBytes, this.truncated ? this.answerBytes : undefined),
      error: error === null ? null : withoutKey(error, ctx.apiKey),
      status,
      aborted: this.aborted,
      usage,
      started_at: this.startedAt,
      first_token_at: this.firstTokenAt === null ? null : Math.round(this.startedAt + this.firstTokenAt - this.t0),
      ended_at: Math.round(this.startedAt + now - this.t0),
      upstream_ms: round(upstreamMs)
    }
    this.deps.publisher.offer(capturePayload(capture, this.requestBytes), capture)
  }
}

export const captureError = (error: ProviderError): CaptureError => ({
  status: error.status,
  type: error.body.error.type,
  code: error.body.error.code,
  message: error.body.error.message
})

/** Shorter "keys" (`sk`, `x`: placeholders for local servers) are not secrets, and replacing them would garble messages. */
const MIN_REDACTED_KEY_LENGTH = 8

/** A provider may quote the key it was sent in an error message (never stored or logged): the ledger keeps the message without it. */
export const withoutKey = (error: CaptureError, apiKey: string | undefined): CaptureError =>
  apiKey === undefined || apiKey.length < MIN_REDACTED_KEY_LENGTH || !error.message.includes(apiKey)
    ? error
    : { ...error, message: error.message.replaceAll(apiKey, "[provider key]") }

