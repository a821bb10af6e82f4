/**
 * The Responses API's WebSocket mode on the fake OpenAI (`GET /v1/responses` upgraded, also under `/compat`): each
 * `response.create` message is answered with the same events as the SSE stream, one JSON text frame each. As OpenAI
 * does with `store: false`, the connection remembers its last response (input and output), so a turn may send only
 * its new input with `previous_response_id`; another id is `previous_response_not_found`. `generate: false` answers
 * with an empty response (Codex's warm-up).
 */
import type { IncomingMessage, Server } from "node:http"
import { setTimeout as sleep } from "node:timers/promises"
import { WebSocketServer } from "ws"
import type { RecordedRequest } from "../fake-providers.ts"
import { readResponses, responsesEvents } from "./openai.ts"
import { script } from "./script.ts"

export interface SocketOptions {
  readonly delayMs: number
  readonly record: (request: RecordedRequest) => void
  /** the next response number (ids are unique across HTTP and sockets) */
  readonly next: () => number
}

const SOCKET_PATH = /^\/(?:compat\/)?v1\/responses(?:\?.*)?$/

export const acceptResponsesSockets = (server: Server, options: SocketOptions): void => {
  const sockets = new WebSocketServer({ noServer: true })
  server.on("upgrade", (req: IncomingMessage, socket, head) => {
    if (!SOCKET_PATH.test(req.url ?? "") || (!req.url!.startsWith("/compat") && !/^Bearer \S+/.test(req.headers.authorization ?? ""))) {
      socket.end("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
      return
    }
    sockets.handleUpgrade(req, socket, head, (ws) => {
      let last: { id: string; items: Array<unknown> } | undefined
      let queue = Promise.resolve()
      const send = (event: object) => ws.send(JSON.stringify(event))
      ws.on("message", (data) => {
        queue = queue.then(async () => {
          let body: any
          try {
            body = JSON.parse(String(data))
          } catch {
            return send({ type: "error", status: 400, error: { type: "invalid_request_error", code: "invalid_json", message: "not JSON", param: null } })
          }
          if (body.type !== "response.create") return
          options.record({
            provider: req.url!.startsWith("/compat") ? "openai_compatible" : "openai",
            method: "WEBSOCKET",
            path: req.url!,
            headers: req.headers,
            body
          })
          const input: Array<unknown> = typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : body.input ?? []
          if (body.previous_response_id != null && body.previous_response_id !== last?.id) {
            return send({
              type: "error",
              status: 400,
              error: { type: "invalid_request_error", code: "previous_response_not_found", message: `Previous response with id '${body.previous_response_id}' not found.`, param: "previous_response_id" }
            })
          }
          const context = body.previous_response_id == null ? [] : last!.items
          const n = options.next()
          const s = body.generate === false
            ? { ...script(readResponses({ input: [] }, 0)), text: "", toolCalls: [], reasoning: null }
            : script(readResponses({ ...body, input }, String(data).length))
          let completed: any
          for (const event of responsesEvents(s, body, n)) {
            send(event)
            if ((event.type as string).startsWith("response.") && (event.response as any)?.status !== "in_progress") completed = event.response
            if (options.delayMs > 0) await sleep(options.delayMs)
          }
          if (completed?.status === "completed") last = { id: completed.id, items: [...context, ...input, ...completed.output] }
          else last = undefined
        })
      })
    })
  })
}
