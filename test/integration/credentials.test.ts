/**
 * Credentials: distinct kinds, revocation within 5 s, expiry, only hashes at rest.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Authenticator, CACHE_TTL_MS } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { storeWithPoolLayer } from "../support/stack.ts"

const refusedWith = (exit: Exit.Exit<unknown, unknown>, message: string) => {
  assert.isTrue(Exit.isFailure(exit), "expected a refusal")
  assert.include(String(Exit.isFailure(exit) ? (exit.cause as any).reasons?.[0]?.error?.message ?? exit.cause : ""), message)
}

describe("credentials", () => {
  layer(storeWithPoolLayer("postgres"))("tokens", (it) => {
    it.effect("PAT and Gateway Key have visible prefixes, 256-bit bodies, and are refused by the other surface", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const auth = yield* Authenticator
        const boot = yield* credentials.bootstrap({ tenant: "t1", workspace: "w", email: "a@t1.test", role: "member" })
        assert.match(boot.pat, /^ldg_pat_[A-Za-z0-9_-]{43}$/)
        assert.match(boot.gateway_key, /^ldg_gw_[A-Za-z0-9_-]{43}$/)
        assert.strictEqual(Buffer.from(boot.pat.slice(8), "base64url").length, 32)

        const principal = yield* auth.authenticate(boot.pat, "pat")
        assert.deepInclude(principal, { tenant_id: boot.tenant_id, workspace_id: boot.workspace_id, user_id: boot.user_id, kind: "pat", role: "member" })
        assert.strictEqual((yield* auth.authenticate(boot.gateway_key, "gateway")).kind, "gateway")

        refusedWith(yield* Effect.exit(auth.authenticate(boot.gateway_key, "pat")), "Personal Access Token is required")
        refusedWith(yield* Effect.exit(auth.authenticate(boot.pat, "gateway")), "Gateway Key is required")
        refusedWith(yield* Effect.exit(auth.authenticate(undefined, "pat")), "missing bearer token")
        refusedWith(yield* Effect.exit(auth.authenticate("ldg_pat_" + "x".repeat(43), "pat")), "unknown token")
        refusedWith(yield* Effect.exit(auth.authenticate("garbage", "pat")), "unknown token")
      }))

    it.effect("a revoked token is refused once the cache entry expires (< 5 s)", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const auth = yield* Authenticator
        yield* credentials.bootstrap({ tenant: "t2", workspace: "w", email: "b@t2.test", role: "member" })
        const created = yield* credentials.createToken({ email: "b@t2.test", workspace: "w", kind: "pat" })
        yield* auth.authenticate(created.token, "pat")
        assert.isTrue(yield* credentials.revoke(created.token_id))
        assert.isFalse(yield* credentials.revoke(created.token_id), "second revoke finds nothing active")
        // within the cache window it may still pass; after it, refused — the window is below the 5 s promise
        assert.isBelow(CACHE_TTL_MS, 5_000)
        yield* TestClock.adjust(CACHE_TTL_MS + 1)
        refusedWith(yield* Effect.exit(auth.authenticate(created.token, "pat")), "token revoked")
      }))

    it.effect("an expired token is refused", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const auth = yield* Authenticator
        const pool = yield* SqlClient.SqlClient
        yield* credentials.bootstrap({ tenant: "t3", workspace: "w", email: "c@t3.test", role: "member" })
        const created = yield* credentials.createToken({ email: "c@t3.test", workspace: "w", kind: "gateway", expiresAt: new Date(Date.now() + 60_000) })
        yield* pool`UPDATE credentials SET expires_at = now() - interval '1 second' WHERE token_id = ${created.token_id}`
        // expiry is compared with the clock: use the live one, as the database's now() is wall time
        refusedWith(yield* Effect.exit(TestClock.withLive(auth.authenticate(created.token, "gateway"))), "token expired")
      }))

    it.effect("plaintext is never stored: only sha256 and a short display prefix", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const pool = yield* SqlClient.SqlClient
        const boot = yield* credentials.bootstrap({ tenant: "t4", workspace: "w", email: "d@t4.test", role: "restricted" })
        const rows = yield* pool<Record<string, unknown>>`SELECT * FROM credentials WHERE tenant_id = ${boot.tenant_id}`
        assert.strictEqual(rows.length, 2)
        const dump = JSON.stringify(rows, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v))
        for (const token of [boot.pat, boot.gateway_key]) {
          assert.notInclude(dump, token)
          assert.notInclude(dump, token.slice(12), "no substring of the secret body beyond the display prefix")
          const hash = Crypto.createHash("sha256").update(token).digest("hex")
          assert.include(dump, hash)
        }
        // a token for a workspace the user is not in is refused
        const missing = yield* Effect.exit(credentials.createToken({ email: "d@t4.test", workspace: "nope", kind: "pat" }))
        assert.isTrue(Exit.isFailure(missing))
      }))
  })
})
