/**
 * Sign-in through the OpenID Connect provider (LEDGER_OIDC_*), another way past the sign-in page: the start sends
 * the user to the provider with a stored login; the callback takes the provider's answer, whose verified email names
 * the ledger user, on to the same consent step as after a password or a Personal Access Token.
 */
import { Effect, Option, Result } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { addressOf, localPath, seeOther, withSession } from "../auth/browser.ts"
import { checkAuthorize, consentResponse, refusedRequest, requestParams, signInResponse } from "./authorizationRequest.ts"
import { type AuthorizationRequest, CODE_TTL_SECONDS, type OAuthClient, type OidcLogin } from "../auth/OAuthStore.ts"
import type { OidcFailure, OidcProvider } from "./OidcProvider.ts"
import { errorPage } from "./pages.ts"
import { OIDC_CALLBACK_PATH, type OAuthContext, pageResponse, perAddressLimit, withQuery } from "./protocol.ts"

/** Sign-ins started at the OpenID Connect provider per connecting address and minute: each is a stored login. */
const OIDC_STARTS_PER_MINUTE = 30

type Refusal = "unverified" | "domain" | "none" | "several" | "linked-elsewhere"

/** One cookie per login (a browser may run two sign-ins at once), only sent back to the callback. */
const loginCookie = (state: string) => `ledger_oidc_${state.slice(0, 16)}`

const notConfigured = () => pageResponse(errorPage("Signing in with an identity provider is not configured here."), 404)

/** Why a provider's account is not signed in, in words for the page. */
const refusalMessage = (provider: string, email: string | undefined, reason: Refusal) => {
  switch (reason) {
    case "unverified":
      return email === undefined
        ? `${provider} did not tell the ledger your email address (the ledger's client there needs the email scope).`
        : `${provider} has not verified the email address ${email}; the ledger signs in verified addresses only.`
    case "domain":
      return `Accounts of ${email!.slice(email!.lastIndexOf("@") + 1)} may not sign in here through ${provider}.`
    case "none":
      return `No one with the email address ${email} is a member here. Ask an administrator to add you, then connect again.`
    case "several":
      return `${email} is the email of several users here; sign in with the password or a Personal Access Token of the one you mean.`
    case "linked-elsewhere":
      return `The ledger user ${email} signs in with another account at ${provider}; use that one, your password or a Personal Access Token.`
  }
}

