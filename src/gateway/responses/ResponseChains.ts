/**
 * The conversations of Responses chains the gateway keeps itself: providers reached by translation store nothing,
 * and a WebSocket turn sends only its new input. Each answer's conversation (the turns before it, its input and its
 * output items) is kept under the answer's id, available to the very next turn (it is put before the answer's last
 * event reaches the caller). The memory is bounded (LEDGER_RESPONSES_STATE_MB): the least recently continued are
 * forgotten first, and a turn continuing a forgotten or unknown response is refused with
 * `previous_response_not_found`, as OpenAI does.
 *
 * The state is this gateway process's: a chain must come back to the gateway that answered its last turn (a
 * WebSocket is one connection; behind a load balancer, route a conversation to one gateway).
 */
import { Context, Effect, Layer, Metric } from "effect"
import { LedgerConfig } from "../../config/LedgerConfig.ts"
import type { ResponseItem } from "./request.ts"

interface Entry {
  readonly items: ReadonlyArray<ResponseItem>
  readonly bytes: number
}

const kept = Metric.gauge("ledger_gateway_responses_state_bytes", { description: "memory held by the Responses chains the gateway keeps itself" })

export class ResponseChains extends Context.Service<ResponseChains, {
  /** The conversation up to and including a response, if this gateway keeps it. */
  get(responseId: string): ReadonlyArray<ResponseItem> | undefined
  /** Keeps a response's conversation; `bytes` is its size as JSON, roughly. */
  put(responseId: string, items: ReadonlyArray<ResponseItem>, bytes: number): void
}>()("ledger/gateway/ResponseChains") {
  static readonly layer = Layer.effect(
    ResponseChains,
    Effect.gen(function*() {
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
      return ResponseChains.of({ get, put })
    })
  )
}
