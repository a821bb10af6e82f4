/**
 * The authorization request as both ways of signing in see it (the Personal Access Token form and the OpenID
 * Connect provider): its checks, the sign-in page that carries it, and the consent page once the user is known.
 */
import { Effect, Option } from "effect"
import { HttpServerResponse } from "effect/http"
import { LEDGER_SCOPE } from "../urls.ts"
import type { AuthorizationRequest, Membership, OAuthClient } from "../../auth/OAuthStore.ts"
import { consentPage, errorPage, signInPage } from "./pages.ts"
import { isCodeChallenge, normalizeResource, type OAuthContext, OIDC_START_PATH, pageResponse, sameRedirect, withQuery } from "./protocol.ts"

export const UNREGISTERED_CLIENT = "This client is not registered here. Let the MCP client register again and retry."

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

/**
 * Checks the request's parameters. Until the client and its redirect URI are known the user sees the error; after,
 * the client is told through its redirect URI.
 */
export const checkAuthorize = Effect.fnUntraced(function*({ store, urls }: OAuthContext, params: URLSearchParams) {
  const clientId = params.get("client_id")
  if (!clientId) return { _tag: "Page", message: "The request names no client (client_id is missing)." } satisfies AuthorizeCheck
  const client = yield* store.client(clientId)
  if (client === undefined) return { _tag: "Page", message: UNREGISTERED_CLIENT } satisfies AuthorizeCheck
  const requested = params.get("redirect_uri") ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0]! : null)
  if (requested === null || !client.redirect_uris.some((uri) => sameRedirect(uri, requested))) {
    return { _tag: "Page", message: "The redirect URI does not match the client's registration." } satisfies AuthorizeCheck
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

/** The sign-in page; with a provider configured it leads with a link that starts the provider's sign-in. */
export const signInResponse = (
  { oidc }: OAuthContext,
  check: ValidRequest,
  params: URLSearchParams,
  error?: string,
  status = 401
) => {
  const request = requestFields(params)
  const sso = Option.match(oidc, {
    onNone: () => undefined,
    onSome: (provider) => {
      const query = new URLSearchParams()
      for (const [key, value] of Object.entries(request)) if (value !== null) query.set(key, value)
      return { name: provider.name, href: `${OIDC_START_PATH}?${query}` }
    }
  })
  return pageResponse(
    signInPage({ clientName: clientName(check.client), redirectHost: hostOf(check.request.redirect_uri), request, error, sso }),
    error === undefined ? 200 : status,
    check.request.redirect_uri
  )
}

/** The consent step for a signed-in user: a ticket carries the checked request to the user's answer. */
export const consentResponse = Effect.fnUntraced(function*(
  { store }: OAuthContext,
  client: OAuthClient,
  request: AuthorizationRequest,
  user: { readonly tenant_id: string; readonly user_id: string },
  email: string,
  workspaces: ReadonlyArray<Membership>,
  preselected: string | undefined
) {
  const ticket = yield* store.startAuthorization(request, user)
  if (ticket === undefined) return pageResponse(errorPage(UNREGISTERED_CLIENT), 400)
  return pageResponse(
    consentPage({ clientName: clientName(client), redirectHost: hostOf(request.redirect_uri), email, ticket, workspaces, preselected }),
    200,
    request.redirect_uri
  )
})
