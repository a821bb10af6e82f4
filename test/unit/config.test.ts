/** Settings read from the environment where they combine several variables: the OpenID Connect provider, batch sizes. */
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Option, Redacted } from "effect"
import { settingsConfig } from "../../src/config/LedgerConfig.ts"

const read = (env: Record<string, string>) => Effect.exit(settingsConfig.parse(ConfigProvider.fromEnvRecord(env)))

describe("LedgerConfig", () => {
  it.effect("LEDGER_BUILDER_BATCH_SIZE: 4,000 with PostgreSQL, 500 embedded (on the serving thread), or as set; LEDGER_BUILDER_BATCH_MB", () =>
    Effect.gen(function*() {
      const batch = (env: Record<string, string>) =>
        Effect.map(read(env), (exit) => Exit.isSuccess(exit) ? [exit.value.builderBatchSize, exit.value.builderBatchBytes] : String(exit.cause))
      assert.deepStrictEqual(yield* batch({ DATABASE_URL: "postgres://ledger@db/ledger" }), [4_000, 32 * 1024 * 1024])
      assert.deepStrictEqual(yield* batch({}), [500, 32 * 1024 * 1024])
      assert.deepStrictEqual(yield* batch({ LEDGER_BUILDER_BATCH_SIZE: "1000", LEDGER_BUILDER_BATCH_MB: "8" }), [1_000, 8 * 1024 * 1024])
    }))

  it.effect("LEDGER_OIDC_*: none by default; read together; refused when incomplete, not a URL, or plain http off loopback", () =>
    Effect.gen(function*() {
      const none = yield* read({})
      assert.isTrue(Exit.isSuccess(none) && Option.isNone(none.value.oidc))

      const full = yield* read({
        LEDGER_OIDC_ISSUER: "https://idp.example/",
        LEDGER_OIDC_CLIENT_ID: "ledger",
        LEDGER_OIDC_CLIENT_SECRET: "s3cret",
        LEDGER_OIDC_ALLOWED_DOMAINS: "Acme.example, ops.acme.example"
      })
      if (!Exit.isSuccess(full)) return assert.fail(String(full.cause))
      const oidc = Option.getOrThrow(full.value.oidc)
      // as written: discovery checks it against the issuer the provider names itself
      assert.strictEqual(oidc.issuer, "https://idp.example/")
      assert.deepStrictEqual(oidc.allowedDomains, ["acme.example", "ops.acme.example"])
      assert.strictEqual(oidc.clientId, "ledger")
      assert.strictEqual(Redacted.value(Option.getOrThrow(oidc.clientSecret)), "s3cret")

      const refused = [
        [{ LEDGER_OIDC_ISSUER: "https://idp.example" }, "LEDGER_OIDC_CLIENT_ID is required when LEDGER_OIDC_ISSUER is set"],
        [{ LEDGER_OIDC_CLIENT_ID: "ledger" }, "need LEDGER_OIDC_ISSUER"],
        [{ LEDGER_OIDC_ISSUER: "idp.example", LEDGER_OIDC_CLIENT_ID: "ledger" }, "LEDGER_OIDC_ISSUER is not a URL"],
        [{ LEDGER_OIDC_ISSUER: "http://idp.example", LEDGER_OIDC_CLIENT_ID: "ledger" }, "must use https (plain http only on loopback)"]
      ] as const
      for (const [env, message] of refused) {
        const exit = yield* read(env)
        if (!Exit.isFailure(exit)) return assert.fail(`accepted: ${JSON.stringify(env)}`)
        assert.include(Cause.pretty(exit.cause), message)
      }
      const loopback = yield* read({ LEDGER_OIDC_ISSUER: "http://127.0.0.1:9000", LEDGER_OIDC_CLIENT_ID: "ledger" })
      assert.isTrue(Exit.isSuccess(loopback))
    }))

  it.effect("LEDGER_REDIS_CLUSTER: host:port or URLs; REDIS_URL defaults to its first node; LEDGER_GATEWAY_WORKERS from 1 to 64", () =>
    Effect.gen(function*() {
      const none = yield* read({})
      if (!Exit.isSuccess(none)) return assert.fail(String(none.cause))
      assert.deepStrictEqual(none.value.redisCluster, [])
      assert.isTrue(Option.isNone(none.value.redisUrl))
      assert.strictEqual(none.value.gatewayWorkers, 1)

      const cluster = yield* read({ LEDGER_REDIS_CLUSTER: "10.0.0.1:7000, redis://:pw@10.0.0.2:7001,", LEDGER_GATEWAY_WORKERS: "4" })
      if (!Exit.isSuccess(cluster)) return assert.fail(String(cluster.cause))
      assert.deepStrictEqual(cluster.value.redisCluster.map(Redacted.value), ["redis://10.0.0.1:7000", "redis://:pw@10.0.0.2:7001"])
      assert.strictEqual(Redacted.value(Option.getOrThrow(cluster.value.redisUrl)), "redis://10.0.0.1:7000")
      assert.strictEqual(cluster.value.gatewayWorkers, 4)

      const both = yield* read({ LEDGER_REDIS_CLUSTER: "10.0.0.1:7000", REDIS_URL: "redis://10.0.0.9:6379" })
      if (!Exit.isSuccess(both)) return assert.fail(String(both.cause))
      assert.strictEqual(Redacted.value(Option.getOrThrow(both.value.redisUrl)), "redis://10.0.0.9:6379")

      for (const workers of ["0", "65", "1.5"]) {
        const refused = yield* read({ LEDGER_GATEWAY_WORKERS: workers })
        assert.isTrue(Exit.isFailure(refused), `LEDGER_GATEWAY_WORKERS=${workers}`)
      }
    }))

  it.effect("LEDGER_CAPTURE_SHARDS: 1 by default, 1 to 64", () =>
    Effect.gen(function*() {
      const none = yield* read({})
      if (!Exit.isSuccess(none)) return assert.fail(String(none.cause))
      assert.strictEqual(none.value.captureShards, 1)
      const eight = yield* read({ LEDGER_CAPTURE_SHARDS: "8" })
      if (!Exit.isSuccess(eight)) return assert.fail(String(eight.cause))
      assert.strictEqual(eight.value.captureShards, 8)
      for (const shards of ["0", "65", "2.5", "many"]) {
        const refused = yield* read({ LEDGER_CAPTURE_SHARDS: shards })
        assert.isTrue(Exit.isFailure(refused), `LEDGER_CAPTURE_SHARDS=${shards}`)
      }
    }))

  it.effect("a setting that cannot be used fails with a ConfigError naming it, not a defect", () =>
    Effect.gen(function*() {
      const unusable: ReadonlyArray<Record<string, string>> = [
        { LEDGER_CAPTURE_SHARDS: "0" },
        { LEDGER_UPSTREAMS: "nameless" },
        { LEDGER_RETENTION_DAYS: "-1" },
        { LEDGER_OIDC_CLIENT_ID: "ledger" },
        { LEDGER_PUBLIC_URL: "ledger.example" },
        { LEDGER_OPENAI_BASE_URL: "not a url" }
      ]
      for (const env of unusable) {
        const exit = yield* read(env)
        if (Exit.isSuccess(exit)) return assert.fail(`${JSON.stringify(env)} was accepted`)
        assert.isFalse(Cause.hasDies(exit.cause), `${JSON.stringify(env)}: ${Cause.pretty(exit.cause)}`)
        const error = Cause.squash(exit.cause) as { readonly _tag?: string; readonly message: string }
        assert.strictEqual(error._tag, "ConfigError")
        assert.include(error.message, Object.keys(env)[0]!.startsWith("LEDGER_OIDC") ? "LEDGER_OIDC_ISSUER" : Object.keys(env)[0]!)
      }
    }))
})
