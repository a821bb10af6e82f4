/**
 * The built-in OAuth 2.1 authorization server for MCP clients (DESIGN §2.3):
 *
 *   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
 *   POST /oauth/register                           RFC 7591 dynamic client registration (public or confidential)
 *   GET  /oauth/authorize                          sign-in page (authorization code + PKCE S256 only)
 *   POST /oauth/authorize                          step=signin: a Personal Access Token proves the user;
 *                                                  step=consent: the user picks one of their workspaces (or denies)
 *   GET  /oauth/oidc/start                         with LEDGER_OIDC_*: sends the user to the OpenID Connect provider
 *   GET  /oauth/oidc/callback                      its answer: the verified email names the user, then consent
 *   POST /oauth/token                              authorization_code and refresh_token (rotated) grants
 *   POST /oauth/revoke                             RFC 7009
 *
 * Access tokens (`ldg_oat_…`, one hour) are bound to `{publicUrl}/mcp` (RFC 8707) and carry the member's tenant,
 * workspace, user and role: the MCP endpoint resolves them through the common Authenticator like a PAT.
 *
 * Sign-in is the one place an external identity provider plugs in. With LEDGER_OIDC_ISSUER and its client id set,
 * the sign-in page leads with "Continue with <provider>": the provider's ID token (checked by `OidcProvider`) gives
 * a verified email, and the ledger user with that email continues to the same consent step as after a PAT. The PAT
 * stays on the page for accounts the provider does not know, and for an email that is a user in several tenants.
 */
import { Effect, Option, Result, Schema } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import { Authenticator } from "../../api/Authenticator.ts"
import { tokenBuckets } from "../../api/RateLimiter.ts"
import { LedgerConfig } from "../../config/LedgerConfig.ts"
import { type DatabaseUnavailable, Unauthorized } from "../../domain/errors.ts"
import { hashToken } from "../../store/Credentials.ts"
import { authorizationServerMetadata, LEDGER_SCOPE, mcpUrls } from "../urls.ts"
import { type AuthorizationRequest, type ClientAuthMethod, CODE_TTL_SECONDS, type GrantRefusal, type Membership, type OAuthClient, OAuthStore } from "./OAuthStore.ts"
import { type OidcFailure, oidcProvider } from "./OidcProvider.ts"
import { consentPage, errorPage, signInPage } from "./pages.ts"

/** An OAuth error response (RFC 6749 §5.2 shape). */
class OAuthError extends Schema.TaggedError<OAuthError>()("OAuthError", {
  error: Schema.String,
  description: Schema.String,
  status: Schema.Number
}) {}

const MAX_BODY_BYTES = 64 * 1024
const UNREGISTERED_CLIENT = "This client is not registered here. Let the MCP client register again and retry."
/** where the OpenID Connect provider sends the user back: register `{LEDGER_PUBLIC_URL}/oauth/oidc/callback` there */
const OIDC_CALLBACK_PATH = "/oauth/oidc/callback"
/**
 * Client registrations accepted per connecting address and minute, in bursts of as many. Registration is open to
 * anyone (RFC 7591) and each one is a stored client; an MCP client registers once and keeps its client id.
 */
const REGISTRATIONS_PER_MINUTE = 30
/** Sign-ins started at the OpenID Connect provider per connecting address and minute: each is a stored login. */
const OIDC_STARTS_PER_MINUTE = 30
const CLIENT_METADATA_FIELDS = [
  "client_name",
  "client_uri",
  "logo_uri",
  "scope",
  "contacts",
  "tos_uri",
  "policy_uri",
  "software_id",
  "software_version"
] as const
const GRANT_TYPES = ["authorization_code", "refresh_token"]
const AUTH_METHODS: ReadonlyArray<ClientAuthMethod> = ["none", "client_secret_post", "client_secret_basic"]
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "[::1]", "localhost"])
const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:", "blob:", "about:"])
/** RFC 7636 §4.1 */
const CODE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-allow-headers": "Authorization, Content-Type, MCP-Protocol-Version",
  "access-control-max-age": "600"
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store", ...CORS, ...headers } })

