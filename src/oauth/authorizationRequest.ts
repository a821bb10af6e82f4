/**
 * The authorization request as every way of signing in sees it (the account's email and password, the browser's app
 * session, a Personal Access Token and the OpenID Connect provider): its checks, the sign-in page that carries it,
 * and the consent page once the user is known.
 */
import { Effect, Option } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { anonymousCsrf, withFormCookie } from "../auth/browser.ts"
import { LEDGER_SCOPE } from "./urls.ts"
import type { AuthorizationRequest, Membership, OAuthClient } from "../auth/OAuthStore.ts"
import { documentHost, isMetadataDocumentId, UNREGISTERED_CLIENT } from "./clientMetadataDocument.ts"
import { consentPage, errorPage, signInPage } from "./pages.ts"
import { isCodeChallenge, normalizeResource, type OAuthContext, OIDC_START_PATH, pageResponse, withQuery } from "./protocol.ts"
import { sameRedirect } from "./redirectUris.ts"

export type AuthorizeCheck =
  | { readonly _tag: "Valid"; readonly client: OAuthClient; readonly request: AuthorizationRequest }
  /** no trustworthy redirect URI: the user sees the error */
  | { readonly _tag: "Page"; readonly message: string }
  | { readonly _tag: "Redirect"; readonly location: string }

export type ValidRequest = Extract<AuthorizeCheck, { _tag: "Valid" }>

const clientName = (client: OAuthClient) =>
  typeof client.metadata.client_name === "string" && client.metadata.client_name.length > 0 ? client.metadata.client_name : client.client_id

const hostOf = (uri: string) => {
  const url = new URL(uri)
  return url.host || url.protocol
}

/** The authorization request's parameters, carried through the sign-in form. */
const requestFields = (params: URLSearchParams) =>
  Object.fromEntries(
    ["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "scope", "resource"]
      .map((key) => [key, params.get(key)])
  )

/** The request as a query, for links that start it again (`extra` added). */
const requestQuery = (params: URLSearchParams, extra: Record<string, string> = {}) => {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(requestFields(params))) if (value !== null) query.set(key, value)
  for (const [key, value] of Object.entries(extra)) query.set(key, value)
  return query.toString()
}

/** The parameters of a request checked before (the OpenID Connect login stores it), as the forms carry them. */
export const requestParams = (request: AuthorizationRequest) => {
  const params = new URLSearchParams({
    response_type: "code",
    client_id: request.client_id,
    redirect_uri: request.redirect_uri,
    code_challenge: request.code_challenge,
    code_challenge_method: "S256",
    scope: request.scope,
    resource: request.resource
  })
  if (request.state !== null) params.set("state", request.state)
  return params
}

/**
 * Checks the request's parameters. Until the client and its redirect URI are known the user sees the error; after,
 * the client is told through its redirect URI.
 */
export const checkAuthorize = Effect.fnUntraced(function*({ clients, urls }: OAuthContext, params: URLSearchParams, requester: string) {
  const clientId = params.get("client_id")
  if (!clientId) return { _tag: "Page", message: "The request names no client (client_id is missing)." } satisfies AuthorizeCheck
  const found = yield* clients.lookup(clientId, requester)
  if (found._tag === "Refused") return { _tag: "Page", message: found.message } satisfies AuthorizeCheck
  const client = found.client
  const requested = params.get("redirect_uri") ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0]! : null)
  if (requested === null || !client.redirect_uris.some((uri) => sameRedirect(uri, requested))) {
    return {
      _tag: "Page",
      message: isMetadataDocumentId(client.client_id)
        ? "The redirect URI is not one of those the client's metadata document lists."
        : "The redirect URI does not match the client's registration."
    } satisfies AuthorizeCheck
  }
  const state = params.get("state")
  const refuse = (error: string, description: string): AuthorizeCheck => ({
    _tag: "Redirect",
    location: withQuery(requested, { error, error_description: description, state, iss: urls.issuer })
  })
  if (params.get("response_type") !== "code") return refuse("unsupported_response_type", "only response_type=code is supported")
  const challenge = params.get("code_challenge")
  if (challenge === null || !isCodeChallenge(challenge)) {
    return refuse("invalid_request", "PKCE is required: send code_challenge (S256: 43 base64url characters)")
  }
  if (params.get("code_challenge_method") !== "S256") return refuse("invalid_request", "code_challenge_method must be S256")
  // offline_access is implied (refresh tokens are always issued); any other scope is unknown here
  const scopes = (params.get("scope") ?? "").split(" ").filter((s) => s.length > 0 && s !== "offline_access")
  if (scopes.some((s) => s !== LEDGER_SCOPE)) return refuse("invalid_scope", `the only scope is ${LEDGER_SCOPE}`)
  const resource = normalizeResource(params.get("resource") ?? urls.resource)
  if (resource !== urls.resource) return refuse("invalid_target", `tokens are issued for ${urls.resource} only`)
  return {
    _tag: "Valid",
    client,
    request: { client_id: client.client_id, redirect_uri: requested, code_challenge: challenge, state, scope: LEDGER_SCOPE, resource }
  } satisfies AuthorizeCheck
})

