/**
 * The authorization endpoint. GET checks the request, then goes straight to consent for a browser signed in to the
 * app (its session cookie), else shows the sign-in page. POST answers the page's forms: sign-in (step=signin) with
 * the account's email and password, or with a Personal Access Token; and the user's choice of workspace or refusal
 * (step=consent).
 *
 * What protects the forms: every sign-in re-checks the authorization request it carries (client, redirect URI,
 * PKCE challenge), and the consent form holds a one-time ticket only the page that was shown has. The password form
 * is also a same-origin POST (Origin / Sec-Fetch-Site) with a CSRF token derived from the app's signed-out form
 * cookie, exactly as the app's own sign-in: a form posted from another site cannot sign a browser in as someone else.
 */
import { Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { addressOf, csrfValid, sameOrigin, signedIn } from "../auth/browser.ts"
import { TooManyAttempts, Unauthorized } from "../domain/errors.ts"
import { checkAuthorize, consentResponse, refusedRequest, signInResponse, type ValidRequest } from "./authorizationRequest.ts"
import { errorPage } from "./pages.ts"
import { formBody, type OAuthContext, pageResponse, withQuery } from "./protocol.ts"

/** the longest email and password read from the form (as the app's sign-in) */
const MAX_EMAIL = 320
const MAX_PASSWORD = 1024
const FOREIGN_FORM = "This form has expired or did not come from this site."

export const authorizeHandlers = (context: OAuthContext) => {
  const { store, authenticator, accounts, limiter, sessions, cookies, urls } = context

  const authorizeGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = new URL(request.url, urls.issuer).searchParams
    const check = yield* checkAuthorize(context, params, addressOf(request))
    if (check._tag !== "Valid") return refusedRequest(check)
    // prompt=login (the consent page's "use another account"): the sign-in page whatever the browser's session
    if (params.get("prompt") !== "login") {
      const session = yield* signedIn(request, cookies, sessions)
      if (session !== undefined) {
        const { principal, email } = session.member
        const { workspaces } = yield* store.memberships(principal.tenant_id, principal.user_id)
        if (workspaces.length > 0) {
          yield* Effect.logInfo("oauth sign-in by the app session").pipe(Effect.annotateLogs({
            client_id: check.client.client_id,
            tenant_id: principal.tenant_id,
            user_id: principal.user_id
          }))
          return yield* consentResponse(context, request, check.client, check.request, principal, email, workspaces, principal.workspace_id, params)
        }
      }
    }
    return signInResponse(context, request, check, params)
  })

  /** The password form: the account the email and password sign in, limited like the app's own sign-in. */
  const passwordSignIn = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, check: ValidRequest, params: URLSearchParams) {
    const email = (params.get("email") ?? "").slice(0, MAX_EMAIL)
    const password = (params.get("password") ?? "").slice(0, MAX_PASSWORD)
    const again = (error: string, status: number) => signInResponse(context, request, check, params, { error, status, failed: "password", email })
    const address = addressOf(request)
    const wait = yield* limiter.attempt(email, address)
    if (wait > 0) {
      yield* Effect.logWarning("oauth sign-in limited").pipe(Effect.annotateLogs({ address, client_id: check.client.client_id }))
      return HttpServerResponse.setHeader(
        again(`Too many sign-in attempts. Try again in ${Math.ceil(wait / 60)} minute${wait > 60 ? "s" : ""}.`, 429),
        "retry-after",
        String(wait)
      )
    }
    const member = yield* accounts.signIn(email, password)
    if (member === undefined) {
      yield* limiter.failed(email)
      return again("That email and password do not match an account.", 401)
    }
    yield* limiter.succeeded(email)
    const { email: userEmail, workspaces } = yield* store.memberships(member.tenant_id, member.user_id)
    yield* Effect.logInfo("oauth sign-in with a password").pipe(Effect.annotateLogs({
      client_id: check.client.client_id,
      tenant_id: member.tenant_id,
      user_id: member.user_id
    }))
    return yield* consentResponse(context, request, check.client, check.request, member, userEmail, workspaces, member.workspace_id)
  })

  /** The Personal Access Token form. (The OpenID Connect login is another way to the same identity.) */
  const patSignIn = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, check: ValidRequest, params: URLSearchParams) {
    const principal = yield* authenticator.authenticate(params.get("pat") ?? undefined, "pat", addressOf(request)).pipe(
      Effect.catchTags({
        Unauthorized: (refused) => Effect.succeed(refused),
        TooManyAttempts: (limited) => Effect.succeed(limited)
      })
    )
    if (principal instanceof TooManyAttempts) {
      return HttpServerResponse.setHeader(
        signInResponse(context, request, check, params, { error: `Too many refused tokens. Try again in ${principal.retryAfter} s.`, status: 429, failed: "pat" }),
        "retry-after",
        String(principal.retryAfter)
      )
    }
    if (principal instanceof Unauthorized) {
      return signInResponse(context, request, check, params, {
        error: `That token was not accepted (${principal.message}). Paste a Personal Access Token (ldg_pat_…).`,
        failed: "pat"
      })
    }
    const { email, workspaces } = yield* store.memberships(principal.tenant_id, principal.user_id)
    return yield* consentResponse(context, request, check.client, check.request, principal, email, workspaces, principal.workspace_id)
  })

  /** Who the user is: the request is checked again (it came back through the form), then the form that was posted. */
  const signIn = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, params: URLSearchParams) {
    const check = yield* checkAuthorize(context, params, addressOf(request))
    if (check._tag !== "Valid") return refusedRequest(check)
    if (!csrfValid(request, cookies, params)) {
      return signInResponse(context, request, check, params, {
        error: "This form has expired or did not come from this site. Sign in again.",
        status: 403,
        failed: params.has("pat") ? "pat" : "password",
        email: (params.get("email") ?? "").slice(0, MAX_EMAIL)
      })
    }
    return params.has("pat") ? yield* patSignIn(request, check, params) : yield* passwordSignIn(request, check, params)
  })

  /** The user's answer on the consent page: a code for the chosen workspace, or access_denied. */
  const consent = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, params: URLSearchParams) {
    const ticket = params.get("ticket") ?? ""
    const expired = pageResponse(errorPage("This sign-in has expired or was already answered."), 400)
    if (!csrfValid(request, cookies, params)) return pageResponse(errorPage(FOREIGN_FORM), 403)
    if (params.get("decision") === "deny") {
      const denied = yield* store.deny(ticket)
      if (denied === undefined) return expired
      return HttpServerResponse.redirect(
        withQuery(denied.redirect_uri, { error: "access_denied", error_description: "the user denied access", state: denied.state, iss: urls.issuer }),
        { status: 302 }
      )
    }
    if (params.get("decision") !== "allow") return pageResponse(errorPage("Choose Allow or Deny."), 400)
    const approved = yield* store.approve(ticket, params.get("workspace_id") ?? "")
    if (approved === undefined) return expired
    yield* Effect.logInfo("oauth authorization granted").pipe(Effect.annotateLogs({
      client_id: approved.authorization.client_id,
      tenant_id: approved.authorization.tenant_id,
      workspace_id: approved.authorization.workspace_id,
      user_id: approved.authorization.user_id
    }))
    return HttpServerResponse.redirect(
      withQuery(approved.authorization.redirect_uri, { code: approved.code, state: approved.authorization.state, iss: urls.issuer }),
      { status: 302 }
    )
  })

  /** Every step is a browser's form of this site: another origin is refused before the form is read. */
  const authorizePost = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    if (!sameOrigin(request, urls.issuer)) return pageResponse(errorPage(FOREIGN_FORM), 403)
    const params = yield* formBody(request)
    switch (params.get("step")) {
      case "signin":
        return yield* signIn(request, params)
      case "consent":
        return yield* consent(request, params)
      default:
        return pageResponse(errorPage("Unknown step. Start the connection again."), 400)
    }
  })

  return { authorizeGet, authorizePost }
}
