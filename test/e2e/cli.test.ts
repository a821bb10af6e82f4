/**
 * The `ledger` command as users and scripts run it (docs/operations.md, "Commands"): exact `--json` shapes, migrate idempotent,
 * embedded `serve` healthy on both ports with credentials.json (0600), clean exit on SIGTERM. The command line beside a
 * running embedded `serve` is a probe: test/probes/cli-beside-serve.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { testDatabase } from "../support/db.ts"
import { embeddedServe, exited, healthy, ledger, signInTwice } from "../support/ledger-cli.ts"
import { tempDir } from "../support/stack.ts"

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
})
