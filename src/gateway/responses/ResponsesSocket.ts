/**
 * The Responses API's WebSocket mode on `GET /v1/responses` (Codex opens it first with its built-in OpenAI
 * provider, and with custom providers that set `supports_websockets`; a refused upgrade costs it seconds of retries
 * and broke sessions in some versions).
 *
 * The gateway serves the socket itself. Each `response.create` message is one turn: a streamed call to the
 * provider over HTTP (as on `POST /v1/responses`), whose events come back as one JSON text frame each. A turn sends
 * only its new input and the `previous_response_id` it continues, so the gateway keeps the connection's conversation
 * (the last response's input and output, as OpenAI does with `store: false`): the provider gets the whole
 * conversation, and each turn's capture carries the turns it continues. Turns run one at a time, in order; `generate:
 * false` (Codex's warm-up) is answered at once without a model call, its input kept for the next turn; client
 * messages of other types are ignored. Errors are frames `{"type":"error","status",...}` (Codex acts only on those
 * that carry a status), and a failed turn forgets the response it continued.
 */
import * as Http from "node:http"
import type { Duplex } from "node:stream"
import { type WebSocket, WebSocketServer } from "ws"
import type { Principal } from "../../domain/principal.ts"
import { type Attribution, attribution, isError } from "../attribution.ts"
import { type CallDependencies, type Caller, Exchange } from "../Exchange.ts"
import { gatewayError } from "../GatewayServer.ts"
import type { CallContext, ProviderError } from "../../providers/index.ts"
import { responsesPlan } from "../surfaces/responses.ts"
import { type CallPlan, isObject, routeModel, type Surface, unreadable } from "../surfaces/surface.ts"
import { uuidv7 } from "../uuidv7.ts"
import { inputItems, type ResponseItem, type ResponsesRequest } from "./request.ts"
import type { ResponseChains } from "./ResponseChains.ts"

/** The route label of a socket's turns in the metrics. */
const ROUTE = "GET /v1/responses (websocket)"
/** How long shutdown lets a turn in flight finish before the socket is closed anyway. */
const SHUTDOWN_GRACE_MS = 30_000

