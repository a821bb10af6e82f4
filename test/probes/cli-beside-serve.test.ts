/**
 * Probe: the command line beside a running embedded `ledger serve` (`npm start`). The data directory is one
 * process's: every `ledger admin …` command runs inside serve and its result works at once (a created PAT answers
 * 200, a revoked key is refused within 5 s, a sign-in link signs in once); every other command that opens the
 * database, and a second serve, refuses at once in one line; after a restart nothing is lost and `ledger verify`
 * passes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { embeddedServe, exited, healthy, ledger, signInTwice } from "../support/ledger-cli.ts"
import { freePort } from "../support/ports.ts"
import { tempDir } from "../support/stack.ts"

/** The status `path` answers with `token` as bearer. */
const status = (base: string, path: string, token: string) =>
  Effect.promise(() => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status))

/** The status once `path` stops answering 200 to `token`, polled for at most `ms`. */
const refusedWithin = (base: string, path: string, token: string, ms: number) =>
  Effect.promise(async () => {
    const until = Date.now() + ms
    let last = 200
    while (last === 200 && Date.now() < until) {
      last = (await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } })).status
      if (last === 200) await new Promise((resolve) => setTimeout(resolve, 250))
    }
    return last
  })

describe("the command line beside a running embedded serve", () => {
  it.live("admin commands run in it and work at once; other commands and a second serve refuse in one line; a restart finds everything and verify passes", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const env = { LEDGER_DATA_DIR: dataDir }
      const first = yield* embeddedServe(dataDir)
      const admin = (args: ReadonlyArray<string>) =>
        Effect.map(ledger(["admin", ...args], env), (run) => {
          assert.strictEqual(run.code, 0, `ledger admin ${args.join(" ")}: ${run.stderr}`)
          return run.stdout
        })

      const boot = JSON.parse(yield* admin(["bootstrap", "--tenant", "acme", "--workspace", "ops", "--email", "ann@acme.test", "--json"]))
      assert.deepStrictEqual(Object.keys(boot), ["tenant_id", "workspace_id", "user_id", "pat", "gateway_key"])
      assert.strictEqual(yield* status(first.apiUrl, "/v1/agents", boot.pat), 200, "bootstrap's PAT answers at once")
      assert.strictEqual(yield* status(first.gatewayUrl, "/v1/models", boot.gateway_key), 200, "and its Gateway Key")

      const pat = JSON.parse(yield* admin(["token", "create", "--email", "ann@acme.test", "--workspace", "ops", "--kind", "pat", "--json"]))
      assert.deepStrictEqual(Object.keys(pat), ["token_id", "token"])
      assert.strictEqual(yield* status(first.apiUrl, "/v1/agents", pat.token), 200, "a created PAT answers at once")

      const key = JSON.parse(yield* admin(["token", "create", "--email", "ann@acme.test", "--workspace", "ops", "--kind", "gateway", "--json"]))
      assert.strictEqual(yield* status(first.gatewayUrl, "/v1/models", key.token), 200, "a created Gateway Key answers at once")
      assert.include(yield* admin(["token", "revoke", key.token_id]), `revoked ${key.token_id}`)
      assert.strictEqual(yield* refusedWithin(first.gatewayUrl, "/v1/models", key.token, 8_000), 401, "the revoked key is refused within 5 seconds")
      const again = yield* ledger(["admin", "token", "revoke", key.token_id], env)
      assert.strictEqual(again.code, 1, "a failure in the server is the command's failure")
      assert.strictEqual(again.stderr.trim(), `no active token ${key.token_id}`)

      const { url } = JSON.parse(yield* admin(["signin-link", "--email", "ann@acme.test", "--workspace", "ops", "--json"]))
      assert.strictEqual(new URL(url).origin, first.apiUrl, "the link is the server's")
      assert.deepStrictEqual(yield* signInTwice(url), [303, 404], "the link signs in, once")

      const policy = JSON.parse(yield* admin(["content-policy", "--workspace", "acme/ops", "--set", "metadata", "--json"]))
      assert.strictEqual(policy[0].content_policy, "metadata")

      // what would open the database itself refuses at once, in one line
      const holds = /^ledger serve \(pid \d+\) holds the data directory \S+: stop it first/
      for (const args of [["migrate"], ["verify"], ["checkpoint"], ["export", "--format", "jsonl"], ["erase", "--agent", "nobody"], ["rebuild"]]) {
        const started = Date.now()
        const refused = yield* ledger(args, env)
        assert.strictEqual(refused.code, 1, `ledger ${args.join(" ")}: ${refused.stdout}${refused.stderr}`)
        assert.strictEqual(refused.stdout, "", `ledger ${args.join(" ")}`)
        assert.lengthOf(refused.stderr.trim().split("\n"), 1, refused.stderr)
        assert.match(refused.stderr, holds)
        assert.isBelow(Date.now() - started, 15_000, `ledger ${args.join(" ")} refuses at once`)
      }
      const [apiPort, gatewayPort] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
      const second = yield* ledger(["serve"], { ...env, LEDGER_API_PORT: String(apiPort), LEDGER_GATEWAY_PORT: String(gatewayPort) }, 30_000)
      assert.strictEqual(second.code, 1, second.stdout + second.stderr)
      assert.lengthOf(second.stderr.trim().split("\n"), 1, second.stderr)
      assert.match(second.stderr, holds, "a second serve on the directory refuses")
      assert.isTrue(yield* healthy(`${first.apiUrl}/readyz`), "and the first one is undisturbed")

      first.child.kill("SIGTERM")
      yield* exited(first.child).pipe(Effect.timeout("15 seconds"))
      assert.isFalse(Fs.existsSync(Path.join(dataDir, "ledger.lock")), "serve lets the directory go when it stops")

      const restarted = yield* embeddedServe(dataDir)
      assert.strictEqual(yield* status(restarted.apiUrl, "/v1/agents", pat.token), 200, "the created PAT survived the restart")
      assert.strictEqual(yield* status(restarted.apiUrl, "/v1/agents", boot.pat), 200, "and bootstrap's")
      assert.strictEqual(yield* status(restarted.gatewayUrl, "/v1/models", key.token), 401, "the revoked key stays revoked")
      assert.strictEqual(JSON.parse(yield* admin(["content-policy", "--workspace", "acme/ops", "--json"]))[0].content_policy, "metadata")
      restarted.child.kill("SIGTERM")
      yield* exited(restarted.child).pipe(Effect.timeout("15 seconds"))

      // with no serve running, the commands open the database themselves
      const later = JSON.parse(yield* admin(["token", "create", "--email", "ann@acme.test", "--workspace", "ops", "--kind", "pat", "--json"]))
      assert.match(later.token, /^ldg_pat_/)
      const verified = yield* ledger(["verify"], env)
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
      assert.match(verified.stdout, /: OK$/m)
    }).pipe(Effect.scoped), 240_000)
})