const oauthErrorResponse = (e: OAuthError) =>
  json(
    { error: e.error, error_description: e.description },
    e.status,
    e.status === 401 ? { "www-authenticate": `Basic realm="ledger", error="${e.error}"` } : {}
  )

const unavailableResponse = () =>
  json({ error: "temporarily_unavailable", error_description: "the ledger database is unavailable; retry shortly" }, 503)

/** Where a redirect URI may point: https, loopback http (any port, RFC 8252 §7.3) or an app's private scheme. */
const redirectUriProblem = (uri: string): string | undefined => {
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return `not an absolute URI: ${uri}`
  }
  if (url.hash !== "") return `must not contain a fragment: ${uri}`
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `scheme not allowed: ${uri}`
  if (url.protocol === "http:" && !LOOPBACK_HOSTS.has(url.hostname)) return `http is allowed for loopback hosts only: ${uri}`
  return undefined
}

const sameRedirect = (registered: string, requested: string): boolean => {
  if (registered === requested) return true
  try {
    const a = new URL(registered)
    const b = new URL(requested)
    // loopback redirects may use any port (native apps bind an ephemeral one)
    return a.protocol === "http:" && LOOPBACK_HOSTS.has(a.hostname) && a.protocol === b.protocol && a.hostname === b.hostname &&
      a.pathname === b.pathname && a.search === b.search
  } catch {
    return false
  }
}

const withQuery = (uri: string, params: Record<string, string | null | undefined>): string => {
  const url = new URL(uri)
  for (const [key, value] of Object.entries(params)) if (typeof value === "string") url.searchParams.set(key, value)
  return url.toString()
}

/** The CSP source of a redirect target, so a form may end in it (Chrome applies form-action to redirects). */
const redirectSource = (uri: string): string => {
  const url = new URL(uri)
  return url.protocol === "http:" || url.protocol === "https:" ? url.origin : url.protocol
}

const pageResponse = (html: string, status = 200, redirectUri?: string) =>
  HttpServerResponse.text(html, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-store",
      "x-frame-options": "DENY",
      "referrer-policy": "no-referrer",
      "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; frame-ancestors 'none'; ` +
        `form-action 'self'${redirectUri ? ` ${redirectSource(redirectUri)}` : ""}`
    }
  })

const normalizeResource = (resource: string) => resource.replace(/\/+$/, "")

const s256 = (verifier: string) => Crypto.createHash("sha256").update(verifier).digest("base64url")

const timingSafeEqualText = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && Crypto.timingSafeEqual(x, y)
}

/** Reads a bounded body as text. */
const bodyText = (request: HttpServerRequest.HttpServerRequest) =>
  Number(request.headers["content-length"] ?? 0) > MAX_BODY_BYTES
    ? Effect.fail(new OAuthError({ error: "invalid_request", description: "request body too large", status: 413 }))
    : request.text.pipe(
      Effect.mapError(() => new OAuthError({ error: "invalid_request", description: "could not read the request body", status: 400 }))
    )

const formBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    if (!(request.headers["content-type"] ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded")) {
      return yield* new OAuthError({
        error: "invalid_request",
        description: "send the parameters as application/x-www-form-urlencoded",
        status: 400
      })
    }
    const params = new URLSearchParams(yield* bodyText(request))
    for (const key of new Set(params.keys())) {
      if (params.getAll(key).length > 1) {
        return yield* new OAuthError({ error: "invalid_request", description: `parameter ${key} is repeated`, status: 400 })
      }
    }
    return params
  })

type AuthorizeCheck =
  | { readonly _tag: "Valid"; readonly client: OAuthClient; readonly request: AuthorizationRequest }
  /** no trustworthy redirect URI: the user sees the error */
  | { readonly _tag: "Page"; readonly message: string }
  | { readonly _tag: "Redirect"; readonly location: string }

