/**
 * Calls at a steady rate, open loop: each call is started when the clock says it is due, whether or not earlier ones
 * have been answered, so a slow answer shows in its own latency instead of delaying the calls after it. (autocannon's
 * rate option sends each connection's quota back to back at the start of every second: bursts, not a steady rate.)
 */
import { Pool } from "undici"
import type { Sample } from "../gateway/harness.ts"

/** Starts `send(n)` for n = 0, 1, … at `rate` per second for `seconds`; resolves once every call has finished. */
export const openLoop = async (rate: number, seconds: number, send: (n: number) => Promise<void>): Promise<number> => {
  const pending = new Set<Promise<void>>()
  const start = performance.now()
  let sent = 0
  const total = Math.floor(rate * seconds)
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate))
    while (sent < due) {
      const call = send(sent++).finally(() => pending.delete(call))
      pending.add(call)
    }
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
  await Promise.all(pending)
  return sent
}

/**
 * POSTs `body` to `url` at `rate` calls/s for `seconds` over at most `connections` keep-alive connections; the time of
 * every answered call runs from its start to the end of its body (a call waiting for a connection is still waiting).
 */
export const paced = async (
  url: string,
  headers: Record<string, string>,
  body: string,
  options: { readonly rate: number; readonly seconds: number; readonly connections: number }
): Promise<Sample> => {
  const target = new URL(url)
  const pool = new Pool(target.origin, { connections: options.connections })
  const times: Array<number> = []
  const errorKinds = new Map<string, number>()
  const failed = (kind: string) => errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1)
  try {
    const requests = await openLoop(options.rate, options.seconds, async () => {
      const started = performance.now()
      try {
        const response = await pool.request({ method: "POST", path: target.pathname + target.search, headers, body })
        await response.body.text()
        if (response.statusCode === 200) times.push(performance.now() - started)
        else failed(String(response.statusCode))
      } catch (error) {
        failed((error as { code?: string }).code ?? "error")
      }
    })
    return {
      seconds: options.seconds,
      requests,
      errors: [...errorKinds.values()].reduce((sum, count) => sum + count, 0),
      errorKinds: [...errorKinds].map(([kind, count]) => `${count}x${kind}`),
      times
    }
  } finally {
    await pool.close()
  }
}
