/**
 * The app on the API port (docs/mcp-and-app.md, "The app"): sign-up and sign-in, the ledger's views as pages, Admin → API Keys,
 * Members and Pipeline, and the assets they load. Handlers live in ./routes (account, ledger, admin); pages in
 * ./pages; what protects a browser (cookies, CSRF, origin)  in ../auth/browser.ts.
 *
 *   GET  /signin, POST /signin              password sign-in (limited per account and address)
 *   GET  /signin/link?token=, POST          one-time sign-in link (the first run prints one)
 *   GET  /signup[?invitation=], POST        sign-up (LEDGER_SIGNUP) or joining by invitation; keys shown once
 *   POST /signout
 *   GET  /account/password, POST            set one's password (after a sign-in link)
 *   GET  /account/workspaces, POST, POST /account/workspaces/switch   one's workspaces: switch, create (admins)
 *   GET  /, /agents/:id, /sessions/:id, /decisions/:id, /decisions, /pulse, /features/:id, /graph   the views
 *   GET  /admin/api-keys, POST /admin/api-keys, POST /admin/api-keys/revoke
 *   GET  /admin/members, POST /admin/members/{invite,role,remove}
 *   GET  /admin/pipeline, /admin/pipeline.json
 *   GET  /app/app.css, /app/views.js, /app/app.js
 */
import { Effect, Layer, Option } from "effect"
import { HttpRouter, type HttpServerRequest, type HttpServerResponse } from "effect/http"
import { Accounts } from "../auth/Accounts.ts"
import { AppSessions, AppSweeper } from "../auth/AppSessions.ts"
import { Credentials } from "../auth/Credentials.ts"
import { LedgerConfig, type LedgerSettings } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { ViewsServices } from "../views/loadView.ts"
import { PipelineStatus } from "../ops/Status.ts"
import { ASSETS, assetResponse } from "./assets.ts"
import { cookieNames } from "../auth/browser.ts"
import { type AppContext, forBrowsers } from "./context.ts"
import { VIEW_PATHS } from "./paths.ts"
import { accountHandlers } from "./routes/account.ts"
import { adminHandlers } from "./routes/admin.ts"
import { ledgerHandlers } from "./routes/ledger.ts"
import { SignInLimiter } from "../auth/SignInLimiter.ts"

/** Where callers reach the gateway, for the setup snippets: LEDGER_GATEWAY_URL, else the public host with the gateway's port. */
const gatewayUrlOf = (config: LedgerSettings) =>
  Option.getOrElse(config.gatewayUrl, () => `http://${new URL(config.publicUrl).hostname}:${config.gatewayPort}`)

type PageHandler = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, DatabaseUnavailable>

const routes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const config = yield* LedgerConfig
  const context: AppContext = {
    config,
    names: cookieNames(config.publicUrl),
    accounts: yield* Accounts,
    sessions: yield* AppSessions,
    credentials: yield* Credentials,
    limiter: yield* SignInLimiter,
    setup: { gatewayUrl: gatewayUrlOf(config), apiUrl: config.publicUrl }
  }
  const services = yield* Effect.context<ViewsServices>()
  const account = accountHandlers(context)
  const ledger = ledgerHandlers(context, services)
  const admin = adminHandlers(context, yield* PipelineStatus)

  const pages: ReadonlyArray<readonly ["GET" | "POST", HttpRouter.PathInput, PageHandler]> = [
    ["GET", "/signin", account.signInGet],
    ["POST", "/signin", account.signInPost],
    ["GET", "/signin/link", account.linkGet],
    ["POST", "/signin/link", account.linkPost],
    ["GET", "/signup", account.signUpGet],
    ["POST", "/signup", account.signUpPost],
    ["POST", "/signout", account.signOut],
    ["GET", "/account/password", account.passwordGet],
    ["POST", "/account/password", account.passwordPost],
    ["GET", "/account/workspaces", account.workspacesGet],
    ["POST", "/account/workspaces", account.workspaceCreate],
    ["POST", "/account/workspaces/switch", account.workspaceSwitch],
    ...Object.values(VIEW_PATHS).map((path) => ["GET", path as HttpRouter.PathInput, ledger.viewPage] as const),
    ["GET", "/admin/api-keys", admin.keysGet],
    ["POST", "/admin/api-keys", admin.keysCreate],
    ["POST", "/admin/api-keys/revoke", admin.keysRevoke],
    ["GET", "/admin/members", admin.membersGet],
    ["POST", "/admin/members/invite", admin.membersInvite],
    ["POST", "/admin/members/role", admin.membersRole],
    ["POST", "/admin/members/remove", admin.membersRemove],
    ["GET", "/admin/pipeline", admin.pipelineGet],
    ["GET", "/admin/pipeline.json", admin.pipelineJson]
  ]
  for (const path of Object.keys(ASSETS)) yield* router.add("GET", path as HttpRouter.PathInput, () => Effect.succeed(assetResponse(path)))
  for (const [method, path, handler] of pages) yield* router.add(method, path, forBrowsers(handler))
}))

/** The app's routes and the sweeper of its expired sessions, links and invitations. */
export const AppRoutes = Layer.merge(routes, AppSweeper).pipe(Layer.provide(PipelineStatus.layer))
