/**
 * The `ledger` command as users and scripts run it (README, "Commands"): exact `--json` shapes, migrate idempotent,
 * embedded `serve` healthy on both ports with credentials.json (0600), clean exit on SIGTERM, and the command line beside
 * a running embedded `serve` (the data directory is one process's: `admin` runs in serve, the rest refuse).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { testDatabase } from "../support/db.ts"
import { cleanEnv, ledger, LEDGER_BIN as BIN } from "../support/ledger-cli.ts"
import { freePort, spawnOnFreePorts } from "../support/ports.ts"
import { tempDir } from "../support/stack.ts"


const healthy = (url: string) =>
  Effect.promise(() => fetch(url, { signal: AbortSignal.timeout(3_000) }).then((r) => r.ok, () => false))

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

/** Signs in with a one-time link's token twice: the statuses of the two attempts. */
const signInTwice = (link: string) =>
  Effect.promise(async () => {
    const page = await fetch(link)
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!
    const cookie = page.headers.getSetCookie()[0]!.split(";")[0]!
    const token = new URL(link).searchParams.get("token")!
    const signIn = () =>
      fetch(new URL("/signin/link", link), {
        method: "POST",
        redirect: "manual",
        headers: { cookie, origin: new URL(link).origin, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ csrf, token }).toString()
      }).then((response) => {
        if (response.status === 303) assert.strictEqual(response.headers.get("location"), "/account/password")
        return response.status
      })
    return [await signIn(), await signIn()]
  })

