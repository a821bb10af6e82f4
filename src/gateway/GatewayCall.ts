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
import type { ProviderError } from "./providers/index.ts"
import { type Surface, unreadable } from "./surfaces/surface.ts"
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

/** How long the rest of an over-limit body is read (and dropped) after the 413 before the connection is cut. */
const DISCARD_MS = 30_000

class GatewayCall {
  private readonly deps: CallDependencies
  private readonly surface: Surface
  private readonly req: Http.IncomingMessage
  private readonly res: Http.ServerResponse
  private readonly ledgerId: string
  private readonly startedAt: number
  private readonly t0: number

  private principal: Principal | undefined
  private bodyChunks: Array<Buffer> = []
  private bodySize = 0
  private bodyText: string | undefined
  /** refused, or handed to the exchange: later events are ignored */
  private settled = false
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
    const { req, res } = this
    const limit = this.deps.settings.gatewayMaxBodyBytes
    // before the call went out there is nothing to stop or record
    res.on("close", () => {
      if (!res.writableFinished) this.exchange?.callerGone()
    })
    req.on("data", (chunk: Buffer) => {
      if (this.settled) return
      this.bodySize += chunk.length
      if (this.bodySize > limit) return this.tooLarge()
      this.bodyChunks.push(chunk)
    })
    req.on("end", () => {
      if (this.settled) return
      const chunks = this.bodyChunks
      this.bodyText = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks, this.bodySize).toString("utf8")
      this.bodyChunks = []
      this.proceed()
    })
    const declared = req.headers["content-length"]
    if (declared !== undefined && Number(declared) > limit) return this.tooLarge()
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

  /** Both the credential and the body are in: validate, route, and hand over to the exchange. */
  private proceed(): void {
    if (this.settled || this.principal === undefined || this.bodyText === undefined) return
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
    let plan
    try {
      plan = this.surface.plan(body, {
        providers: this.deps.providers,
        req: this.req,
        bodyText: this.bodyText,
        apiKey: typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined,
        ledgerId: this.ledgerId
      })
    } catch (cause) {
      return this.refuse(unreadable(this.surface.shape, cause))
    }
    if (isError(plan)) return this.refuse(plan)
    this.settled = true
    this.exchange = new Exchange(this.deps, this.surface, httpCaller(this.res), {
      principal: this.principal,
      who,
      request: this.bodyText,
      plan,
      ledgerId: this.ledgerId,
      startedAt: this.startedAt,
      t0: this.t0
    })
    this.exchange.start()
  }

  /**
   * Answers 413 at once, then reads the rest of the body and drops it: a client still sending would otherwise meet
   * a reset connection and never read the answer (the openai SDK reports a connection error, and retries). A
   * client that sends for longer than DISCARD_MS more is cut.
   */
  private tooLarge(): void {
    const limit = this.deps.settings.gatewayMaxBodyBytes
    this.refuse(gatewayError(413, `the request body is larger than ${limit} bytes`, "request_too_large"))
    const { req } = this
    if (req.complete) return
    const cut = setTimeout(() => req.destroy(), DISCARD_MS)
    req.once("end", () => clearTimeout(cut))
    req.once("close", () => clearTimeout(cut))
  }

  /** Answers a request refused before it reached a provider (not captured). */
  private refuse(error: ProviderError): void {
    if (this.settled) return
    this.settled = true
    this.bodyChunks = []
    sendText(this.res, error.status, this.surface.errorText(error), { "x-ledger-id": this.ledgerId })
  }
}

/** The route handler of a surface. */
export const gatewayCall = (deps: CallDependencies, surface: Surface) => (req: Http.IncomingMessage, res: Http.ServerResponse): void =>
  new GatewayCall(deps, surface, req, res).start()