/** A refused upgrade: an HTTP answer written on the raw socket. */
const refuseUpgrade = (socket: Duplex, error: ProviderError) => {
  const body = JSON.stringify(error.body)
  socket.end(
    `HTTP/1.1 ${error.status} ${Http.STATUS_CODES[error.status] ?? "Error"}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  )
}

const errorFrame = (status: number, error: { readonly type?: string; readonly code?: string | null; readonly message?: string; readonly param?: string | null }) =>
  JSON.stringify({ type: "error", status, error: { type: error.type ?? "api_error", code: error.code ?? null, message: error.message ?? "", param: error.param ?? null } })

/** The `data:` of each server-sent event in `frames` (the Responses relays write one data line an event). */
const eventsOf = (frames: string): Array<string> => {
  const events: Array<string> = []
  let at = frames.indexOf("data: ")
  while (at !== -1) {
    const end = frames.indexOf("\n", at)
    events.push(frames.slice(at + 6, end === -1 ? undefined : end))
    at = frames.indexOf("data: ", end === -1 ? frames.length : end)
  }
  return events
}

interface Session {
  readonly principal: Principal
  readonly who: Attribution
  readonly apiKey: string | undefined
}

class ResponsesConnection {
  private readonly deps: CallDependencies
  private readonly chains: ResponseChains["Service"]
  private readonly surface: Surface
  private readonly ws: WebSocket
  private readonly session: Session
  private readonly pending: Array<string> = []
  /** the connection's conversation: the last response and the items up to it */
  private last: { readonly id: string; readonly items: ReadonlyArray<ResponseItem> } | undefined
  private turn: { readonly exchange: Exchange | undefined; readonly done: Promise<void>; readonly finish: () => void } | undefined
  private closed = false

  constructor(deps: CallDependencies, chains: ResponseChains["Service"], surface: Surface, ws: WebSocket, session: Session) {
    this.deps = deps
    this.chains = chains
    this.surface = surface
    this.ws = ws
    this.session = session
    ws.on("message", (data, binary) => {
      if (binary) return this.send(errorFrame(400, { type: "invalid_request_error", code: "invalid_message", message: "messages are JSON text frames" }))
      this.pending.push(String(data))
      this.next()
    })
    ws.on("close", () => {
      this.closed = true
      this.turn?.exchange?.callerGone()
    })
  }

  private send(frame: string): void {
    if (!this.closed) this.ws.send(frame)
  }

  /** Waits for the turn in flight (up to the grace period), then closes the socket. */
  async close(): Promise<void> {
    if (this.turn !== undefined) {
      await Promise.race([this.turn.done, new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref())])
    }
    this.ws.close(1001, "the gateway is shutting down")
  }

  private next(): void {
    if (this.turn !== undefined || this.closed) return
    const frame = this.pending.shift()
    if (frame !== undefined) this.start(frame)
  }

  private start(frame: string): void {
    try {
      this.startTurn(frame)
    } catch (cause) {
      // a message whose shape the code did not expect: refused like any bad request, the socket goes on
      this.turn = undefined
      this.send(errorFrame(400, unreadable(this.surface.shape, cause).body.error))
      this.next()
    }
  }

  private startTurn(frame: string): void {
    let message: unknown
    try {
      message = JSON.parse(frame)
    } catch (cause) {
      this.send(errorFrame(400, { type: "invalid_request_error", code: "invalid_json", message: `the message is not valid JSON: ${(cause as Error).message}` }))
      return this.next()
    }
    // other client messages (acknowledgements, steering) have no answer here
    if (!isObject(message) || message.type !== "response.create") return this.next()
    const { type: _type, generate, ...request } = message as Record<string, unknown> & ResponsesRequest
    const refused = (error: ProviderError) => {
      this.send(errorFrame(error.status, error.body.error))
      this.next()
    }
    const target = routeModel(request.model, this.deps.providers, "openai")
    if ("status" in target) return refused(target)
    if (request.input !== undefined && typeof request.input !== "string" && !Array.isArray(request.input)) {
      return refused(gatewayError(400, "input must be a string or an array of items", "invalid_parameter", "input"))
    }
    const previous = typeof request.previous_response_id === "string" ? request.previous_response_id : undefined
    const earlier = previous === undefined ? [] : previous === this.last?.id ? this.last.items : this.chains.get(previous)
    const passedThrough = target.route.type === "openai" || target.route.type === "azure" || target.route.type === "openai_compatible"
    // a response the gateway never saw may still be stored at OpenAI: the id goes on, for OpenAI to find it
    if (earlier === undefined && !passedThrough) {
      return refused(gatewayError(400, `Previous response with id '${previous!.slice(0, 200)}' not found.`, "previous_response_not_found", "previous_response_id", "invalid_request_error"))
    }
    const input = inputItems(request)
    const conversation = [...(earlier ?? []), ...input]
    if (generate === false) return this.warmUp(conversation)

    const { previous_response_id: _previous, ...rest } = request
    const forwarded: ResponsesRequest = earlier === undefined ? { ...request, stream: true } : { ...rest, input: conversation, stream: true }
    const startedAt = Date.now()
    const t0 = performance.now()
    const ledgerId = uuidv7(startedAt)
    const ctx: CallContext = {
      model: target.model,
      apiKey: this.session.apiKey,
      baseUrl: target.route.baseUrl,
      stream: true,
      includeUsage: false,
      apiVersion: target.route.apiVersion,
      requestText: JSON.stringify(forwarded),
      ledgerId
    }
    const plan = responsesPlan(forwarded, target.route, ctx, this.chains)
    if (isError(plan)) return refused(plan)
    let finish = () => {}
    const done = new Promise<void>((resolve) => (finish = resolve))
    let status = 200
    const turn: CallPlan = {
      ...plan,
      context: earlier === undefined || earlier.length === 0 ? undefined : JSON.stringify(earlier),
      answered: (text) => this.remember(text, conversation)
    }
    const caller: Caller = {
      openStream: () => {},
      write: (frames) => {
        for (const event of eventsOf(frames)) {
          // Codex acts only on error frames that carry a status
          this.send(event.startsWith('{"type":"error"') ? errorFrame(500, (JSON.parse(event) as { error?: object }).error ?? {}) : event)
        }
        return true
      },
      onceDrained: (resume) => resume(),
      endStream: (frames) => {
        caller.write(frames)
        this.ended(previous, status, t0)
      },
      send: (code, text) => {
        status = code
        if (code < 300) this.send(JSON.stringify({ type: "response.completed", response: JSON.parse(text) }))
        else this.send(errorFrame(code, (JSON.parse(text) as { error?: object }).error ?? {}))
        this.ended(previous, code, t0)
      }
    }
    const exchange = new Exchange(this.deps, this.surface, caller, {
      principal: this.session.principal,
      who: this.session.who,
      request: frame,
      // a socket frame is text already: its capture is built as text
      requestBytes: undefined,
      plan: turn,
      ledgerId,
      startedAt,
      t0
    })
    this.turn = { exchange, done, finish }
    exchange.start()
  }

  /** `generate: false`: a response with no output, at once; its input is kept for the next turn. */
  private warmUp(conversation: ReadonlyArray<ResponseItem>): void {
    const id = `resp_ldg_${uuidv7(Date.now()).replaceAll("-", "")}`
    const response = { id, object: "response", created_at: Math.floor(Date.now() / 1000), status: "completed", error: null, incomplete_details: null, output: [], usage: null }
    this.send(JSON.stringify({ type: "response.created", sequence_number: 0, response: { ...response, status: "in_progress" } }))
    this.send(JSON.stringify({ type: "response.completed", sequence_number: 1, response }))
    this.last = { id, items: conversation }
    this.chains.put(id, conversation, JSON.stringify(conversation).length)
    this.next()
  }

  /** A turn's answer: the conversation up to it is the one the next turn continues. */
  private remember(text: string, conversation: ReadonlyArray<ResponseItem>): void {
    const response = JSON.parse(text) as { id?: string; status?: string; output?: ReadonlyArray<ResponseItem> }
    if (response.id === undefined || (response.status !== "completed" && response.status !== "incomplete")) return
    const items = [...conversation, ...(response.output ?? [])]
    this.last = { id: response.id, items }
    this.chains.put(response.id, items, text.length + JSON.stringify(conversation).length)
  }

  private ended(previous: string | undefined, status: number, t0: number): void {
    const turn = this.turn
    this.turn = undefined
    // as OpenAI does: a failed turn forgets the response it continued
    if (status >= 300 && previous !== undefined && this.last?.id === previous) this.last = undefined
    this.deps.metrics.request(ROUTE, status, performance.now() - t0)
    turn?.finish()
    this.next()
  }
}

/** The upgrade handler of `GET /v1/responses`, and the close of its connections at shutdown. */
export const responsesSockets = (deps: CallDependencies, chains: ResponseChains["Service"], surface: Surface) => {
  const server = new WebSocketServer({ noServer: true, maxPayload: deps.settings.gatewayMaxBodyBytes, perMessageDeflate: true })
  const connections = new Set<ResponsesConnection>()
  const upgrade = (req: Http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => socket.destroy())
    deps.auth(
      req,
      false,
      (principal) => {
        const url = req.url ?? ""
        const q = url.indexOf("?")
        const who = attribution(q === -1 ? undefined : new URLSearchParams(url.slice(q + 1)), req.headers)
        if (isError(who)) return refuseUpgrade(socket, who)
        const apiKey = req.headers["x-service-provider-api-key"]
        server.handleUpgrade(req, socket, head, (ws) => {
          const connection = new ResponsesConnection(deps, chains, surface, ws, {
            principal,
            who,
            apiKey: typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined
          })
          connections.add(connection)
          ws.on("close", () => connections.delete(connection))
        })
      },
      (error) => refuseUpgrade(socket, error)
    )
  }
  const close = () => Promise.all([...connections].map((connection) => connection.close())).then(() => undefined)
  return { upgrade, close }
}
