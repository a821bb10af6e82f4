/**
 * `DATABASE_READ_URL`: REST and MCP read the ledger from a streaming replica, and nothing that writes uses it. A real
 * primary and replica on loopback (test/support/replica.ts); the replica's replay is paused to tell which server
 * answered: a decision built on the primary meanwhile is not in the API's answers until replay resumes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted, Schedule } from "effect"
import * as Crypto from "node:crypto"
import { apiStack } from "../support/api-stack.ts"
import { buildDecisions, MINUTE } from "../support/ledger-fixture.ts"
import { callTool, mcpClient } from "../support/mcp-client.ts"
import { replicaCluster } from "../support/replica.ts"
import { makeCapture } from "../support/seed.ts"

describe("a read replica (DATABASE_READ_URL)", () => {
  it.live("serves REST and MCP reads; the writers never connect to it", () =>
    Effect.gen(function*() {
      const cluster = yield* replicaCluster
      const stack = yield* apiStack({
        settings: {
          databaseUrl: Option.some(Redacted.make(cluster.primaryUrl)),
          databaseReadUrl: Option.some(Redacted.make(cluster.replicaUrl))
        }
      })
      const scope = { ...stack.principal, key_id: Crypto.randomUUID() }
      /** the ledger ids `GET /v1/decisions` lists */
      const listedByRest = Effect.promise(async () => {
        const response = await fetch(`${stack.baseUrl}/v1/decisions`, { headers: { authorization: `Bearer ${stack.pat}` } })
        assert.strictEqual(response.status, 200)
        return ((await response.json()) as { data: Array<{ ledger_id: string }> }).data.map((row) => row.ledger_id)
      })
      const mcp = yield* mcpClient(stack.baseUrl, { token: stack.pat })

      // built on the primary (the builder's path), then replayed: both surfaces answer from the replica
      const first = makeCapture({ scope, agent_id: "planner", at: Date.now() - 2 * MINUTE, ask: "replicated" })
      yield* buildDecisions(stack, [first])
      yield* cluster.caughtUp
      assert.deepStrictEqual(yield* listedByRest, [first.ledger_id])
      const listed = yield* callTool(mcp, "list_decisions", {})
      assert.isNotTrue(listed.isError)
      assert.deepStrictEqual((listed.structuredContent as { data: Array<{ ledger_id: string }> }).data.map((d) => d.ledger_id), [first.ledger_id])

      // replay paused: a decision built on the primary now is not in what the API answers — it reads the replica
      yield* cluster.pauseReplay
      const second = makeCapture({ scope, agent_id: "planner", at: Date.now() - MINUTE, ask: "not replayed yet" })
      const stored = yield* buildDecisions(stack, [second])
      assert.isTrue(stored.inserted.has(second.ledger_id), "the builder writes to the primary with the replica paused")
      assert.deepStrictEqual(yield* listedByRest, [first.ledger_id])
      const whilePaused = yield* callTool(mcp, "get_decision", { ledger_id: second.ledger_id })
      assert.isTrue(whilePaused.isError)

      yield* cluster.resumeReplay
      const afterResume = yield* listedByRest.pipe(
        Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (ids) => ids.length === 2, times: 200 })
      )
      assert.sameMembers(afterResume, [first.ledger_id, second.ledger_id])
      assert.isNotTrue((yield* callTool(mcp, "get_decision", { ledger_id: second.ledger_id })).isError)

      // on the replica only the read pool's connections (and this test's); the owner's pool ("ledger") is the primary's
      const clients = yield* cluster.onReplica<{ application_name: string }>(
        "SELECT DISTINCT application_name FROM pg_stat_activity WHERE backend_type = 'client backend' ORDER BY 1"
      )
      assert.deepStrictEqual(clients.map((row) => row.application_name), ["ledger-read", "ledger-test"])
    }).pipe(Effect.scoped), { timeout: 120_000 })
})