export const oidcLoginHandlers = (context: OAuthContext) => {
  const { store, clients, urls, oidc } = context
  const oidcStarts = perAddressLimit(OIDC_STARTS_PER_MINUTE)
  const secureCookies = urls.issuer.startsWith("https:")

  /** The sign-in page again for a request checked before the user went to the provider, with what went wrong. */
  const signInAgain = (
    httpRequest: HttpServerRequest.HttpServerRequest,
    client: OAuthClient,
    request: AuthorizationRequest,
    error: string,
    status: number
  ) => signInResponse(context, httpRequest, { _tag: "Valid", client, request }, requestParams(request), { error, status })

  /** The link on the sign-in page: the request is checked again, then the user goes to the provider. */
  const oidcStart = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    if (Option.isNone(oidc)) return notConfigured()
    const provider = oidc.value
    const wait = yield* oidcStarts(request)
    if (wait > 0) {
      return pageResponse(errorPage(`Too many sign-ins from this address; wait ${wait} s and connect again.`), 429).pipe(
        HttpServerResponse.setHeader("retry-after", String(wait))
      )
    }
    const params = new URL(request.url, urls.issuer).searchParams
    if (params.get("app") === "1") return yield* appStart(provider, localPath(params.get("next"), urls.issuer))
    const check = yield* checkAuthorize(context, params, addressOf(request))
    if (check._tag !== "Valid") return refusedRequest(check)
    const unreachable = (failure: OidcFailure) =>
      Effect.logWarning("OpenID Connect sign-in could not start", { error: failure.message }).pipe(
        Effect.as(signInResponse(context, request, check, params, {
          error: `Signing in with ${provider.name} is not possible right now: ${failure.message}. Try again, or use your password or a Personal Access Token.`,
          status: 502
        }))
      )
    // the provider first: a login is stored only when the user can be sent on
    const ready = yield* Effect.result(provider.ready)
    if (Result.isFailure(ready)) return yield* unreachable(ready.failure)
    const login = yield* store.startOidcLogin(check.request)
    const target = yield* Effect.result(provider.authorizationUrl(login))
    if (Result.isFailure(target)) return yield* unreachable(target.failure)
    return toProvider(target.success, login)
  })

  /** Sends the browser to the provider, with the cookie that ties the login to it. */
  const toProvider = (target: URL, login: OidcLogin) =>
    HttpServerResponse.redirect(target.toString(), {
      status: 302,
      headers: {
        "set-cookie": `${loginCookie(login.state)}=${login.browser}; Path=${OIDC_CALLBACK_PATH}; Max-Age=${CODE_TTL_SECONDS}; HttpOnly; SameSite=Lax` +
          (secureCookies ? "; Secure" : "")
      }
    })

  /** The app's "Continue with <provider>": a login that ends in an app session, then `next`. */
  const appStart = Effect.fnUntraced(function*(provider: OidcProvider, next: string) {
    const ready = yield* Effect.result(provider.ready)
    if (Result.isFailure(ready)) {
      yield* Effect.logWarning("OpenID Connect sign-in could not start", { error: ready.failure.message })
      return seeOther(`/signin?sso=unavailable`)
    }
    const login = yield* store.startOidcLogin({ app: { next } })
    const target = yield* Effect.result(provider.authorizationUrl(login))
    if (Result.isFailure(target)) return seeOther(`/signin?sso=unavailable`)
    return toProvider(target.success, login)
  })

  /**
   * Who the provider's answer signs in: the ledger user the account is linked to, else the one user its verified
   * email (in an allowed domain) names, then linked; or why not.
   */
  const identifyUser = Effect.fnUntraced(function*(provider: OidcProvider, query: URLSearchParams, login: OidcLogin) {
    const identity = yield* Effect.result(provider.identify(query, login))
    if (Result.isFailure(identity)) {
      yield* Effect.logWarning("OpenID Connect sign-in failed", { error: identity.failure.message })
      return { _tag: "Failed", message: identity.failure.message } as const
    }
    const { email, emailVerified, issuer, subject } = identity.success
    const domainAllowed = email !== undefined &&
      (provider.allowedDomains.length === 0 || provider.allowedDomains.includes(email.slice(email.lastIndexOf("@") + 1).toLowerCase()))
    const user = yield* store.oidcUser(issuer, subject, email !== undefined && emailVerified && domainAllowed ? email : undefined)
    if (typeof user === "string") {
      const reason: Refusal = user !== "none" ? user : email === undefined || !emailVerified ? "unverified" : !domainAllowed ? "domain" : "none"
      yield* Effect.logInfo("OpenID Connect sign-in refused", { reason })
      return { _tag: "Refused", reason, email } as const
    }
    return { _tag: "User", user } as const
  })

  /** The provider's answer to an app sign-in: an app session in the user's first workspace, or /signin saying why not. */
  const appCallback = Effect.fnUntraced(function*(provider: OidcProvider, query: URLSearchParams, login: OidcLogin, next: string) {
    if (query.get("error") !== null) return seeOther("/signin?sso=refused")
    const identified = yield* identifyUser(provider, query, login)
    if (identified._tag === "Failed") return seeOther("/signin?sso=failed")
    if (identified._tag === "Refused") return seeOther(`/signin?sso=${identified.reason}`)
    const { workspaces } = yield* store.memberships(identified.user.tenant_id, identified.user.user_id)
    if (workspaces.length === 0) return seeOther("/signin?sso=none")
    const member = { tenant_id: identified.user.tenant_id, workspace_id: workspaces[0]!.workspace_id, user_id: identified.user.user_id }
    const token = yield* context.sessions.start(member)
    yield* Effect.logInfo("app sign-in through OpenID Connect").pipe(Effect.annotateLogs({ tenant_id: member.tenant_id, user_id: member.user_id }))
    return withSession(seeOther(next), context.cookies, token)
  })

  /**
   * The provider's answer. The login (found by its state, once, from the browser that started it) holds the client's
   * checked request. The account is the ledger user it is linked to, else the one user its verified email names
   * (then linked). A refusal by the provider reaches the client as access_denied.
   */
  const oidcCallback = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    if (Option.isNone(oidc)) return notConfigured()
    const provider = oidc.value
    const query = new URL(request.url, urls.issuer).searchParams
    const state = query.get("state") ?? ""
    const login = state === "" ? "unknown" : yield* store.finishOidcLogin(state, request.cookies[loginCookie(state)])
    if (login === "unknown") return pageResponse(errorPage("This sign-in has expired or was already used."), 400)
    if (login === "elsewhere") return pageResponse(errorPage("This sign-in was started in another browser; connect again from this one."), 400)
    if ("app" in login.request) return yield* appCallback(provider, query, login, login.request.app.next)
    const authorization = login.request
    // a client known by its metadata document may have no row yet: it is looked up as at the start
    const found = yield* clients.lookup(authorization.client_id, addressOf(request))
    if (found._tag === "Refused") return pageResponse(errorPage(found.message), 400)
    const client = found.client
    const refused = query.get("error")
    if (refused !== null) {
      const detail = query.get("error_description")
      yield* Effect.logInfo("OpenID Connect sign-in refused by the provider", { error: refused })
      return HttpServerResponse.redirect(
        withQuery(authorization.redirect_uri, {
          // the provider's own outage is the client's to retry; anything else is a refusal
          error: refused === "temporarily_unavailable" || refused === "server_error" ? refused : "access_denied",
          error_description: `${provider.name} refused the sign-in (${refused}${detail ? `: ${detail}` : ""})`,
          state: authorization.state,
          iss: urls.issuer
        }),
        { status: 302 }
      )
    }
    const identified = yield* identifyUser(provider, query, login)
    if (identified._tag === "Failed") {
      return signInAgain(request, client, authorization, `Signing in with ${provider.name} failed: ${identified.message}.`, 502)
    }
    if (identified._tag === "Refused") {
      return signInAgain(request, client, authorization, refusalMessage(provider.name, identified.email, identified.reason), 403)
    }
    const user = identified.user
    const memberships = yield* store.memberships(user.tenant_id, user.user_id)
    if (memberships.workspaces.length === 0) {
      return signInAgain(request, client, authorization, `${memberships.email} is not a member of any workspace here. Ask an administrator to add you, then connect again.`, 403)
    }
    yield* Effect.logInfo("signed in through OpenID Connect", { tenant_id: user.tenant_id, user_id: user.user_id, client_id: client.client_id })
    return yield* consentResponse(context, request, client, authorization, user, memberships.email, memberships.workspaces, undefined)
  })

  return { oidcStart, oidcCallback }
}
