/**
 * `POST /v1/chat/completions`: authenticate (cached), read the fields routing needs, forward, relay, capture.
 *
 * One `ChatCall` object per request holds all of its state and is itself the undici dispatch handler, so the
 * happy path allocates little and runs no Effect: the Gateway Key is checked with the Authenticator's
 * synchronous cache probe (Effect only on a cache miss), the body is parsed once, OpenAI-wire providers get the
 * caller's body text with only the model edited, and chunks are written to the caller as the provider sends
 * them. After the answer is on its way the capture (JSON text built once) is handed to the CapturePublisher.
 *
 * What is captured: every call that was sent to a provider — answers, provider errors (with the provider's
 * status), upstream failures (502/504), and calls the caller abandoned (`aborted`, with what had arrived).
 * Requests refused before that (401, 400, 413) are answered with an error and counted in the metrics, but not
 * captured: no model was called, so there is no decision to record.
 */
import type * as Http from "node:http"
import type { Dispatcher } from "undici"
import type { CapturePublisher } from "../capture/CapturePublisher.ts"
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import { CAPTURE_VERSION, type Capture, type CaptureError, type Usage } from "../domain/capture.ts"
import type { Principal } from "../domain/principal.ts"
import type { GatewayAuth } from "./GatewayAuth.ts"
import type { GatewayMetrics } from "./GatewayMetrics.ts"
import { gatewayError, sendJson } from "./GatewayServer.ts"
import { DONE_FRAME } from "./providers/stream.ts"
import type { CallContext, ChatRequest, ProviderError, StreamTranslator, UpstreamHeaders } from "./providers/index.ts"
import { UnsupportedRequest } from "./providers/index.ts"
import type { ProviderRoute, ProviderRoutes } from "./routing.ts"
import { connectTimeoutMs, type Upstreams } from "./Upstreams.ts"
import { uuidv7 } from "./uuidv7.ts"

/** Longest `agent_id`, `agent_name` or `execution_id` accepted. */
export const MAX_ID_LENGTH = 256
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

export interface ChatDependencies {
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

/** An identity query parameter: absent (null), valid, or the error to answer. */
const identity = (params: URLSearchParams, name: string, required: boolean): string | null | ProviderError => {
  const value = params.get(name)
  if (value === null || value === "") {
    return required
      ? gatewayError(400, `query parameter ${name} is required (the agent making the call)`, "missing_parameter", name)
      : null
  }
  if (value.length > MAX_ID_LENGTH) {
    return gatewayError(400, `query parameter ${name} is longer than ${MAX_ID_LENGTH} characters`, "invalid_parameter", name)
  }
  if (CONTROL_CHARACTERS.test(value)) {
    return gatewayError(400, `query parameter ${name} contains control characters`, "invalid_parameter", name)
  }
  return value
}

const isError = (value: unknown): value is ProviderError =>
  typeof value === "object" && value !== null && "body" in value && "status" in value

interface Validated {
  readonly request: ChatRequest
  readonly route: ProviderRoute
  readonly model: string
  readonly stream: boolean
}

/** The checks the gateway makes itself; everything else is the provider's to judge. */
const validate = (body: unknown, providers: ProviderRoutes): Validated | ProviderError => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return gatewayError(400, "the request body must be a JSON object", "invalid_body")
  }
  const request = body as Record<string, unknown>
  const model = request.model
  if (typeof model !== "string" || model === "") {
    return gatewayError(400, "model is required: provider/model-name, e.g. openai/gpt-4o", "missing_parameter", "model")
  }
  const slash = model.indexOf("/")
  if (slash <= 0 || slash === model.length - 1) {
    return gatewayError(400, `model must be provider/model-name (e.g. openai/gpt-4o), got "${model.slice(0, 100)}"`, "invalid_model", "model")
  }
  const prefix = model.slice(0, slash)
  const route = providers.routes.get(prefix)
  if (route === undefined) {
    const hint = providers.unconfigured.get(prefix)
    return gatewayError(
      400,
      hint !== undefined
        ? `provider ${prefix} is not configured on this gateway: ${hint}`
        : `unknown provider "${prefix.slice(0, 100)}"; known: ${[...providers.routes.keys()].join(", ")}`,
      "unknown_provider",
      "model"
    )
  }
  const messages = request.messages
  if (!Array.isArray(messages) || messages.length === 0) {
    return gatewayError(400, "messages must be a non-empty array", messages === undefined ? "missing_parameter" : "invalid_parameter", "messages")
  }
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as { role?: unknown } | null
    if (typeof message !== "object" || message === null || typeof message.role !== "string") {
      return gatewayError(400, `messages[${i}] must be an object with a string role`, "invalid_parameter", `messages[${i}]`)
    }
  }
  const stream = request.stream
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") {
    return gatewayError(400, "stream must be a boolean", "invalid_parameter", "stream")
  }
  const options = request.stream_options
  if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options))) {
    return gatewayError(400, "stream_options must be an object", "invalid_parameter", "stream_options")
  }
  return { request: body as ChatRequest, route, model: model.slice(slash + 1), stream: stream === true }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000

