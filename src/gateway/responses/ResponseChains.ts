/**
 * The conversations of Responses chains the gateway keeps itself: providers reached by translation store nothing,
 * and a WebSocket turn sends only its new input. Each answer's conversation (the turns before it, its input and its
 * output items) is kept under the answer's id, available to the very next turn (it is put before the answer's last
 * event reaches the caller). The memory is bounded (LEDGER_RESPONSES_STATE_MB): the least recently continued are
 * forgotten first, and a turn continuing a forgotten or unknown response is refused with
 * `previous_response_not_found`, as OpenAI does.
 *
 * The state is this gateway process's: a chain must come back to the gateway that answered its last turn (a
 * WebSocket is one connection; behind a load balancer, route a conversation to one gateway). The gateway workers of
 * one process (`--gateway-workers N`) share their chains (`layerShared`): each keeps a copy, and every put is
 * broadcast to the others — before the answer's last event reaches the caller, so ahead of any next turn the caller
 * sends on another connection (workers share the port and the kernel spreads connections over them). Each worker's
 * copy is bounded by LEDGER_RESPONSES_STATE_MB.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { BroadcastChannel } from "node:worker_threads"
import { LedgerConfig } from "../../config/LedgerConfig.ts"
import type { ResponseItem } from "./request.ts"

interface Entry {
  readonly items: ReadonlyArray<ResponseItem>
  readonly bytes: number
}

const kept = Metric.gauge("ledger_gateway_responses_state_bytes", { description: "memory held by the Responses chains the gateway keeps itself" })

interface SharedPut {
  readonly id: string
  readonly items: ReadonlyArray<ResponseItem>
  readonly bytes: number
}

const makeChains = Effect.gen(function*() {
  const limit = (yield* LedgerConfig).responsesStateBytes
  const context = yield* Effect.context<never>()
  // a Map iterates in insertion order: re-inserting on use keeps the least recently used first
  const entries = new Map<string, Entry>()
  let total = 0
  const get = (responseId: string) => {
    const entry = entries.get(responseId)
    if (entry === undefined) return undefined
    entries.delete(responseId)
    entries.set(responseId, entry)
    return entry.items
  }
  const put = (responseId: string, items: ReadonlyArray<ResponseItem>, bytes: number) => {
    if (bytes > limit) return
    const previous = entries.get(responseId)
    if (previous !== undefined) {
      entries.delete(responseId)
      total -= previous.bytes
    }
    entries.set(responseId, { items, bytes })
    total += bytes
    for (const [id, entry] of entries) {
      if (total <= limit) break
      entries.delete(id)
      total -= entry.bytes
    }
    kept.updateUnsafe(total, context)
  }
  return { get, put }
})

export class ResponseChains extends Context.Service<ResponseChains, {
  /** The conversation up to and including a response, if this gateway keeps it. */
  get(responseId: string): ReadonlyArray<ResponseItem> | undefined
  /** Keeps a response's conversation; `bytes` is its size as JSON, roughly. */
  put(responseId: string, items: ReadonlyArray<ResponseItem>, bytes: number): void
}>()("ledger/gateway/ResponseChains") {
  /** Chains kept by this thread alone. */
  static readonly layer = Layer.effect(ResponseChains, Effect.map(makeChains, ({ get, put }) => ResponseChains.of({ get, put })))

  /** Chains shared with the other gateway workers of this process on `channel` (a name per gateway port). */
  static readonly layerShared = (channel: string) =>
    Layer.effect(
      ResponseChains,
      Effect.gen(function*() {
        const chains = yield* makeChains
        const broadcast = yield* Effect.acquireRelease(
          Effect.sync(() => new BroadcastChannel(channel)),
          (broadcast) => Effect.sync(() => broadcast.close())
        )
        broadcast.onmessage = (event) => {
          const { id, items, bytes } = (event as { readonly data: SharedPut }).data
          chains.put(id, items, bytes)
        }
        // a worker's own puts do not come back to it (a BroadcastChannel does not deliver to the sender)
        const put = (id: string, items: ReadonlyArray<ResponseItem>, bytes: number) => {
          chains.put(id, items, bytes)
          broadcast.postMessage({ id, items, bytes } satisfies SharedPut)
        }
        return ResponseChains.of({ get: chains.get, put })
      })
    )
}
