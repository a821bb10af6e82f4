/**
 * What the app's handlers share, assembled once by AppRoutes: settings, the cookie names, the account services and
 * the way each handler answers a browser (a page for people, never a bare error).
 */
import { Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Accounts } from "../auth/Accounts.ts"
import type { AppSessions } from "../auth/AppSessions.ts"
import type { Credentials } from "../auth/Credentials.ts"
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { type CookieNames, type SignedIn, signedIn } from "../auth/browser.ts"
import { html, notice, page, pageResponse } from "./html.ts"
import type { Setup } from "./pages/account.ts"
import type { SignInLimiter } from "../auth/SignInLimiter.ts"

export interface AppContext {
  readonly config: LedgerSettings
  readonly names: CookieNames
  readonly accounts: Accounts["Service"]
  readonly sessions: AppSessions["Service"]
  readonly credentials: Credentials["Service"]
  readonly limiter: SignInLimiter["Service"]
  readonly setup: Setup
}

const MAX_FORM_BYTES = 64 * 1024

/** A form post's fields (the first of a repeated one); an oversized or non-form body reads as empty. */
export const readForm = (request: HttpServerRequest.HttpServerRequest) =>
  Number(request.headers["content-length"] ?? 0) > MAX_FORM_BYTES ||
    !(request.headers["content-type"] ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded")
    ? Effect.succeed(new URLSearchParams())
    : request.text.pipe(
      Effect.map((text) => new URLSearchParams(text.length > MAX_FORM_BYTES ? "" : text)),
      Effect.orElseSucceed(() => new URLSearchParams())
    )

/** A page that only says something (an error, a refusal), with the status it goes out with. */
export const messagePage = (title: string, message: string, status: number, signedInAs?: SignedIn) =>
  pageResponse(
    page({
      title,
      ...(signedInAs ? { user: frameUser(signedInAs) } : {}),
      body: html`<section class="card">${notice(message)}<p><a href="/">Back to the ledger</a></p></section>`
    }),
    status
  )

export const frameUser = (signed: SignedIn) => ({
  email: signed.member.email,
  workspace: signed.member.workspace_name,
  admin: signed.member.admin,
  operator: signed.member.operator,
  csrf: signed.csrf
})

type Handler<E, R> = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/** A browser route: a database outage becomes a page saying so (503), never a bare error. */
export const forBrowsers = <R>(handler: Handler<DatabaseUnavailable, R>): Handler<never, R> => (request) =>
  handler(request).pipe(
    Effect.catchTag("DatabaseUnavailable", () =>
      Effect.succeed(HttpServerResponse.setHeader(
        messagePage("Unavailable", "The ledger database is unavailable; try again shortly.", 503),
        "retry-after",
        "5"
      )))
  )

/** The member of a page only signed-in people see; otherwise a redirect to sign-in that comes back here. */
export const requireMember = <E, R>(
  context: AppContext,
  request: HttpServerRequest.HttpServerRequest,
  then: (signed: SignedIn) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.gen(function*() {
    const signed = yield* signedIn(request, context.names, context.sessions)
    if (signed === undefined) {
      const next = request.url.startsWith("/") && !request.url.startsWith("//") ? request.url : "/"
      return HttpServerResponse.redirect(`/signin?next=${encodeURIComponent(next)}`, { status: 303, headers: { "cache-control": "no-store" } })
    }
    return yield* then(signed)
  })
