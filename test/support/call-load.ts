/**
 * Steady calls through a gateway for fault tests: `concurrency` callers, each making chat-completions calls one after
 * the other (every fourth streamed, providers alternating), recording the `x-ledger-id` of every complete answer and
 * a line for every call that failed. Stopped with `stop` (or the scope).
 *
 *   const load = yield* callLoad(gatewayUrl, gatewayKey, { concurrency: 8 })
 *   ... cut something ...
 *   yield* load.stop
 *   assert.deepStrictEqual(load.failures, [])
 */
import { Effect, Fiber } from "effect"

export interface CallLoad {
  /** ledger ids of the calls answered in full, in the order they finished */
  readonly answered: Array<string>
  /** `n: status body…` of every call that was not */
  readonly failures: Array<string>
  /** Stops starting calls and waits for those in flight. */
  readonly stop: Effect.Effect<void>
}

export const callLoad = (gatewayUrl: string, gatewayKey: string, options: { readonly concurrency: number; readonly agentId?: string }) =>
  Effect.gen(function*() {
    const answered: Array<string> = []
    const failures: Array<string> = []
    let running = true
    let next = 0
    const call = async (n: number) => {
      const stream = n % 4 === 0
      try {
        const res = await fetch(`${gatewayUrl}/v1/chat/completions?agent_id=${options.agentId ?? "agent-load"}&execution_id=load`, {
          method: "POST",
          headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json", "x-service-provider-api-key": "sk-load" },
          body: JSON.stringify({
            model: n % 2 === 0 ? "openai/gpt-4o-mini" : "anthropic/claude-haiku-4-5",
            stream,
            messages: [{ role: "user", content: `call number ${n}` }]
          })
        })
        const text = await res.text()
        const complete = stream ? text.endsWith("data: [DONE]\n\n") : text.includes(`call number ${n}`)
        if (res.status === 200 && complete) answered.push(res.headers.get("x-ledger-id")!)
        else failures.push(`${n}: ${res.status} ${text.slice(0, 200)}`)
      } catch (error) {
        failures.push(`${n}: ${String(error)}`)
      }
    }
    const worker = Effect.promise(async () => {
      while (running) await call(next++)
    })
    const workers = yield* Effect.forEach(Array.from({ length: options.concurrency }), () => Effect.forkScoped(worker))
    const stop = Effect.suspend(() => {
      running = false
      return Fiber.joinAll(workers)
    })
    return { answered, failures, stop } satisfies CallLoad
  })
