/**
 * What the authorization server's endpoints share: the context they are built from, the OAuth error shape and the
 * responses that carry it, bounded form parsing, the redirect-URI rules, PKCE and the per-address limits.
 */
import { Clock, Effect, Option, Schema } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import type { Accounts } from "../auth/Accounts.ts"
import type { AppSessions } from "../auth/AppSessions.ts"
import type { Authenticator } from "../auth/Authenticator.ts"
import type { SignInLimiter } from "../auth/SignInLimiter.ts"
import type { CookieNames } from "../auth/browser.ts"
import { tokenBuckets } from "../serving/tokenBuckets.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { McpUrls } from "./urls.ts"
import type { OAuthStore } from "../auth/OAuthStore.ts"
import type { ClientDirectory } from "./clientMetadataDocument.ts"
import type { OidcProvider } from "./OidcProvider.ts"
import { errorPage } from "./pages.ts"

/** What every step is built from; `OAuthRoutes` assembles it once per server. */
export interface OAuthContext {
  readonly store: OAuthStore["Service"]
  /** the clients authorization requests name: registered ones, and those known by their metadata document */
  readonly clients: ClientDirectory
  readonly authenticator: Authenticator["Service"]
  /** the app's accounts: the sign-in page's email and password, limited like the app's own sign-in */
  readonly accounts: Accounts["Service"]
  readonly limiter: SignInLimiter["Service"]
  /** the app's browser sessions: a signed-in browser goes straight to consent */
  readonly sessions: AppSessions["Service"]
  /** the app's cookies (its session, and the signed-out forms' CSRF cookie) */
  readonly cookies: CookieNames
  readonly urls: McpUrls
  /** the OpenID Connect provider, when LEDGER_OIDC_* configure one */
  readonly oidc: Option.Option<OidcProvider>
}

/** An OAuth error response (RFC 6749 §5.2 shape). */
export class OAuthError extends Schema.TaggedError<OAuthError>()("OAuthError", {
  error: Schema.String,
  description: Schema.String,
  status: Schema.Number
}) {}

export const OIDC_START_PATH = "/oauth/oidc/start"
/** where the OpenID Connect provider sends the user back: register `{LEDGER_PUBLIC_URL}/oauth/oidc/callback` there */
export const OIDC_CALLBACK_PATH = "/oauth/oidc/callback"

const MAX_BODY_BYTES = 64 * 1024
/** RFC 7636 §4.2: an S256 challenge is 43 base64url characters */
const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/
/** RFC 7636 §4.1 */
const CODE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/

export const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-allow-headers": "Authorization, Content-Type, MCP-Protocol-Version",
  "access-control-max-age": "600"
}

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store", ...CORS, ...headers } })

const oauthErrorResponse = (e: OAuthError) =>
  json(
    { error: e.error, error_description: e.description },
    e.status,
    e.status === 401 ? { "www-authenticate": `Basic realm="ledger", error="${e.error}"` } : {}
  )

const unavailableResponse = () =>
  json({ error: "temporarily_unavailable", error_description: "the ledger database is unavailable; retry shortly" }, 503)

/** The CSP source of a redirect target, so a form may end in it (Chrome applies form-action to redirects). */
const redirectSource = (uri: string): string => {
  const url = new URL(uri)
  return url.protocol === "http:" || url.protocol === "https:" ? url.origin : url.protocol
}

export const pageResponse = (html: string, status = 200, redirectUri?: string) =>
  HttpServerResponse.text(html, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-store",
      "x-frame-options": "DENY",
      // the request's URL (state, PKCE challenge) never goes to another site as a Referer; not no-referrer, with
      // which browsers send `Origin: null` on the forms' posts and the password form's origin check needs the origin
      "referrer-policy": "same-origin",
      "x-content-type-options": "nosniff",
      "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; frame-ancestors 'none'; ` +
        `form-action 'self'${redirectUri ? ` ${redirectSource(redirectUri)}` : ""}`
    }
  })

type Handler<E> = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E>

/** JSON endpoints (register, token, revoke): failures become OAuth error bodies. */
export const forClients = <E extends OAuthError | DatabaseUnavailable>(handler: Handler<E>) =>
(request: HttpServerRequest.HttpServerRequest) =>
  handler(request).pipe(
    Effect.catch((error: OAuthError | DatabaseUnavailable) =>
      Effect.succeed(error._tag === "OAuthError" ? oauthErrorResponse(error) : unavailableResponse())
    )
  )

/** Browser endpoints (authorize, the OpenID Connect login): failures become the error page. */
export const forBrowsers = <E extends OAuthError | DatabaseUnavailable>(handler: Handler<E>) =>
(request: HttpServerRequest.HttpServerRequest) =>
  handler(request).pipe(
    Effect.catch((error: OAuthError | DatabaseUnavailable) =>
      Effect.succeed(pageResponse(
        errorPage(error._tag === "OAuthError" ? error.description : "The ledger database is unavailable; try again shortly."),
        error._tag === "OAuthError" ? error.status : 503
      ))
    )
  )

/**
 * A limit per connecting address and minute, in bursts of as many: the seconds to wait, 0 when the request may go on.
 * Each call makes its own buckets, so each endpoint is counted apart.
 */
export const perAddressLimit = (perMinute: number) => {
  const buckets = tokenBuckets(perMinute / 60, perMinute)
  return (request: HttpServerRequest.HttpServerRequest) =>
    Effect.map(Clock.currentTimeMillis, (now) => buckets(Option.getOrElse(request.remoteAddress, () => "unknown"), now))
}

/** Reads a bounded body as text. */
export const bodyText = (request: HttpServerRequest.HttpServerRequest) =>
  Number(request.headers["content-length"] ?? 0) > MAX_BODY_BYTES
    ? Effect.fail(new OAuthError({ error: "invalid_request", description: "request body too large", status: 413 }))
    : request.text.pipe(
      Effect.mapError(() => new OAuthError({ error: "invalid_request", description: "could not read the request body", status: 400 }))
    )

/** A form body whose parameters each appear once (RFC 6749 §3.1: a repeated parameter is an invalid request). */
export const formBody = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
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


export const withQuery = (uri: string, params: Record<string, string | null | undefined>): string => {
  const url = new URL(uri)
  for (const [key, value] of Object.entries(params)) if (typeof value === "string") url.searchParams.set(key, value)
  return url.toString()
}

export const normalizeResource = (resource: string) => resource.replace(/\/+$/, "")

export const isCodeChallenge = (challenge: string) => CODE_CHALLENGE.test(challenge)

export const isCodeVerifier = (verifier: string) => CODE_VERIFIER.test(verifier)

/** PKCE S256 (RFC 7636 §4.6), compared in constant time. */
export const verifierMatches = (verifier: string, challenge: string) => {
  const x = Buffer.from(Crypto.createHash("sha256").update(verifier).digest("base64url"))
  const y = Buffer.from(challenge)
  return x.length === y.length && Crypto.timingSafeEqual(x, y)
}