/** `ledger serve` with nothing configured (embedded database, in-process stream) on `dataDir`, killed with the scope. */
const embeddedServe = (dataDir: string) =>
  Effect.acquireRelease(
    spawnOnFreePorts(2, async ([apiPort, gatewayPort]) => {
      const started = Date.now()
      const child = spawn(process.execPath, [BIN, "serve"], {
        env: cleanEnv({ LEDGER_DATA_DIR: dataDir, LEDGER_API_PORT: String(apiPort), LEDGER_GATEWAY_PORT: String(gatewayPort) }),
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (d) => (output += d))
      child.stderr.on("data", (d) => (output += d))
      const up = (port: number) => Effect.runPromise(healthy(`http://127.0.0.1:${port}/healthz`))
      while (!(await up(apiPort) && await up(gatewayPort))) {
        if (child.exitCode !== null) throw new Error(`ledger serve exited:\n${output}`)
        if (Date.now() - started > 30_000) {
          child.kill("SIGKILL")
          throw new Error(`not healthy on both ports within 30 s:\n${output}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      return { apiPort, apiUrl: `http://127.0.0.1:${apiPort}`, gatewayUrl: `http://127.0.0.1:${gatewayPort}`, child, output: () => output }
    }),
    ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
  )

const exited = (child: ChildProcess) =>
  Effect.callback<number | null>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
  })

describe("ledger CLI", () => {
  it.live("admin bootstrap / token create / token revoke / signin-link print exactly the documented JSON; migrate is idempotent", () =>
    Effect.gen(function*() {
      const db = yield* testDatabase
      const env = { DATABASE_URL: db.url }

      for (let i = 0; i < 2; i++) {
        const migrated = yield* ledger(["migrate"], env)
        assert.strictEqual(migrated.code, 0, migrated.stderr)
      }

      const boot = yield* ledger(
        ["admin", "bootstrap", "--tenant", "acme", "--workspace", "ops", "--email", "ann@acme.test", "--json"],
        env
      )
      assert.strictEqual(boot.code, 0, boot.stderr)
      const lines = boot.stdout.trim().split("\n")
      assert.strictEqual(lines.length, 1, "one JSON line on stdout")
      const created = JSON.parse(lines[0]!)
      assert.deepStrictEqual(Object.keys(created), ["tenant_id", "workspace_id", "user_id", "pat", "gateway_key"])
      assert.match(created.pat, /^ldg_pat_/)
      assert.match(created.gateway_key, /^ldg_gw_/)

      // bootstrap again reuses tenant/workspace/user and issues new tokens
      const again = JSON.parse((yield* ledger(
        ["admin", "bootstrap", "--tenant", "acme", "--workspace", "ops", "--email", "ann@acme.test", "--role", "restricted", "--json"],
        env
      )).stdout)
      assert.strictEqual(again.tenant_id, created.tenant_id)
      assert.strictEqual(again.user_id, created.user_id)
      assert.notStrictEqual(again.pat, created.pat)

      const token = yield* ledger(["admin", "token", "create", "--email", "ann@acme.test", "--workspace", "ops", "--kind", "gateway", "--json"], env)
      assert.strictEqual(token.code, 0, token.stderr)
      const issued = JSON.parse(token.stdout)
      assert.deepStrictEqual(Object.keys(issued), ["token_id", "token"])
      assert.match(issued.token, /^ldg_gw_/)

      const revoked = yield* ledger(["admin", "token", "revoke", issued.token_id], env)
      assert.strictEqual(revoked.code, 0, revoked.stderr)
      const revokedAgain = yield* ledger(["admin", "token", "revoke", issued.token_id], env)
      assert.notStrictEqual(revokedAgain.code, 0, "revoking twice reports that no active token was found")

      const unknownMember = yield* ledger(["admin", "token", "create", "--email", "nobody@acme.test", "--workspace", "ops", "--kind", "pat", "--json"], env)
      assert.notStrictEqual(unknownMember.code, 0)

      // a one-time app sign-in link for a user without a password
      const link = yield* ledger(["admin", "signin-link", "--email", "ann@acme.test", "--workspace", "ops", "--json"], { ...env, LEDGER_PUBLIC_URL: "https://ledger.example" })
      assert.strictEqual(link.code, 0, link.stderr)
      const { url } = JSON.parse(link.stdout)
      assert.match(url, /^https:\/\/ledger\.example\/signin\/link\?token=[A-Za-z0-9_-]{43}$/)
      const noMember = yield* ledger(["admin", "signin-link", "--email", "nobody@acme.test", "--workspace", "ops"], env)
      assert.notStrictEqual(noMember.code, 0)
    }).pipe(Effect.scoped), 120_000)

  it.live("serve with no database or Redis configured: healthy on both ports, credentials.json 0600, exits on SIGTERM", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const { apiPort, child, output } = yield* embeddedServe(dataDir)
      assert.isTrue(yield* healthy(`http://127.0.0.1:${apiPort}/readyz`), "ready: database and stream reachable")

      const file = Path.join(dataDir, "credentials.json")
      assert.strictEqual(Fs.statSync(file).mode & 0o777, 0o600)
      const credentials = JSON.parse(Fs.readFileSync(file, "utf8"))
      assert.match(credentials.pat, /^ldg_pat_/)
      assert.match(credentials.gateway_key, /^ldg_gw_/)
      assert.include(output(), file, "prints where the credentials are")
      // and a one-time sign-in link to the app for the bootstrapped admin, which signs in once
      const link = /(http:\/\/\S+\/signin\/link\?token=[A-Za-z0-9_-]{43})/.exec(output())![1]!
      assert.deepStrictEqual(yield* signInTwice(link), [303, 404], "the link signs in once")

      const stopping = Date.now()
      child.kill("SIGTERM")
      yield* exited(child).pipe(Effect.timeout("15 seconds"))
      assert.isBelow(Date.now() - stopping, 10_000, "exits promptly on SIGTERM")
      assert.isFalse(yield* healthy(`http://127.0.0.1:${apiPort}/healthz`), "API port closed")
    }).pipe(Effect.scoped), 90_000)

  it.live("beside a running embedded serve: admin commands run in it and work at once; other commands and a second serve refuse in one line; a restart finds everything and verify passes", () =>
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