export const OAuthRoutes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const config = yield* LedgerConfig
  const store = yield* OAuthStore
  const authenticator = yield* Authenticator
  const urls = mcpUrls(config.publicUrl)

  const oidc = Option.map(config.oidc, (settings) => oidcProvider(settings, `${urls.issuer}${OIDC_CALLBACK_PATH}`))

  const clientName = (client: OAuthClient) =>
    typeof client.metadata.client_name === "string" && client.metadata.client_name.length > 0 ? client.metadata.client_name : client.client_id

  const hostOf = (uri: string) => {
    const url = new URL(uri)
    return url.host || url.protocol
  }

  // --- metadata

  const metadata = json(authorizationServerMetadata(urls))
  const preflight = HttpServerResponse.empty({ status: 204, headers: CORS })
  yield* router.add("GET", "/.well-known/oauth-authorization-server", metadata)
  for (const path of ["/.well-known/oauth-authorization-server", "/oauth/register", "/oauth/token", "/oauth/revoke"] as const) {
    yield* router.add("OPTIONS", path, preflight)
  }

  // --- registration (RFC 7591)

  const registrations = tokenBuckets(REGISTRATIONS_PER_MINUTE / 60, REGISTRATIONS_PER_MINUTE)
  const register = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const wait = registrations(Option.getOrElse(request.remoteAddress, () => "unknown"), Date.now())
    if (wait > 0) {
      return json({
        error: "rate_limited",
        error_description: `at most ${REGISTRATIONS_PER_MINUTE} client registrations a minute from one address; retry in ${wait} s`
      }, 429, { "retry-after": String(wait) })
    }
    const text = yield* bodyText(request)
    const body = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new OAuthError({ error: "invalid_client_metadata", description: "the body must be a JSON object", status: 400 })
    })
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* new OAuthError({ error: "invalid_client_metadata", description: "the body must be a JSON object", status: 400 })
    }
    const input = body as Record<string, unknown>
    const redirectUris = input.redirect_uris
    if (!Array.isArray(redirectUris) || redirectUris.length === 0 || !redirectUris.every((u) => typeof u === "string")) {
      return yield* new OAuthError({ error: "invalid_redirect_uri", description: "redirect_uris must be a non-empty array of URIs", status: 400 })
    }
    const problem = redirectUris.map(redirectUriProblem).find((p) => p !== undefined)
    if (problem !== undefined) return yield* new OAuthError({ error: "invalid_redirect_uri", description: problem, status: 400 })
    const method = (input.token_endpoint_auth_method ?? "client_secret_basic") as ClientAuthMethod
    if (!AUTH_METHODS.includes(method)) {
      return yield* new OAuthError({
        error: "invalid_client_metadata",
        description: `token_endpoint_auth_method must be one of ${AUTH_METHODS.join(", ")}`,
        status: 400
      })
    }
    const grantTypes = input.grant_types ?? GRANT_TYPES
    if (!Array.isArray(grantTypes) || !grantTypes.every((g) => GRANT_TYPES.includes(g))) {
      return yield* new OAuthError({ error: "invalid_client_metadata", description: `grant_types may contain ${GRANT_TYPES.join(", ")}`, status: 400 })
    }
    const responseTypes = input.response_types ?? ["code"]
    if (!Array.isArray(responseTypes) || !responseTypes.every((r) => r === "code")) {
      return yield* new OAuthError({ error: "invalid_client_metadata", description: "response_types may contain code only", status: 400 })
    }
    if (input.client_name !== undefined && (typeof input.client_name !== "string" || input.client_name.length > 200)) {
      return yield* new OAuthError({ error: "invalid_client_metadata", description: "client_name must be a string of at most 200 characters", status: 400 })
    }
    const metadata: Record<string, unknown> = {
      redirect_uris: redirectUris,
      token_endpoint_auth_method: method,
      grant_types: grantTypes,
      response_types: responseTypes
    }
    for (const field of CLIENT_METADATA_FIELDS) if (input[field] !== undefined) metadata[field] = input[field]
    const created = yield* store.registerClient({ token_endpoint_auth_method: method, redirect_uris: redirectUris, metadata })
    yield* Effect.logInfo("oauth client registered").pipe(Effect.annotateLogs({ client_id: created.client_id, method }))
    return json({
      client_id: created.client_id,
      client_id_issued_at: created.issued_at,
      ...(created.client_secret === null ? {} : { client_secret: created.client_secret, client_secret_expires_at: 0 }),
      ...metadata
    }, 201)
  })

  // --- authorization endpoint

  const checkAuthorize = Effect.fnUntraced(function*(params: URLSearchParams) {
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
    if (challenge === null || !/^[A-Za-z0-9_-]{43}$/.test(challenge)) {
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

  /** The authorization request's parameters, carried through the sign-in form. */
  const requestFields = (params: URLSearchParams) =>
    Object.fromEntries(
      ["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "scope", "resource"]
        .map((key) => [key, params.get(key)])
    )

  /** The sign-in page; with a provider configured it leads with a link that starts the provider's sign-in. */
  const signInResponse = (check: Extract<AuthorizeCheck, { _tag: "Valid" }>, params: URLSearchParams, error?: string, status = 401) => {
    const request = requestFields(params)
    const sso = Option.match(oidc, {
      onNone: () => undefined,
      onSome: (provider) => {
        const query = new URLSearchParams()
        for (const [key, value] of Object.entries(request)) if (value !== null) query.set(key, value)
        return { name: provider.name, href: `/oauth/oidc/start?${query}` }
      }
    })
    return pageResponse(
      signInPage({ clientName: clientName(check.client), redirectHost: hostOf(check.request.redirect_uri), request, error, sso }),
      error === undefined ? 200 : status,
      check.request.redirect_uri
    )
  }

  const authorizeGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = new URL(request.url, urls.issuer).searchParams
    const check = yield* checkAuthorize(params)
    switch (check._tag) {
      case "Page":
        return pageResponse(errorPage(check.message), 400)
      case "Redirect":
        return HttpServerResponse.redirect(check.location, { status: 302 })
      case "Valid":
        return signInResponse(check, params)
    }
  })

  /** The PAT step: who the user is. (An OIDC login would replace this step and yield the same identity.) */
  const signIn = Effect.fnUntraced(function*(params: URLSearchParams) {
    const check = yield* checkAuthorize(params)
    if (check._tag === "Page") return pageResponse(errorPage(check.message), 400)
    if (check._tag === "Redirect") return HttpServerResponse.redirect(check.location, { status: 302 })
    const principal = yield* authenticator.authenticate(params.get("pat") ?? undefined, "pat").pipe(
      Effect.catchTag("Unauthorized", (refused) => Effect.succeed(refused))
    )
    if (principal instanceof Unauthorized) {
      return signInResponse(check, params, `That token was not accepted (${principal.message}). Paste a Personal Access Token (ldg_pat_…).`)
    }
    const { email, workspaces } = yield* store.memberships(principal.tenant_id, principal.user_id)
    return yield* consentResponse(check.client, check.request, principal, email, workspaces, principal.workspace_id)
  })

  /** The consent step for a signed-in user: a ticket carries the checked request to the user's answer. */
  const consentResponse = Effect.fnUntraced(function*(
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

  const oidcStarts = tokenBuckets(OIDC_STARTS_PER_MINUTE / 60, OIDC_STARTS_PER_MINUTE)
  const secureCookies = urls.issuer.startsWith("https:")
  /** One cookie per login (a browser may run two sign-ins at once), only sent back to the callback. */
  const loginCookie = (state: string) => `ledger_oidc_${state.slice(0, 16)}`

  /** The sign-in page again for a request checked before the user went to the provider, with what went wrong. */
  const signInAgain = (client: OAuthClient, request: AuthorizationRequest, error: string, status: number) => {
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
    return signInResponse({ _tag: "Valid", client, request }, params, error, status)
  }

  /** The link on the sign-in page: the request is checked again, then the user goes to the provider. */
  const oidcStart = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    if (Option.isNone(oidc)) return pageResponse(errorPage("Signing in with an identity provider is not configured here."), 404)
    const provider = oidc.value
    const wait = oidcStarts(Option.getOrElse(request.remoteAddress, () => "unknown"), Date.now())
    if (wait > 0) {
      return pageResponse(errorPage(`Too many sign-ins from this address; wait ${wait} s and connect again.`), 429).pipe(
        HttpServerResponse.setHeader("retry-after", String(wait))
      )
    }
    const params = new URL(request.url, urls.issuer).searchParams
    const check = yield* checkAuthorize(params)
    if (check._tag === "Page") return pageResponse(errorPage(check.message), 400)
    if (check._tag === "Redirect") return HttpServerResponse.redirect(check.location, { status: 302 })
    const unreachable = (failure: OidcFailure) =>
      Effect.logWarning("OpenID Connect sign-in could not start", { error: failure.message }).pipe(
        Effect.as(signInResponse(check, params, `Signing in with ${provider.name} is not possible right now: ${failure.message}. Try again, or use a Personal Access Token.`, 502))
      )
    // the provider first: a login is stored only when the user can be sent on
    const ready = yield* Effect.result(provider.ready)
    if (Result.isFailure(ready)) return yield* unreachable(ready.failure)
    const login = yield* store.startOidcLogin(check.request)
    const target = yield* Effect.result(provider.authorizationUrl(login))
    if (Result.isFailure(target)) return yield* unreachable(target.failure)
    return HttpServerResponse.redirect(target.success.toString(), {
      status: 302,
      headers: {
        "set-cookie": `${loginCookie(login.state)}=${login.browser}; Path=${OIDC_CALLBACK_PATH}; Max-Age=${CODE_TTL_SECONDS}; HttpOnly; SameSite=Lax` +
          (secureCookies ? "; Secure" : "")
      }
    })
  })

  /** Why a provider's account is not signed in, in words for the page. */
  const oidcRefusal = (provider: string, email: string | undefined, reason: "unverified" | "domain" | "none" | "several" | "linked-elsewhere") => {
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
        return `${email} is the email of several users here; sign in with a Personal Access Token of the one you mean.`
      case "linked-elsewhere":
        return `The ledger user ${email} signs in with another account at ${provider}; use that one, or a Personal Access Token.`
    }
  }

  /**
   * The provider's answer. The login (found by its state, once, from the browser that started it) holds the client's
   * checked request. The account is the ledger user it is linked to, else the one user its verified email names
   * (then linked). A refusal by the provider reaches the client as access_denied.
   */
  const oidcCallback = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    if (Option.isNone(oidc)) return pageResponse(errorPage("Signing in with an identity provider is not configured here."), 404)
    const provider = oidc.value
    const query = new URL(request.url, urls.issuer).searchParams
    const state = query.get("state") ?? ""
    const login = state === "" ? "unknown" : yield* store.finishOidcLogin(state, request.cookies[loginCookie(state)])
    if (login === "unknown") return pageResponse(errorPage("This sign-in has expired or was already used."), 400)
    if (login === "elsewhere") return pageResponse(errorPage("This sign-in was started in another browser; connect again from this one."), 400)
    const authorization = login.request
    const client = yield* store.client(authorization.client_id)
    if (client === undefined) return pageResponse(errorPage(UNREGISTERED_CLIENT), 400)
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
    const identity = yield* Effect.result(provider.identify(query, login))
    if (Result.isFailure(identity)) {
      yield* Effect.logWarning("OpenID Connect sign-in failed", { error: identity.failure.message })
      return signInAgain(client, authorization, `Signing in with ${provider.name} failed: ${identity.failure.message}.`, 502)
    }
    const { email, emailVerified, issuer, subject } = identity.success
    const domainAllowed = email !== undefined &&
      (provider.allowedDomains.length === 0 || provider.allowedDomains.includes(email.slice(email.lastIndexOf("@") + 1).toLowerCase()))
    const user = yield* store.oidcUser(issuer, subject, email !== undefined && emailVerified && domainAllowed ? email : undefined)
    if (typeof user === "string") {
      const reason = user !== "none" ? user : email === undefined || !emailVerified ? "unverified" : !domainAllowed ? "domain" : "none"
      yield* Effect.logInfo("OpenID Connect sign-in refused", { reason })
      return signInAgain(client, authorization, oidcRefusal(provider.name, email, reason), 403)
    }
    const memberships = yield* store.memberships(user.tenant_id, user.user_id)
    if (memberships.workspaces.length === 0) {
      return signInAgain(client, authorization, `${memberships.email} is not a member of any workspace here. Ask an administrator to add you, then connect again.`, 403)
    }
    yield* Effect.logInfo("signed in through OpenID Connect", { tenant_id: user.tenant_id, user_id: user.user_id, client_id: client.client_id })
    return yield* consentResponse(client, authorization, user, memberships.email, memberships.workspaces, undefined)
  })

  const consent = Effect.fnUntraced(function*(params: URLSearchParams) {
    const ticket = params.get("ticket") ?? ""
    const expired = pageResponse(errorPage("This sign-in has expired or was already answered."), 400)
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

  const authorizePost = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = yield* formBody(request)
    switch (params.get("step")) {
      case "signin":
        return yield* signIn(params)
      case "consent":
        return yield* consent(params)
      default:
        return pageResponse(errorPage("Unknown step. Start the connection again."), 400)
    }
  })

  // --- token and revocation endpoints

  /** RFC 6749 §2.3.1: client_secret_basic, client_secret_post, or a public client naming itself. */
  const authenticateClient = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, params: URLSearchParams) {
    let clientId = params.get("client_id")
    let secret = params.get("client_secret")
    let method: ClientAuthMethod = secret === null ? "none" : "client_secret_post"
    const basic = /^Basic\s+(\S+)$/i.exec(request.headers.authorization ?? "")
    if (basic !== null) {
      const decoded = Buffer.from(basic[1]!, "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      const form = (s: string) => decodeURIComponent(s.replace(/\+/g, " "))
      clientId = form(decoded.slice(0, colon < 0 ? decoded.length : colon))
      secret = colon < 0 ? "" : form(decoded.slice(colon + 1))
      method = "client_secret_basic"
    }
    const invalid = (description: string) => new OAuthError({ error: "invalid_client", description, status: 401 })
    if (!clientId) return yield* invalid("client authentication failed: no client_id")
    const client = yield* store.client(clientId)
    if (client === undefined) return yield* invalid("client authentication failed: unknown client")
    if (client.client_secret_hash === null) {
      if (method !== "none") return yield* invalid("client authentication failed: this client is public and has no secret")
      return client
    }
    if (secret === null || !Crypto.timingSafeEqual(hashToken(secret), client.client_secret_hash)) {
      return yield* invalid("client authentication failed: wrong or missing client secret")
    }
    return client
  })

  const refusal = (reason: GrantRefusal, what: string) =>
    new OAuthError({
      error: "invalid_grant",
      status: 400,
      description: {
        unknown: `unknown ${what}`,
        expired: `the ${what} has expired`,
        revoked: `the ${what} was revoked`,
        replayed: `the ${what} was already used; every token issued from it is revoked`
      }[reason]
    })

  const grantTypeAllowed = (client: OAuthClient, grant: string) =>
    !Array.isArray(client.metadata.grant_types) || client.metadata.grant_types.includes(grant)

  const token = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = yield* formBody(request)
    const client = yield* authenticateClient(request, params)
    const grant = params.get("grant_type")
    const invalidRequest = (description: string) => new OAuthError({ error: "invalid_request", description, status: 400 })
    const resource = params.get("resource")
    if (resource !== null && normalizeResource(resource) !== urls.resource) {
      return yield* new OAuthError({ error: "invalid_target", description: `tokens are issued for ${urls.resource} only`, status: 400 })
    }
    if (grant === null || !GRANT_TYPES.includes(grant)) {
      return yield* new OAuthError({ error: "unsupported_grant_type", description: `grant_type must be one of ${GRANT_TYPES.join(", ")}`, status: 400 })
    }
    if (!grantTypeAllowed(client, grant)) {
      return yield* new OAuthError({ error: "unauthorized_client", description: `the client did not register the ${grant} grant`, status: 400 })
    }
    let issued
    if (grant === "authorization_code") {
      const code = params.get("code")
      const verifier = params.get("code_verifier")
      const redirectUri = params.get("redirect_uri")
      if (!code) return yield* invalidRequest("code is required")
      if (verifier === null || !CODE_VERIFIER.test(verifier)) return yield* invalidRequest("code_verifier is required (43–128 characters of [A-Za-z0-9-._~])")
      issued = yield* store.redeemCode(code, (authorization) =>
        authorization.client_id !== client.client_id
          ? Effect.fail(new OAuthError({ error: "invalid_grant", description: "the code was issued to another client", status: 400 }))
          : redirectUri === null || redirectUri !== authorization.redirect_uri
          ? Effect.fail(new OAuthError({ error: "invalid_grant", description: "redirect_uri does not match the authorization request", status: 400 }))
          : !timingSafeEqualText(s256(verifier), authorization.code_challenge)
          ? Effect.fail(new OAuthError({ error: "invalid_grant", description: "PKCE verification failed: code_verifier does not match code_challenge", status: 400 }))
          : Effect.void)
      if (typeof issued === "string") return yield* refusal(issued, "authorization code")
    } else {
      const refreshToken = params.get("refresh_token")
      if (!refreshToken) return yield* invalidRequest("refresh_token is required")
      const scopes = (params.get("scope") ?? LEDGER_SCOPE).split(" ").filter((s) => s.length > 0)
      if (scopes.some((s) => s !== LEDGER_SCOPE)) {
        return yield* new OAuthError({ error: "invalid_scope", description: `the only scope is ${LEDGER_SCOPE}`, status: 400 })
      }
      issued = yield* store.refresh(refreshToken, client.client_id)
      if (typeof issued === "string") return yield* refusal(issued, "refresh token")
    }
    return json({ ...issued, token_type: "Bearer" }, 200, { pragma: "no-cache" })
  })

  const revoke = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = yield* formBody(request)
    const client = yield* authenticateClient(request, params)
    const value = params.get("token")
    if (!value) return yield* new OAuthError({ error: "invalid_request", description: "token is required", status: 400 })
    yield* store.revoke(value, client.client_id)
    return json({})
  })

  /** Maps the endpoint failures to OAuth error bodies (JSON endpoints) or to the error page (browser endpoints). */
  const forClients = <E extends OAuthError | DatabaseUnavailable>(
    handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E>
  ) =>
  (request: HttpServerRequest.HttpServerRequest) =>
    handler(request).pipe(
      Effect.catch((error: OAuthError | DatabaseUnavailable) =>
        Effect.succeed(error._tag === "OAuthError" ? oauthErrorResponse(error) : unavailableResponse())
      )
    )

  const forBrowsers = <E extends OAuthError | DatabaseUnavailable>(
    handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E>
  ) =>
  (request: HttpServerRequest.HttpServerRequest) =>
    handler(request).pipe(
      Effect.catch((error: OAuthError | DatabaseUnavailable) =>
        Effect.succeed(pageResponse(
          errorPage(error._tag === "OAuthError" ? error.description : "The ledger database is unavailable; try again shortly."),
          error._tag === "OAuthError" ? error.status : 503
        ))
      )
    )

  yield* router.add("POST", "/oauth/register", forClients(register))
  yield* router.add("GET", "/oauth/authorize", forBrowsers(authorizeGet))
  yield* router.add("POST", "/oauth/authorize", forBrowsers(authorizePost))
  yield* router.add("GET", "/oauth/oidc/start", forBrowsers(oidcStart))
  yield* router.add("GET", OIDC_CALLBACK_PATH, forBrowsers(oidcCallback))
  yield* router.add("POST", "/oauth/token", forClients(token))
  yield* router.add("POST", "/oauth/revoke", forClients(revoke))
}))
