/**
 * `ledger serve --roles gateway` as a real process, stopped with SIGTERM while Redis is unreachable: calls in
 * flight are finished, the capture queue is spooled to `<dataDir>/spool/`, and the next start replays the spool
 * into the stream (no capture is lost: on shutdown the queue is drained or spooled). Neither the Gateway Key nor
 * the provider key appears in what the processes log.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Path from "node:path"
import { createClient } from "redis"
import { readSpoolStats } from "../../src/capture/Spool.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { startFakeProviders } from "../support/fake-providers.ts"
import { spawnOnFreePorts } from "../support/ports.ts"
import { TEST_REDIS_URL, tcpProxy, testKeyPrefix } from "../support/redis.ts"
import { storeLayer, tempDir } from "../support/stack.ts"

const ROOT = Path.resolve(import.meta.dirname, "../..")

interface Gateway {
  readonly url: string
  /** SIGTERM, then the exit code */
  readonly stop: Effect.Effect<number | null>
  /** what the process has logged so far */
  readonly stderr: () => string
}

/** Runs the CLI's gateway role; killed with the scope if the test did not stop it. */
const startGateway = (env: Record<string, string>) =>
  Effect.acquireRelease(
    spawnOnFreePorts(2, async ([port, apiPort]) => {
      const child: ChildProcess = spawn(process.execPath, ["bin/ledger.js", "serve", "--roles", "gateway"], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? "", ...env, LEDGER_GATEWAY_PORT: String(port), LEDGER_API_PORT: String(apiPort) },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      const url = `http://127.0.0.1:${port}`
      const deadline = Date.now() + 30_000
      for (;;) {
        if (child.exitCode !== null) throw new Error(`gateway exited: ${stderr.slice(-2000)}`)
        if (await fetch(`${url}/healthz`).then((res) => res.ok, () => false)) break
        if (Date.now() > deadline) {
          child.kill("SIGKILL")
          throw new Error(`gateway did not start: ${stderr.slice(-2000)}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      const stop = Effect.promise(() =>
        new Promise<number | null>((resolve) => {
          if (child.exitCode !== null) return resolve(child.exitCode)
          child.once("exit", (code) => resolve(code))
          child.kill("SIGTERM")
        })
      )
      return { child, gateway: { url, stop, stderr: () => stderr } satisfies Gateway }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
  ).pipe(Effect.map(({ gateway }) => gateway))

const streamIds = (key: string) =>
  Effect.promise(async () => {
    const client = await createClient({ url: TEST_REDIS_URL }).connect()
    try {
      return ((await client.xRange(key, "-", "+")) ?? []).map((entry) => JSON.parse(String(entry.message.c)).ledger_id as string)
    } finally {
      client.destroy()
    }
  })

describe("gateway process shutdown", () => {
  it.live("SIGTERM with Redis away: in-flight calls finish, captures are spooled, the next start replays them", () =>
    Effect.gen(function*() {
      const store = yield* Layer.build(storeLayer("postgres"))
      const databaseUrl = Option.getOrThrow(Context.get(store, LedgerConfig).databaseUrl)
      const boot = yield* Context.get(store, Credentials).bootstrap({ tenant: "shutdown", workspace: "w", email: "ops@shutdown.test", role: "member" })
      const fake = yield* Effect.acquireRelease(Effect.promise(() => startFakeProviders()), (fake) => Effect.promise(() => fake.close()))
      const proxy = yield* tcpProxy
      const streamKey = `${yield* testKeyPrefix("gateway-shutdown")}captures`
      const dataDir = yield* tempDir
      const env = {
        DATABASE_URL: Redacted.value(databaseUrl),
        REDIS_URL: proxy.url,
        LEDGER_STREAM_KEY: streamKey,
        LEDGER_DATA_DIR: dataDir,
        LEDGER_OPENAI_BASE_URL: fake.baseUrls.openai,
        LEDGER_ANTHROPIC_BASE_URL: fake.baseUrls.anthropic,
        // everything logged, to show that no key is
        LEDGER_LOG_LEVEL: "debug"
      }
      const providerKey = "sk-provider-never-logged-7f3a"
      const call = (gateway: Gateway, content: string, model = "openai/gpt-4o") =>
        Effect.promise(async () => {
          const res = await fetch(`${gateway.url}/v1/chat/completions?agent_id=agent-shutdown`, {
            method: "POST",
            headers: { authorization: `Bearer ${boot.gateway_key}`, "content-type": "application/json", "x-service-provider-api-key": providerKey },
            body: JSON.stringify({ model, messages: [{ role: "user", content }] })
          })
          await res.text()
          return { status: res.status, ledgerId: res.headers.get("x-ledger-id")! }
        })

      const first = yield* startGateway(env)
      yield* proxy.stop
      const answered = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => call(first, `quick ${i}`), { concurrency: 4 })
      // a provider error and a translated provider, for the logs below
      answered.push(yield* call(first, "[[error:429]] too fast"), yield* call(first, "hello", "anthropic/claude-haiku-4-5"))
      // one call still waiting on its provider when SIGTERM arrives
      const slow = yield* Effect.forkChild(call(first, "[[slow:600]] finish me"))
      yield* Effect.sleep(150)
      const stopping = Date.now()
      const code = yield* first.stop
      const last = yield* Effect.promise(() => new Promise<{ status: number; ledgerId: string }>((resolve) => slow.addObserver((exit) => exit._tag === "Success" && resolve(exit.value))))
      // runMain exits with 130 when the program is interrupted by the signal; 1 would be a failure
      assert.include([0, 130], code, "clean exit")
      assert.isBelow(Date.now() - stopping, 10_000, "shutdown does not wait for idle keep-alive connections")
      assert.strictEqual(last.status, 200, "the in-flight call was finished")
      assert.deepStrictEqual(answered.map((answer) => answer.status), [...Array(20).fill(200), 429, 200])
      const ids = [...answered.map((answer) => answer.ledgerId), last.ledgerId]
      assert.strictEqual(readSpoolStats(dataDir).entries, ids.length, "every capture spooled on shutdown")

      yield* proxy.start
      const second = yield* startGateway(env)
      const deadline = Date.now() + 20_000
      let published: Array<string> = []
      while (Date.now() < deadline) {
        published = yield* streamIds(streamKey)
        if (published.length >= ids.length && readSpoolStats(dataDir).entries === 0) break
        yield* Effect.sleep(100)
      }
      assert.deepStrictEqual([...published].sort(), [...ids].sort(), "replayed into the stream, once each")
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
      assert.include([0, 130], yield* second.stop)
      // neither key appears in anything either process logged (at debug level, Redis away and back, a provider error)
      for (const gateway of [first, second]) {
        assert.isAbove(gateway.stderr().length, 0)
        assert.notInclude(gateway.stderr(), providerKey)
        assert.notInclude(gateway.stderr(), boot.gateway_key)
      }
    }), { timeout: 90_000 })
})
