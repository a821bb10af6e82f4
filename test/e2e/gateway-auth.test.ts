/**
 * Gateway Keys while the credential store comes and goes (docs/ARCHITECTURE.md, "The promises"), against real
 * PostgreSQL behind a TCP proxy that cuts it: a known key keeps working through the outage on its last verdict
 * (counted, up to the stale bound), an unknown key gets a 503, and with the store reachable a revocation takes effect
 * within seconds.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Option, Redacted } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { Credentials } from "../../src/auth/Credentials.ts"
import { testDatabase } from "../support/db.ts"
import { type GatewayStack, gatewayStack } from "../support/gateway-stack.ts"
import { pgProxy } from "../support/pg-proxy.ts"

const call = (stack: GatewayStack, key: string) =>
  Effect.promise(async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions?agent_id=agent-auth`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-service-provider-api-key": "sk-auth" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hello" }] })
    })
    return { status: res.status, body: await res.json() as any }
  })

const metric = (name: string) =>
  Effect.map(PrometheusMetrics.format(), (text) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? 0))

/** A stack whose database is reached through a proxy the test can cut. */
const stackBehindProxy = (staleMs?: number) =>
  Effect.gen(function*() {
    const proxy = yield* pgProxy((yield* testDatabase).url)
    const stack = yield* gatewayStack({
      stream: "memory",
      settings: { databaseUrl: Option.some(Redacted.make(proxy.url)), ...(staleMs === undefined ? {} : { gatewayAuthStaleMs: staleMs }) }
    })
    return { proxy, stack }
  })

describe("Gateway Keys when the credential store is away", () => {
  it.live("a known key keeps working on its last verdict through the outage (counted); an unknown key gets a 503", () =>
    Effect.gen(function*() {
      const { proxy, stack } = yield* stackBehindProxy()
      assert.strictEqual((yield* call(stack, stack.gatewayKey)).status, 200)
      const staleBefore = yield* metric("ledger_gateway_auth_stale_total")

      yield* proxy.stop
      // past the 2 s cache: every call needs the store, which does not answer
      const until = Date.now() + 4_000
      let calls = 0
      while (Date.now() < until) {
        const answer = yield* call(stack, stack.gatewayKey)
        assert.strictEqual(answer.status, 200, JSON.stringify(answer.body))
        calls++
        yield* Effect.sleep(50)
      }
      assert.isAbove(calls, 30)
      assert.isAbove((yield* metric("ledger_gateway_auth_stale_total")) - staleBefore, 0, "stale verdicts are counted")
      assert.strictEqual(yield* metric("ledger_gateway_auth_store_unavailable"), 1)
      const unknown = yield* call(stack, `ldg_gw_${"u".repeat(43)}`)
      assert.strictEqual(unknown.status, 503)
      assert.strictEqual(unknown.body.error.code, "service_unavailable")

      yield* proxy.start
      // the next check reaches the store again
      let recovered = false
      for (let attempt = 0; attempt < 100 && !recovered; attempt++) {
        assert.strictEqual((yield* call(stack, stack.gatewayKey)).status, 200)
        recovered = (yield* metric("ledger_gateway_auth_store_unavailable")) === 0
        yield* Effect.sleep(50)
      }
      assert.isTrue(recovered, "the gateway notices the store is back")
      assert.strictEqual((yield* call(stack, `ldg_gw_${"u".repeat(43)}`)).status, 401)
    }), { timeout: 60_000 })

  it.live("the stale bound: past it, a key the store cannot confirm gets a 503", () =>
    Effect.gen(function*() {
      const { proxy, stack } = yield* stackBehindProxy(3_000)
      assert.strictEqual((yield* call(stack, stack.gatewayKey)).status, 200)
      yield* proxy.stop
      yield* Effect.sleep(2_200)
      assert.strictEqual((yield* call(stack, stack.gatewayKey)).status, 200, "within the bound")
      yield* Effect.sleep(1_500)
      assert.strictEqual((yield* call(stack, stack.gatewayKey)).status, 503, "past the bound")
      yield* proxy.start
    }), { timeout: 60_000 })

  it.live("with the store reachable, a revoked key is refused within 5 s though it was served its last verdict", () =>
    Effect.gen(function*() {
      const { stack } = yield* stackBehindProxy()
      const credentials = Context.get(stack.context, Credentials)
      const created = yield* credentials.createToken({ email: "agent-owner@gateway.test", workspace: "main", kind: "gateway" })
      assert.strictEqual((yield* call(stack, created.token)).status, 200)
      yield* credentials.revoke(created.token_id)
      const revokedAt = Date.now()
      let status = 200
      while (status === 200 && Date.now() - revokedAt < 5_000) {
        status = (yield* call(stack, created.token)).status
        if (status === 200) yield* Effect.sleep(50)
      }
      assert.strictEqual(status, 401, "refused within 5 s")
      assert.isBelow(Date.now() - revokedAt, 5_000)
      // and refused from then on
      for (let n = 0; n < 5; n++) assert.strictEqual((yield* call(stack, created.token)).status, 401)
    }), { timeout: 60_000 })
})
