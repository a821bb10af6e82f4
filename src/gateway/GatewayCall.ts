/**
 * One gateway call on any API surface: authenticate (cached), read what routing needs, forward, relay, capture.
 *
 * One `GatewayCall` object per request holds all of its state and is itself the undici dispatch handler, so the
 * happy path allocates little and runs no Effect: the Gateway Key is checked with the Authenticator's synchronous
 * cache probe (Effect only on a cache miss), the body is parsed once, pass-through adapters get the caller's body
 * text with only the model edited, and chunks are written to the caller as the provider sends them. After the answer
 * is on its way the capture (JSON text built once) is handed to the CapturePublisher.
 *
 * What is captured: every call that was sent to a provider — answers, provider errors (with the provider's status),
 * upstream failures (502/504), and calls the caller abandoned (`aborted`, with what had arrived). Requests refused
 * before that (401, 400, 413) are answered with an error and counted in the metrics, but not captured: no model was
 * called, so there is no decision to record. Surfaces without an API (count_tokens) are forwarded, not captured.
 */
import type * as Http from "node:http"
import type { Dispatcher } from "undici"
import type { CapturePublisher } from "../capture/CapturePublisher.ts"
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import { CAPTURE_VERSION, type Capture, type CaptureError } from "../domain/capture.ts"
import type { Principal } from "../domain/principal.ts"
import type { Usage } from "../domain/usage.ts"
import { type Attribution, attribution, isError } from "./attribution.ts"
import type { GatewayAuth } from "./GatewayAuth.ts"
import type { GatewayMetrics } from "./GatewayMetrics.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError, StreamTranslator, UpstreamHeaders } from "./providers/index.ts"
import { UnsupportedRequest } from "./providers/index.ts"
import type { ProviderRoutes } from "./routing.ts"
import type { CallPlan, Surface } from "./surfaces/surface.ts"
import { connectTimeoutMs, type Upstreams } from "./Upstreams.ts"
import { uuidv7 } from "./uuidv7.ts"

export interface CallDependencies {
  readonly settings: LedgerSettings
  readonly auth: GatewayAuth
  readonly publisher: CapturePublisher["Service"]
  readonly upstreams: Upstreams["Service"]
  readonly providers: ProviderRoutes
  readonly metrics: GatewayMetrics
}

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
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

