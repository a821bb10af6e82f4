/**
 * Embedded mode's first start (README, "Run it"): bootstrap a default tenant, workspace and user, and write their
 * credentials to `<data dir>/credentials.json` (mode 0600). Later starts reuse the file.
 */
import { Console, Effect, Layer, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { AppSessions } from "../auth/AppSessions.ts"
import { Credentials } from "../auth/Credentials.ts"

export const DEFAULT_TENANT = "default"
export const DEFAULT_WORKSPACE = "default"
export const DEFAULT_EMAIL = "admin@localhost"

export const credentialsPath = (dataDir: string) => Path.join(dataDir, "credentials.json")

export const FirstRunLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* LedgerConfig
  const file = credentialsPath(config.dataDir)
  const urls = {
    api_url: config.publicUrl,
    gateway_url: `http://${config.host}:${config.gatewayPort}/v1`,
    mcp_url: `${config.publicUrl}/mcp`
  }
  if (Option.isSome(config.databaseUrl) || Fs.existsSync(file)) {
    yield* Console.log(`ledger: API ${urls.api_url}  gateway ${urls.gateway_url}  MCP ${urls.mcp_url}`)
    return
  }
  const credentials = yield* Credentials
  const created = yield* credentials.bootstrap({
    tenant: DEFAULT_TENANT,
    workspace: DEFAULT_WORKSPACE,
    email: DEFAULT_EMAIL,
    role: "member"
  })
  // the bootstrapped admin has no password yet: a one-time link signs them in to the app (docs/mcp-and-app.md, "The app")
  const signInToken = yield* AppSessions.use((sessions) => sessions.createSignInLink(created))
  yield* Effect.sync(() => {
    Fs.mkdirSync(config.dataDir, { recursive: true })
    // write to a temp file with 0600 first, so the secret never exists with wider permissions
    const tmp = `${file}.${process.pid}.tmp`
    Fs.writeFileSync(tmp, JSON.stringify({ ...created, ...urls }, null, 2) + "\n", { mode: 0o600 })
    Fs.renameSync(tmp, file)
  })
  yield* Console.log(
    [
      "ledger: first start in embedded mode — created tenant/workspace \"default\" and user admin@localhost",
      `  API      ${urls.api_url}   (REST /v1, docs ${urls.api_url}/docs)`,
      `  MCP      ${urls.mcp_url}`,
      `  gateway  ${urls.gateway_url}`,
      `  credentials (Personal Access Token and Gateway Key): ${file}`,
      `  app      ${config.publicUrl}/  — sign in once with ${config.publicUrl}/signin/link?token=${signInToken} (valid 24 h)`
    ].join("\n")
  )
}))
