/**
 * Steady calls through a gateway for fault tests: `concurrency` callers, each making chat-completions calls one after
 * the other (every fourth streamed, providers alternating), recording the `x-ledger-id` of every complete answer and
 * a line for every call that failed. Stopped with `stop` (or the scope).
 *
 *   const load = yield* callLoad(gatewayUrl, gatewayKey, { concurrency: 8 })
 *   ... cut something ...
 *   yield* awayUnderLoad(load, postgres)        // cut for 8 s; calls must keep being answered
 *   yield* assertNothingLost(load, databaseUrl)  // stops the load; every answered call a decision exactly once
 */
import { PgClient } from "@effect/sql-pg"
import { assert } from "@effect/vitest"
import { Effect, Fiber, Redacted } from "effect"
import { Agent, fetch as undiciFetch } from "undici"

export interface CallLoad {
  /** ledger ids of the calls answered in full, in the order they finished */
  readonly answered: Array<string>
  /** `n: status body…` of every call that was not */
  readonly failures: Array<string>
  /** Stops starting calls and waits for those in flight. */
  readonly stop: Effect.Effect<void>
}

export const callLoad = (
  gatewayUrl: string,
  gatewayKey: string,
  options: {
    readonly concurrency: number
    readonly agentId?: string
    /** each call on a connection of its own (gateway workers sharing a port: the kernel picks one per connection) */
    readonly connectionPerCall?: boolean
  }
) =>
  Effect.gen(function*() {
    const answered: Array<string> = []
    const failures: Array<string> = []
    let running = true
    let next = 0
    const call = async (n: number) => {
      const stream = n % 4 === 0
      const dispatcher = options.connectionPerCall === true ? new Agent() : undefined
      try {
        // the dispatcher must come with the fetch of its own undici
        const send = (dispatcher === undefined ? fetch : (url: string, init: RequestInit) => undiciFetch(url, { ...init, dispatcher } as never)) as typeof fetch
        const res = await send(`${gatewayUrl}/v1/chat/completions?agent_id=${options.agentId ?? "agent-load"}&execution_id=load`, {
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
      } finally {
        await dispatcher?.close()
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

/** How many decision rows the given ledger ids have, and how many distinct. */
export const decisionRows = (databaseUrl: string, ledgerIds: ReadonlyArray<string>) =>
  PgClient.PgClient.use((sql) =>
    sql<{ rows: number; distinct: number }>`
      SELECT count(*)::int AS rows, count(DISTINCT ledger_id)::int AS distinct
      FROM decisions WHERE ledger_id::text = ANY(${[...ledgerIds]})`
  ).pipe(
    Effect.map(([row]) => row!),
    Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))
  )

/**
 * Stops the load; then every call was answered, and every answered call is a decision exactly once (within 60 s).
 * Returns how many were answered.
 */
export const assertNothingLost = (load: CallLoad, databaseUrl: string) =>
  Effect.gen(function*() {
    yield* load.stop
    assert.deepStrictEqual(load.failures.slice(0, 5), [], `every call was answered (${load.failures.length} were not)`)
    const answered = load.answered
    const deadline = Date.now() + 60_000
    let built = yield* decisionRows(databaseUrl, answered)
    while (built.distinct < answered.length && Date.now() < deadline) {
      yield* Effect.sleep(250)
      built = yield* decisionRows(databaseUrl, answered)
    }
    assert.deepStrictEqual(built, { rows: answered.length, distinct: answered.length }, "every answered call a decision, once")
    return answered.length
  })

/** A part the test can take away and bring back (a TCP proxy in front of a server, or a server of the test's own). */
export interface Removable {
  readonly stop: Effect.Effect<void>
  readonly start: Effect.Effect<void>
}

/** Takes `part` away for `ms` under the load, asserts that at least `atLeast` calls were answered meanwhile, brings it back. */
export const awayUnderLoad = (load: CallLoad, part: Removable, options: { readonly ms: number; readonly atLeast: number }) =>
  Effect.gen(function*() {
    yield* part.stop
    const before = load.answered.length
    yield* Effect.sleep(options.ms)
    assert.isAbove(load.answered.length - before, options.atLeast, "calls kept being answered")
    yield* part.start
  })
