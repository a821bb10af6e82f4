/**
 * `ledger serve` with the capture stream in shards (LEDGER_CAPTURE_SHARDS) and two gateway workers, as an operator runs
 * it: calls of several workspaces through the gateway (the `openai` SDK), each workspace's captures published to its
 * shard by whichever worker took the call, built by the builder thread holding the shards' leases — every answered
 * call a decision once, every shard used, a clean stop.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { shardIndex } from "../../src/capture/CaptureShards.ts"
import { assertNothingLost, callLoad } from "../support/call-load.ts"
import { testDatabase } from "../support/db.ts"
import { redisAdmin, TEST_REDIS_URL } from "../support/redis.ts"
import { serveProcess, stopsCleanly } from "../support/serve-process.ts"

const LEDGER = Path.resolve(import.meta.dirname, "../../bin/ledger.js")
const SHARDS = 3

interface Workspace {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly gateway_key: string
}

const bootstrap = (databaseUrl: string, n: number) =>
  Effect.promise(() =>
    new Promise<Workspace>((resolve, reject) =>
      ChildProcess.execFile(
        process.execPath,
        [LEDGER, "admin", "bootstrap", "--tenant", `shards-${n}`, "--workspace", "main", "--email", `ops-${n}@shards.test`, "--json"],
        { env: { ...process.env, DATABASE_URL: databaseUrl } },
        (error, stdout, stderr) => error === null ? resolve(JSON.parse(stdout)) : reject(new Error(`${error.message}\n${stderr}`))
      )
    )
  )

describe("ledger serve with capture stream shards", () => {
  it.live("calls of several workspaces reach their shards through two gateway workers; each a decision once", () =>
    Effect.gen(function*() {
      const database = yield* testDatabase
      const serve = yield* serveProcess({
        databaseUrl: database.url,
        redisUrl: TEST_REDIS_URL,
        args: ["--gateway-workers", "2"],
        env: { LEDGER_CAPTURE_SHARDS: String(SHARDS), LEDGER_BUILDER_CONSUMERS: "1" }
      })
      // workspaces (their tenant ids are random) until every shard has one
      const workspaces: Array<Workspace> = []
      while (new Set(workspaces.map((workspace) => shardIndex(workspace, SHARDS))).size < SHARDS) {
        workspaces.push(yield* bootstrap(database.url, workspaces.length))
      }

      const loads = yield* Effect.forEach(workspaces, (workspace) =>
        callLoad(serve.gatewayUrl, workspace.gateway_key, { concurrency: 2, connectionPerCall: true }))
      while (loads.some((load) => load.answered.length < 40)) yield* Effect.sleep(20)
      for (const load of loads) assert.isAtLeast(yield* assertNothingLost(load, database.url), 40)

      // every shard's group read captures
      const redis = yield* redisAdmin
      for (let shard = 0; shard < SHARDS; shard++) {
        const key = shard === 0 ? serve.streamKey : `${serve.streamKey}:${shard}`
        const [group] = yield* Effect.promise(() => redis.xInfoGroups(key))
        assert.isAbove(Number(group!["entries-read"]), 0, `shard ${shard} was read`)
      }
      assert.match(serve.output(), /builder shards changed/)
      yield* stopsCleanly(serve)
    }), { timeout: 120_000 })
})
