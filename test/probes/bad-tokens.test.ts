/**
 * Probe: guessing tokens. After BAD_TOKENS_PER_MINUTE refused tokens from one address, every surface — REST, MCP and
 * the gateway — answers that address's unknown tokens with a 429 in its own shape (with Retry-After where the shape
 * has headers) before looking them up, while a token the store accepted before keeps working.
 */
import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { BAD_TOKENS_PER_MINUTE } from "../../src/auth/Authenticator.ts"
import { type AppStack, appStack } from "../support/app-stack.ts"

class Site extends Context.Service<Site, AppStack>()("test/probes/GuessedSite") {}

interface Probe {
  readonly status: number
  readonly retryAfter: string | null
  readonly body: any
}

const send = (url: string, token: string, init: { readonly method?: string; readonly body?: unknown } = {}) =>
  Effect.promise(async (): Promise<Probe> => {
    const response = await fetch(url, {
      method: init.method ?? "GET",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-service-provider-api-key": "sk-provider-probe"
      },
      body: init.body === undefined ? null : JSON.stringify(init.body)
    })
    const text = await response.text()
    return { status: response.status, retryAfter: response.headers.get("retry-after"), body: text.startsWith("{") ? JSON.parse(text) : text }
  })

const guess = (prefix: string) => `${prefix}${Crypto.randomBytes(24).toString("base64url")}`

layer(Layer.effect(Site, appStack()), { timeout: 120_000, excludeTestServices: true })("bad tokens", (it) => {
  it.effect("are limited per address on every surface; a token accepted before goes on", () =>
    Effect.gen(function*() {
      const site = yield* Site
      const { pat, gatewayKey } = site.gateway
      const surfaces = {
        rest: (token: string) => send(`${site.baseUrl}/v1/agents`, token),
        mcp: (token: string) => send(`${site.baseUrl}/mcp`, token, { method: "POST", body: { jsonrpc: "2.0", id: 1, method: "ping" } }),
        gateway: (token: string) =>
          send(`${site.gateway.baseURL}/chat/completions?agent_id=probe`, token, {
            method: "POST",
            body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "ping" }] }
          })
      }
      // the real tokens are used once before the guessing starts
      assert.strictEqual((yield* surfaces.rest(pat)).status, 200)
      assert.strictEqual((yield* surfaces.mcp(pat)).status, 200)
      assert.strictEqual((yield* surfaces.gateway(gatewayKey)).status, 200)

      const prefixes = { rest: "ldg_pat_", mcp: "ldg_pat_", gateway: "ldg_gw_" }
      for (const [name, call] of Object.entries(surfaces)) {
        let answer: Probe | undefined
        for (let attempt = 0; attempt <= BAD_TOKENS_PER_MINUTE; attempt++) {
          answer = yield* call(guess(prefixes[name as keyof typeof prefixes]))
          if (answer.status === 429) break
          assert.strictEqual(answer.status, 401, `${name}: a guess is refused`)
        }
        assert.strictEqual(answer?.status, 429, `${name}: limited within ${BAD_TOKENS_PER_MINUTE + 1} guesses`)
        assert.match(JSON.stringify(answer?.body), /too many refused/i, name)
        if (name !== "gateway") assert.isAtLeast(Number(answer?.retryAfter), 1, `${name}: Retry-After`)
      }
      assert.strictEqual((yield* surfaces.rest(guess("ldg_pat_"))).body.error.code, "rate_limited", "REST's error shape")
      assert.strictEqual((yield* surfaces.gateway(guess("ldg_gw_"))).body.error.code, "rate_limited", "the gateway's error shape")
      assert.strictEqual((yield* surfaces.mcp(guess("ldg_pat_"))).body.jsonrpc, "2.0", "MCP's error shape")

      // known tokens go on
      assert.strictEqual((yield* surfaces.rest(pat)).status, 200)
      assert.strictEqual((yield* surfaces.mcp(pat)).status, 200)
      assert.strictEqual((yield* surfaces.gateway(gatewayKey)).status, 200)
    }))
})
