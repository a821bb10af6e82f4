/**
 * What protects a signed-in browser, for the app and the MCP authorization server (both take passwords and honour
 * the same session): the session cookie (HttpOnly, SameSite=Lax, Secure and `__Host-` when
 * the public URL is https), CSRF tokens on every form, and the same-origin check of every POST.
 *
 * - Signed in, a form's token is derived from the session cookie (auth/AppSessions.ts `csrfTokenOf`).
 * - Signed out (sign-in and sign-up forms), a separate random `csrf` cookie is set with the form and the token is
 *   derived from it: a form posted from another site has neither.
 * - A POST whose Origin (or Sec-Fetch-Site) says it came from another site is refused before anything else.
 * Sign-in always starts a new session with a new cookie value: a cookie planted before sign-in is never promoted.
 */
import { Effect, Option } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import { type AppMember, type AppSessions, csrfTokenOf, SESSION_TTL_MS, sameToken } from "./AppSessions.ts"

export interface CookieNames {
  readonly session: string
  readonly csrf: string
  readonly secure: boolean
}

export const cookieNames = (publicUrl: string): CookieNames => {
  const secure = publicUrl.startsWith("https:")
  return secure
    ? { session: "__Host-ledger_session", csrf: "__Host-ledger_csrf", secure }
    : { session: "ledger_session", csrf: "ledger_csrf", secure }
}

const cookieOptions = (names: CookieNames, maxAgeMs: number) => ({
  httpOnly: true,
  sameSite: "lax" as const,
  secure: names.secure,
  path: "/",
  maxAge: `${Math.floor(maxAgeMs / 1000)} seconds` as const
})

/** The signed-in member of a request, with their session's cookie value. */
export interface SignedIn {
  readonly member: AppMember
  readonly session: string
  readonly csrf: string
}

export const signedIn = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, names: CookieNames, sessions: AppSessions["Service"]) {
  const token = request.cookies[names.session]
  if (token === undefined || token.length === 0 || token.length > 200) return undefined
  const member = yield* sessions.resolve(token)
  return member === undefined ? undefined : ({ member, session: token, csrf: csrfTokenOf(token) } satisfies SignedIn)
})

/** Sets the session cookie for a fresh session. */
export const withSession = (response: HttpServerResponse.HttpServerResponse, names: CookieNames, token: string) =>
  HttpServerResponse.setCookieUnsafe(response, names.session, token, cookieOptions(names, SESSION_TTL_MS))

export const withoutSession = (response: HttpServerResponse.HttpServerResponse, names: CookieNames) =>
  HttpServerResponse.expireCookieUnsafe(response, names.session, { path: "/", secure: names.secure, httpOnly: true, sameSite: "lax" })

/**
 * The signed-out forms' token: from the request's `csrf` cookie, or a new cookie value (`fresh`) the response must
 * set with `withFormCookie`.
 */
export const anonymousCsrf = (request: HttpServerRequest.HttpServerRequest, names: CookieNames) => {
  const existing = request.cookies[names.csrf]
  const value = existing !== undefined && existing.length >= 32 && existing.length <= 100 ? existing : Crypto.randomBytes(32).toString("base64url")
  return { token: csrfTokenOf(value), fresh: value === existing ? undefined : value }
}

export const withFormCookie = (response: HttpServerResponse.HttpServerResponse, names: CookieNames, fresh: string | undefined) =>
  fresh === undefined ? response : HttpServerResponse.setCookieUnsafe(response, names.csrf, fresh, cookieOptions(names, 24 * 3_600_000))

/** Whether a POST's form token is the one its session (or its signed-out csrf cookie) gives. */
export const csrfValid = (request: HttpServerRequest.HttpServerRequest, names: CookieNames, form: URLSearchParams, session?: string): boolean => {
  const sent = form.get("csrf") ?? ""
  const basis = session ?? request.cookies[names.csrf]
  return basis !== undefined && sent.length > 0 && sameToken(sent, csrfTokenOf(basis))
}

/** Whether a POST comes from this origin (browsers send Origin on form posts; Sec-Fetch-Site too). */
export const sameOrigin = (request: HttpServerRequest.HttpServerRequest, publicUrl: string): boolean => {
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") return false
  const origin = request.headers["origin"]
  return origin === undefined || origin === new URL(publicUrl).origin
}

/** The connecting address, for per-address limits. */
export const addressOf = (request: HttpServerRequest.HttpServerRequest) => Option.getOrElse(request.remoteAddress, () => "unknown")

/** A redirect after a POST (303: the browser follows with GET). */
export const seeOther = (location: string) => HttpServerResponse.redirect(location, { status: 303, headers: { "cache-control": "no-store" } })

/**
 * Where to go after sign-in: `next` resolved against the public URL as a browser resolves it (tabs and newlines
 * dropped, backslashes read as slashes), kept only when it stays on this origin. The answer is a path with one
 * leading slash, so no reading of it as a Location can leave the origin.
 */
export const localPath = (next: string | null | undefined, publicUrl: string): string => {
  if (typeof next !== "string" || next.length === 0 || next.length > 4096) return "/"
  const base = new URL(publicUrl)
  const target = URL.parse(next, base)
  if (target === null || target.origin !== base.origin) return "/"
  return `/${target.pathname.replace(/^\/+/, "")}${target.search}${target.hash}`
}
