/**
 * The test harness's port helpers: a server process that loses its port to another test between the choice and
 * its bind (EADDRINUSE) is started again on other ports; any other failure to start is not retried.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { spawnOnFreePorts } from "../support/ports.ts"

describe("spawnOnFreePorts", () => {
  it.effect("starts again on other ports when the process reports EADDRINUSE", () =>
    Effect.gen(function*() {
      const tried: Array<ReadonlyArray<number>> = []
      const started = yield* spawnOnFreePorts(2, async (ports) => {
        tried.push(ports)
        if (tried.length === 1) throw new Error(`ledger exited:\nError: listen EADDRINUSE: address already in use 127.0.0.1:${ports[0]}`)
        return ports
      })
      assert.strictEqual(tried.length, 2)
      assert.deepStrictEqual(started, tried[1])
      for (const ports of tried) {
        assert.strictEqual(ports.length, 2)
        for (const port of ports) assert.isTrue(port > 0 && port < 65_536)
      }
    }))

  it.effect("does not retry any other failure", () =>
    Effect.gen(function*() {
      let attempts = 0
      const exit = yield* Effect.exit(spawnOnFreePorts(1, async () => {
        attempts++
        throw new Error("ledger exited: DATABASE_URL is not a valid URL")
      }))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(attempts, 1)
    }))
})
