/**
 * The Responses API's WebSocket mode on `GET /v1/responses`, spoken by a plain `ws` client: the upgrade's
 * authentication and attribution, a warm-up, turns continuing each other with only their new input (on OpenAI as on a
 * translated provider), the errors Codex acts on (with a status), and messages it need not answer.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import WebSocket from "ws"
import { type RecordingStack, recordingStack } from "../support/recording-stack.ts"

const PROVIDER_KEY = "sk-provider-socket-0123456789"

class Stack extends Context.Service<Stack, RecordingStack>()("test/SocketStack") {}
const StackLive = Layer.effect(Stack, recordingStack())

interface Socket {
  /** sends a message and collects the frames up to the turn's last (a completed, failed or error event) */
  readonly turn: (message: object | string) => Promise<Array<any>>
  readonly ws: WebSocket
}

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"])

const open = (stack: RecordingStack, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Socket>((resolve, reject) => {
        const ws = new WebSocket(`${stack.gatewayUrl.replace("http", "ws")}/v1/responses?agent_id=socket-agent`, {
          headers: { authorization: `Bearer ${stack.gatewayKey}`, "x-service-provider-api-key": PROVIDER_KEY, ...headers }
        })
        let frames: Array<any> = []
        let done: ((frames: Array<any>) => void) | undefined
        ws.on("message", (data) => {
          const frame = JSON.parse(String(data))
          frames.push(frame)
          if (TERMINAL.has(frame.type)) {
            const collected = frames
            frames = []
            done?.(collected)
          }
        })
        ws.once("open", () =>
          resolve({
            ws,
            turn: (message) =>
              new Promise((settle) => {
                done = settle
                ws.send(typeof message === "string" ? message : JSON.stringify(message))
              })
          }))
        ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
        ws.once("error", reject)
      })
    ),
    (socket) => Effect.sync(() => socket.ws.close())
  )

const completed = (frames: Array<any>) => frames.at(-1).response

describe("the Responses WebSocket mode", () => {
  layer(StackLive, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("turns continue each other with only their new input, on OpenAI and on a translated provider; each a decision", () =>
      Effect.scoped(Effect.gen(function*() {
        const stack = yield* Stack
        for (const model of ["gpt-5.1", "anthropic/claude-sonnet-4-6"]) {
          const socket = yield* open(stack)
          const warm = yield* Effect.promise(() =>
            socket.turn({ type: "response.create", model, generate: false, input: [{ type: "message", role: "developer", content: "Answer briefly." }] })
          )
          assert.deepStrictEqual(warm.map((frame) => frame.type), ["response.created", "response.completed"])
          const first = yield* Effect.promise(() =>
            socket.turn({ type: "response.create", model, stream: true, previous_response_id: completed(warm).id, input: "My order is ORD-5." })
          )
          assert.strictEqual(first[0].type, "response.created")
          assert.strictEqual(first.at(-1).type, "response.completed")
          assert.isAbove(first.filter((frame) => frame.type === "response.output_text.delta").length, 0, "events as they come")
          // an acknowledgement Codex may send, and the next turn right behind it
          socket.ws.send(JSON.stringify({ type: "response.processed", response_id: completed(first).id }))
          const second = yield* Effect.promise(() =>
            socket.turn({ type: "response.create", model, previous_response_id: completed(first).id, input: "Which order?" })
          )
          assert.strictEqual(completed(second).output[0].content[0].text, "Fake answer to: Which order?")

          const provider = model.startsWith("anthropic/") ? "anthropic" : "openai"
          const sent = stack.fake.requestsOf(provider).at(-1)!.body
          const turns = provider === "anthropic"
            ? sent.messages.map((message: any) => message.content[0].text)
            : sent.input.map((item: any) => typeof item.content === "string" ? item.content : item.content[0].text)
          assert.deepStrictEqual(turns.slice(-3), ["My order is ORD-5.", "Fake answer to: My order is ORD-5.", "Which order?"], "the provider got the whole conversation")
          assert.notProperty(sent, "previous_response_id")

          const capture = yield* stack.captureWhere((found) => found.request.includes("Which order?") && model.endsWith(found.model))
          assert.strictEqual(capture.request.includes('"type":"response.create"'), true, "the turn as the client sent it")
          assert.include(capture.context ?? "", "My order is ORD-5.", "with the turns it continues")
          const decision = yield* stack.decision(capture.ledger_id)
          assert.deepStrictEqual([decision.api, decision.agent_id, decision.stream], ["responses", "socket-agent", true])
          assert.deepStrictEqual(decision.logic_trace.map((step) => step.text).slice(-4), [
            "My order is ORD-5.",
            "Fake answer to: My order is ORD-5.",
            "Which order?",
            "Fake answer to: Which order?"
          ])
        }
      })))

    it.effect("errors carry a status; an unknown previous response is refused; a failed turn forgets the one it continued", () =>
      Effect.scoped(Effect.gen(function*() {
        const stack = yield* Stack
        const socket = yield* open(stack)
        const notJson = yield* Effect.promise(() => socket.turn("{"))
        assert.deepInclude(notJson[0], { type: "error", status: 400 })
        const unknown = yield* Effect.promise(() =>
          socket.turn({ type: "response.create", model: "anthropic/claude-sonnet-4-6", previous_response_id: "resp_nowhere", input: "hi" })
        )
        assert.deepStrictEqual([unknown[0].status, unknown[0].error.code], [400, "previous_response_not_found"])
        const badModel = yield* Effect.promise(() => socket.turn({ type: "response.create", model: "nowhere/x", input: "hi" }))
        assert.deepStrictEqual([badModel[0].status, badModel[0].error.code], [400, "unknown_provider"])

        const ok = yield* Effect.promise(() => socket.turn({ type: "response.create", model: "anthropic/claude-sonnet-4-6", input: "first" }))
        const limited = yield* Effect.promise(() =>
          socket.turn({ type: "response.create", model: "anthropic/claude-sonnet-4-6", previous_response_id: completed(ok).id, input: "now [[error:429]]" })
        )
        assert.deepStrictEqual([limited[0].type, limited[0].status, limited[0].error.type], ["error", 429, "rate_limit_error"])
        const after = yield* Effect.promise(() =>
          socket.turn({ type: "response.create", model: "anthropic/claude-sonnet-4-6", previous_response_id: completed(ok).id, input: "again" })
        )
        assert.strictEqual(after.at(-1).type, "response.completed", "the gateway's chain store still has it for a new attempt")
      })))

    it.effect("the upgrade is authenticated and attributed like every gateway call", () =>
      Effect.gen(function*() {
        const stack = yield* Stack
        const refused = (headers: Record<string, string>, query = "?agent_id=x") =>
          Effect.promise(() =>
            new Promise<number>((resolve) => {
              const ws = new WebSocket(`${stack.gatewayUrl.replace("http", "ws")}/v1/responses${query}`, { headers })
              ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0))
              ws.once("open", () => {
                ws.close()
                resolve(101)
              })
              ws.once("error", () => resolve(-1))
            })
          )
        assert.strictEqual(yield* refused({}), 401)
        assert.strictEqual(yield* refused({ authorization: `Bearer ${stack.pat}` }), 401, "a PAT is refused")
        assert.strictEqual(yield* refused({ authorization: `Bearer ${stack.gatewayKey}` }, ""), 400, "no agent")
        assert.strictEqual(yield* refused({ authorization: `Bearer ${stack.gatewayKey}` }), 101)
      }))
  })
})