/** Writes a JSON text with its length (no chunked encoding for small answers). */
const sendText = (res: Http.ServerResponse, status: number, text: string, headers: Http.OutgoingHttpHeaders) => {
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

class GatewayCall implements Dispatcher.DispatchHandler {
  private readonly deps: CallDependencies
  private readonly surface: Surface
  private readonly req: Http.IncomingMessage
  private readonly res: Http.ServerResponse
  private readonly ledgerId: string
  /** epoch ms at arrival, and the monotonic clock at the same moment (durations use the latter) */
  private readonly startedAt: number
  private readonly t0: number

  private principal: Principal | undefined
  private bodyChunks: Array<Buffer> = []
  private bodySize = 0
  private bodyText: string | undefined
  /** an answer (or error) has been sent, or the call is over: later events are ignored */
  private answered = false

  // set once the call is sent to the provider
  private who: Attribution | undefined
  private plan: CallPlan | undefined
  private controller: Dispatcher.DispatchController | undefined
  private upstreamStart = 0
  private upstreamEnd = 0
  private firstTokenAt: number | null = null
  private status = 0
  /** the upstream's response headers (some providers name an error there, or count tokens) */
  private upstreamHeaders: UpstreamHeaders = {}
  private translator: StreamTranslator | undefined
  private responseChunks: Array<Buffer> = []
  private aborted = false
  private captured = false

  constructor(deps: CallDependencies, surface: Surface, req: Http.IncomingMessage, res: Http.ServerResponse) {
    this.deps = deps
    this.surface = surface
    this.req = req
    this.res = res
    this.startedAt = Date.now()
    this.t0 = performance.now()
    this.ledgerId = uuidv7(this.startedAt)
  }

  start(): void {
    const { req, res } = this
    const limit = this.deps.settings.gatewayMaxBodyBytes
    const declared = req.headers["content-length"]
    if (declared !== undefined && Number(declared) > limit) return this.tooLarge()
    res.on("close", () => this.onClose())
    req.on("data", (chunk: Buffer) => {
      if (this.answered) return
      this.bodySize += chunk.length
      if (this.bodySize > limit) return this.tooLarge()
      this.bodyChunks.push(chunk)
    })
    req.on("end", () => {
      if (this.answered) return
      const chunks = this.bodyChunks
      this.bodyText = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks, this.bodySize).toString("utf8")
      this.bodyChunks = []
      this.proceed()
    })
    this.deps.auth(
      req,
      this.surface.apiKeyHeader,
      (principal) => {
        this.principal = principal
        this.proceed()
      },
      (error) => this.refuse(error)
    )
  }

  /** Both the credential and the body are in: validate, route, forward. */
  private proceed(): void {
    if (this.answered || this.principal === undefined || this.bodyText === undefined) return
    const url = this.req.url ?? ""
    const q = url.indexOf("?")
    const who = attribution(q === -1 ? undefined : new URLSearchParams(url.slice(q + 1)), this.req.headers)
    if (isError(who)) return this.refuse(who)

    let body: unknown
    try {
      body = JSON.parse(this.bodyText)
    } catch (cause) {
      return this.refuse(gatewayError(400, `the request body is not valid JSON: ${(cause as Error).message}`, "invalid_json"))
    }
    const apiKey = this.req.headers["x-service-provider-api-key"]
    const plan = this.surface.plan(body, {
      providers: this.deps.providers,
      req: this.req,
      bodyText: this.bodyText,
      apiKey: typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined,
      ledgerId: this.ledgerId
    })
    if (isError(plan)) return this.refuse(plan)
    let upstream
    try {
      upstream = plan.adapter.prepare(plan.request, plan.ctx)
    } catch (cause) {
      if (cause instanceof UnsupportedRequest) return this.refuse({ status: cause.status, body: cause.body })
      return this.refuse(gatewayError(
        400,
        `the request could not be translated for ${plan.route.name} (is it in ${this.surface.shape}?): ${(cause as Error).message}`,
        "invalid_request"
      ))
    }
    this.who = who
    this.plan = plan
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
      this.res.writeHead(200, { ...SSE_HEADERS, "x-ledger-id": this.ledgerId })
      this.res.flushHeaders()
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.firstTokenAt === null) this.firstTokenAt = performance.now()
    if (this.translator === undefined) {
      this.responseChunks.push(chunk)
      return
    }
    const out = this.translator.push(chunk)
    if (out.length === 0) return
    if (!this.res.write(out)) {
      // the caller reads slower than the provider writes: stop reading upstream until it catches up
      controller.pause()
      this.res.once("drain", () => controller.resume())
    }
  }

  onResponseEnd(): void {
    this.upstreamEnd = performance.now()
    const plan = this.plan!
    const { res } = this
    if (this.translator !== undefined) {
      this.answered = true
      res.end(this.translator.end())
      const answer = this.translator.assembled()
      if (answer.error === null && answer.text !== "") plan.answered?.(answer.text)
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
      sendText(res, 200, answer.text, { "x-ledger-id": this.ledgerId })
      plan.answered?.(answer.text)
      return this.capture(answer.captured ?? answer.text, answer.usage, null, 200)
    }
    const error = plan.adapter.error(this.status, text, this.upstreamHeaders)
    this.answered = true
    const headers: Http.OutgoingHttpHeaders = { "x-ledger-id": this.ledgerId }
    for (const name of RELAYED_ERROR_HEADERS) {
      const value = this.upstreamHeaders[name]
      if (typeof value === "string") headers[name] = value
    }
    sendText(res, error.status, this.surface.errorText(error), headers)
    this.capture(null, null, captureError(error), error.status)
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.upstreamEnd = performance.now()
    if (this.aborted || error instanceof CallerGone) return this.abandoned()
    const name = this.plan!.route.name
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
      this.res.end(this.translator.fail(error))
      const answer = this.translator.assembled()
      return this.capture(answer.text, answer.usage, captureError(error), 200)
    }
    sendText(this.res, error.status, this.surface.errorText(error), { "x-ledger-id": this.ledgerId })
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

  private onClose(): void {
    // a caller that leaves after the answer's terminal event has its whole answer
    if (this.res.writableFinished || this.translator?.complete === true) return
    this.answered = true
    this.aborted = true
    // before the call went out there is nothing to stop or record
    this.controller?.abort(new CallerGone())
  }

  private tooLarge(): void {
    const limit = this.deps.settings.gatewayMaxBodyBytes
    this.refuse(gatewayError(413, `the request body is larger than ${limit} bytes`, "request_too_large"), true)
  }

  /** Answers a request refused before it reached a provider (not captured). */
  private refuse(error: ProviderError, close = false): void {
    if (this.answered) return
    this.answered = true
    this.bodyChunks = []
    const headers: Http.OutgoingHttpHeaders = { "x-ledger-id": this.ledgerId }
    // an oversized body is not read to its end: close the connection rather than drain it
    if (close) headers.connection = "close"
    sendText(this.res, error.status, this.surface.errorText(error), headers)
  }

  private capture(response: string | null, usage: Usage | null, error: CaptureError | null, status: number): void {
    if (this.captured) return
    this.captured = true
    const now = performance.now()
    const upstreamMs = (this.upstreamEnd || now) - this.upstreamStart
    this.deps.metrics.overhead(now - this.t0 - upstreamMs)
    const api = this.surface.api
    if (api === null) return
    const principal = this.principal!
    const { route, ctx, context } = this.plan!
    const who = this.who!
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
      request: this.bodyText!,
      ...(context === undefined ? {} : { context }),
      // a stream cut before its first event assembled nothing
      response: response === "" ? null : response,
      error: error === null ? null : withoutKey(error, ctx.apiKey),
      status,
      aborted: this.aborted,
      usage,
      started_at: this.startedAt,
      first_token_at: this.firstTokenAt === null ? null : Math.round(this.startedAt + this.firstTokenAt - this.t0),
      ended_at: Math.round(this.startedAt + now - this.t0),
      upstream_ms: round(upstreamMs)
    }
    this.deps.publisher.offer(JSON.stringify(capture))
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

/** The route handler of a surface. */
export const gatewayCall = (deps: CallDependencies, surface: Surface) => (req: Http.IncomingMessage, res: Http.ServerResponse): void =>
  new GatewayCall(deps, surface, req, res).start()