class ChatCall implements Dispatcher.DispatchHandler {
  private readonly deps: ChatDependencies
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
  private agentId = ""
  private agentName: string | null = null
  private executionId: string | null = null
  private route: ProviderRoute | undefined
  private ctx: CallContext | undefined
  private controller: Dispatcher.DispatchController | undefined
  private upstreamStart = 0
  private upstreamEnd = 0
  private firstTokenAt: number | null = null
  private status = 0
  /** the upstream's response headers, kept only for an error answer (some providers name the error there) */
  private errorHeaders: UpstreamHeaders = {}
  private translator: StreamTranslator | undefined
  private responseChunks: Array<Buffer> = []
  private aborted = false
  /** the caller has the whole streamed answer (its [DONE]) even if the upstream has not ended yet */
  private delivered = false
  private captured = false

  constructor(deps: ChatDependencies, req: Http.IncomingMessage, res: Http.ServerResponse) {
    this.deps = deps
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
    const params = new URLSearchParams(q === -1 ? "" : url.slice(q + 1))
    const agentId = identity(params, "agent_id", true)
    if (isError(agentId)) return this.refuse(agentId)
    const agentName = identity(params, "agent_name", false)
    if (isError(agentName)) return this.refuse(agentName)
    const executionId = identity(params, "execution_id", false)
    if (isError(executionId)) return this.refuse(executionId)

    let body: unknown
    try {
      body = JSON.parse(this.bodyText)
    } catch (cause) {
      return this.refuse(gatewayError(400, `the request body is not valid JSON: ${(cause as Error).message}`, "invalid_json"))
    }
    const call = validate(body, this.deps.providers)
    if (isError(call)) return this.refuse(call)

    const apiKey = this.req.headers["x-service-provider-api-key"]
    const ctx: CallContext = {
      model: call.model,
      apiKey: typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined,
      baseUrl: call.route.baseUrl,
      stream: call.stream,
      includeUsage: call.request.stream_options?.include_usage === true,
      apiVersion: call.route.apiVersion,
      requestText: this.bodyText
    }
    let upstream
    try {
      upstream = call.route.adapter.prepare(call.request, ctx)
    } catch (cause) {
      if (cause instanceof UnsupportedRequest) return this.refuse({ status: cause.status, body: cause.body })
      return this.refuse(gatewayError(
        400,
        `the request could not be translated for ${call.route.name} (are the messages and tools in the chat-completions shape?): ${(cause as Error).message}`,
        "invalid_request"
      ))
    }
    this.agentId = agentId as string
    this.agentName = agentName
    this.executionId = executionId
    this.route = call.route
    this.ctx = ctx
    this.upstreamStart = performance.now()
    this.deps.upstreams.pool(call.route.origin).dispatch(
      { path: upstream.url.slice(call.route.origin.length), method: "POST", headers: upstream.headers, body: upstream.body },
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
    if (statusCode >= 300) this.errorHeaders = headers
    if (statusCode >= 200 && statusCode < 300 && this.ctx!.stream) {
      this.translator = this.route!.adapter.stream(this.ctx!)
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
    // OpenAI-wire relays pass [DONE] on before the upstream ends; a caller that leaves then has its answer
    if (out.endsWith(DONE_FRAME)) this.delivered = true
    if (!this.res.write(out)) {
      // the caller reads slower than the provider writes: stop reading upstream until it catches up
      controller.pause()
      this.res.once("drain", () => controller.resume())
    }
  }

  onResponseEnd(): void {
    this.upstreamEnd = performance.now()
    const { route, ctx, res } = this
    if (this.translator !== undefined) {
      this.answered = true
      res.end(this.translator.end())
      const answer = this.translator.assembled()
      return this.capture(answer.text, answer.usage, answer.error === null ? null : captureError(answer.error), 200)
    }
    const text = this.responseChunks.length === 1
      ? this.responseChunks[0]!.toString("utf8")
      : Buffer.concat(this.responseChunks).toString("utf8")
    this.responseChunks = []
    if (this.status >= 200 && this.status < 300) {
      let answer
      try {
        answer = route!.adapter.response(text, ctx!)
      } catch {
        return this.upstreamFailed(gatewayError(502, `provider ${route!.name} returned an answer that could not be read`, "bad_upstream_response", null, "api_error"))
      }
      this.answered = true
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer.text), "x-ledger-id": this.ledgerId })
      res.end(answer.text)
      return this.capture(answer.text, answer.usage, null, 200)
    }
    const error = route!.adapter.error(this.status, text, this.errorHeaders)
    this.answered = true
    sendJson(res, error.status, error.body, { "x-ledger-id": this.ledgerId })
    this.capture(null, null, captureError(error), error.status)
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.upstreamEnd = performance.now()
    if (this.aborted || error instanceof CallerGone) return this.abandoned()
    const name = this.route!.name
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
      this.res.end(`data: ${JSON.stringify(error.body)}\n\n`)
      const answer = this.translator.assembled()
      return this.capture(answer.text, answer.usage, captureError(error), 200)
    }
    sendJson(this.res, error.status, error.body, { "x-ledger-id": this.ledgerId })
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
    if (this.res.writableFinished || this.delivered) return
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
    sendJson(this.res, error.status, error.body, headers)
  }

  private capture(response: string | null, usage: Usage | null, error: CaptureError | null, status: number): void {
    if (this.captured) return
    this.captured = true
    const now = performance.now()
    const principal = this.principal!
    const upstreamMs = (this.upstreamEnd || now) - this.upstreamStart
    const capture: Capture = {
      v: CAPTURE_VERSION,
      ledger_id: this.ledgerId,
      tenant_id: principal.tenant_id,
      workspace_id: principal.workspace_id,
      user_id: principal.user_id,
      key_id: principal.token_id,
      agent_id: this.agentId,
      agent_name: this.agentName,
      execution_id: this.executionId,
      provider: this.route!.name,
      provider_type: this.route!.type,
      model: this.ctx!.model,
      stream: this.ctx!.stream,
      request: this.bodyText!,
      response,
      error: error === null ? null : withoutKey(error, this.ctx!.apiKey),
      status,
      aborted: this.aborted,
      usage,
      started_at: this.startedAt,
      first_token_at: this.firstTokenAt === null ? null : Math.round(this.startedAt + this.firstTokenAt - this.t0),
      ended_at: Math.round(this.startedAt + now - this.t0),
      upstream_ms: round(upstreamMs)
    }
    this.deps.publisher.offer(JSON.stringify(capture))
    this.deps.metrics.overhead(now - this.t0 - upstreamMs)
  }
}

const captureError = (error: ProviderError): CaptureError => ({
  status: error.status,
  type: error.body.error.type,
  code: error.body.error.code,
  message: error.body.error.message
})

/** Shorter "keys" (`sk`, `x`: placeholders for local servers) are not secrets, and replacing them would garble messages. */
const MIN_REDACTED_KEY_LENGTH = 8

/** A provider may quote the key it was sent in an error message (never stored or logged): the ledger keeps the message without it. */
const withoutKey = (error: CaptureError, apiKey: string | undefined): CaptureError =>
  apiKey === undefined || apiKey.length < MIN_REDACTED_KEY_LENGTH || !error.message.includes(apiKey)
    ? error
    : { ...error, message: error.message.replaceAll(apiKey, "[provider key]") }

/** The route handler. */
export const chatCompletions = (deps: ChatDependencies) => (req: Http.IncomingMessage, res: Http.ServerResponse): void =>
  new ChatCall(deps, req, res).start()
