/**
 * One gateway call over HTTP on any API surface: read the body (bounded), authenticate the Gateway Key (cached),
 * read the attribution, validate and route — then the provider exchange (Exchange.ts) answers on this response.
 * Requests refused before a provider is called (401, 400, 413) are answered with an error and counted in the
 * metrics, but not captured: no model was called, so there is no decision to record.
 */
import type * as Http from "node:http"
import type { Principal } from "../domain/principal.ts"
import { attribution, isError } from "./attribution.ts"
import { type CallDependencies, type Caller, Exchange } from "./Exchange.ts"
import { gatewayError } from "./GatewayServer.ts"
import { forwardableBytes } from "../providers/body.ts"
import type { ProviderError } from "../providers/index.ts"
import { type Surface, unreadable } from "./surfaces/surface.ts"
import { intake } from "./intake.ts"
import { uuidv7 } from "./uuidv7.ts"

export type { CallDependencies } from "./Exchange.ts"

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
}

/** Writes a JSON text with its length (no chunked encoding for small answers). */
const sendText = (res: Http.ServerResponse, status: number, text: string, headers: Http.OutgoingHttpHeaders) => {
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** The answer of an exchange on an HTTP response: server-sent events, or one JSON body. */
const httpCaller = (res: Http.ServerResponse): Caller => ({
  openStream(ledgerId) {
    res.writeHead(200, { ...SSE_HEADERS, "x-ledger-id": ledgerId })
    res.flushHeaders()
  },
  write: (frames) => res.write(frames),
  onceDrained: (resume) => void res.once("drain", resume),
  endStream: (frames) => void res.end(frames),
  send: (status, text, headers) => sendText(res, status, text, headers)
})

class GatewayCall {
  private readonly deps: CallDependencies
  private readonly surface: Surface
  private readonly req: Http.IncomingMessage
  private readonly res: Http.ServerResponse
  private readonly ledgerId: string
  private readonly startedAt: number
  private readonly t0: number
  private exchange: Exchange | undefined

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
    const { res } = this
    // before the call went out there is nothing to stop or record
    res.on("close", () => {
      if (!res.writableFinished) this.exchange?.callerGone()
    })
    intake(this.req, {
      auth: this.deps.auth,
      maxBodyBytes: this.deps.settings.gatewayMaxBodyBytes,
      apiKeyHeader: this.surface.apiKeyHeader,
      ready: (principal, body, bytes) => this.proceed(principal, body, bytes),
      refused: (error) => this.refuse(error)
    })
  }

  /** Both the credential and the body are in: validate, route, and hand over to the exchange. */
  private proceed(principal: Principal, bodyText: string, bodyBytes: Buffer): void {
    const url = this.req.url ?? ""
    const q = url.indexOf("?")
    const who = attribution(q === -1 ? undefined : new URLSearchParams(url.slice(q + 1)), this.req.headers)
    if (isError(who)) return this.refuse(who)

    let body: unknown
    try {
      body = JSON.parse(bodyText)
    } catch (cause) {
      return this.refuse(gatewayError(400, `the request body is not valid JSON: ${(cause as Error).message}`, "invalid_json"))
    }
    const apiKey = this.req.headers["x-service-provider-api-key"]
    // the bytes stand for the text (forwarded, and escaped into the capture) only when they are valid UTF-8
    const bytes = forwardableBytes(bodyBytes)
    let plan
    try {
      plan = this.surface.plan(body, {
        providers: this.deps.providers,
        req: this.req,
        bodyText,
        bodyBytes: bytes,
        apiKey: typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined,
        ledgerId: this.ledgerId
      })
    } catch (cause) {
      return this.refuse(unreadable(this.surface.shape, cause))
    }
    if (isError(plan)) return this.refuse(plan)
    this.exchange = new Exchange(this.deps, this.surface, httpCaller(this.res), {
      principal,
      who,
      request: bodyText,
      requestBytes: bytes,
      plan,
      ledgerId: this.ledgerId,
      startedAt: this.startedAt,
      t0: this.t0
    })
    this.exchange.start()
  }

  /** Answers a request refused before it reached a provider (not captured). */
  private refuse(error: ProviderError): void {
    sendText(this.res, error.status, this.surface.errorText(error), { "x-ledger-id": this.ledgerId })
  }
}

/** The route handler of a surface. */
export const gatewayCall = (deps: CallDependencies, surface: Surface) => (req: Http.IncomingMessage, res: Http.ServerResponse): void =>
  new GatewayCall(deps, surface, req, res).start()