/** The answer to a request that failed its checks. */
export const refusedRequest = (check: Exclude<AuthorizeCheck, ValidRequest>) =>
  check._tag === "Page"
    ? pageResponse(errorPage(check.message), 400)
    : HttpServerResponse.redirect(check.location, { status: 302 })

export interface SignInOptions {
  readonly error?: string | undefined
  readonly status?: number | undefined
  /** the form the error is about */
  readonly failed?: "password" | "pat" | undefined
  /** the email to fill in again */
  readonly email?: string | undefined
}

/**
 * The sign-in page: the account's email and password first (its form carries a CSRF token tied to the app's
 * signed-out form cookie, set here when the browser has none), the provider's sign-in when one is configured, and
 * a Personal Access Token.
 */
export const signInResponse = (
  { cookies, oidc }: OAuthContext,
  httpRequest: HttpServerRequest.HttpServerRequest,
  check: ValidRequest,
  params: URLSearchParams,
  options: SignInOptions = {}
) => {
  const sso = Option.match(oidc, {
    onNone: () => undefined,
    onSome: (provider) => ({ name: provider.name, href: `${OIDC_START_PATH}?${requestQuery(params)}` })
  })
  const csrf = anonymousCsrf(httpRequest, cookies)
  const response = pageResponse(
    signInPage({
      clientName: clientName(check.client),
      clientHost: documentHost(check.client),
      redirectHost: hostOf(check.request.redirect_uri),
      request: requestFields(params),
      csrf: csrf.token,
      email: options.email,
      error: options.error,
      failed: options.failed,
      sso
    }),
    options.error === undefined ? 200 : options.status ?? 401,
    check.request.redirect_uri
  )
  return withFormCookie(response, cookies, csrf.fresh)
}

/**
 * The consent step for a signed-in user: a ticket carries the checked request to the user's answer, and the form a
 * CSRF token like the sign-in form's (the ticket alone would let a page that learnt it answer for the user). A
 * client known by its metadata document is written to the store with the ticket (its grants refer to it).
 * `params`, for a user signed in by the browser's session: the page links to signing in as someone else.
 */
export const consentResponse = Effect.fnUntraced(function*(
  { store, cookies }: OAuthContext,
  httpRequest: HttpServerRequest.HttpServerRequest,
  client: OAuthClient,
  request: AuthorizationRequest,
  user: { readonly tenant_id: string; readonly user_id: string },
  email: string,
  workspaces: ReadonlyArray<Membership>,
  preselected: string | undefined,
  params?: URLSearchParams
) {
  const ticket = yield* store.startAuthorization(request, user, isMetadataDocumentId(client.client_id) ? client : undefined)
  if (ticket === undefined) return pageResponse(errorPage(UNREGISTERED_CLIENT), 400)
  const csrf = anonymousCsrf(httpRequest, cookies)
  const response = pageResponse(
    consentPage({
      clientName: clientName(client),
      clientHost: documentHost(client),
      redirectHost: hostOf(request.redirect_uri),
      email,
      ticket,
      csrf: csrf.token,
      workspaces,
      preselected,
      switchAccount: params === undefined ? undefined : `/oauth/authorize?${requestQuery(params, { prompt: "login" })}`
    }),
    200,
    request.redirect_uri
  )
  return withFormCookie(response, cookies, csrf.fresh)
})
