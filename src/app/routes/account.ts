/**
 * Sign-in, sign-up (or joining by invitation), one-time sign-in links and sign-out. Every POST is checked for its
 * origin and CSRF token first; sign-in counts failures per account and attempts per address (SignInLimiter); every
 * success starts a new session with a new cookie value.
 */
import { Clock, Effect, Option } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { tokenBuckets } from "../../serving/tokenBuckets.ts"
import { csrfTokenOf } from "../../auth/AppSessions.ts"
import type { MemberIds } from "../../auth/Credentials.ts"
import {
  addressOf,
  anonymousCsrf,
  csrfValid,
  localPath,
  sameOrigin,
  seeOther,
  type SignedIn,
  signedIn,
  withFormCookie,
  withoutSession,
  withSession
} from "../../auth/browser.ts"
import { type AppContext, frameUser, messagePage, readForm, requireMember } from "../context.ts"
import { csrfField, html, page, pageResponse } from "../html.ts"
import { type FormState, invitationPage, passwordPage, provisionedPage, signInPage, signupClosedPage, signUpPage, workspacesPage } from "../pages/account.ts"

/** sign-ups (and invitation acceptances) per address and minute */
const SIGNUPS_PER_MINUTE = 10

/** When a limited attempt may be made again, for a notice. */
const retryIn = (seconds: number) => `Try again in ${Math.ceil(seconds / 60)} minute${seconds > 60 ? "s" : ""}.`

const forbidden = () => messagePage("Refused", "This form has expired or did not come from this site. Go back, reload the page and try again.", 403)

export const accountHandlers = (context: AppContext) => {
  const { accounts, sessions, limiter, names, config } = context
  // the OpenID Connect provider (LEDGER_OIDC_*), named by its host, when one is configured
  const ssoName = Option.match(config.oidc, { onNone: () => undefined, onSome: (oidc) => new URL(oidc.issuer).host })
  const signups = tokenBuckets(SIGNUPS_PER_MINUTE / 60, SIGNUPS_PER_MINUTE)

  /** A signed-out form page with its CSRF cookie. */
  const anonymousPage = (request: HttpServerRequest.HttpServerRequest, draw: (csrf: string) => ReturnType<typeof signInPage>, status = 200) => {
    const { token, fresh } = anonymousCsrf(request, names)
    return withFormCookie(pageResponse(draw(token), status), names, fresh)
  }

  const startSession = (member: MemberIds, response: HttpServerResponse.HttpServerResponse) =>
    Effect.map(sessions.start(member), (token) => withSession(response, names, token))

  /** Checks every POST: same origin and a valid form token (from the session when there is one). */
  const checkedPost = (request: HttpServerRequest.HttpServerRequest, session?: string) =>
    Effect.map(readForm(request), (form) => (sameOrigin(request, config.publicUrl) && csrfValid(request, names, form, session) ? form : undefined))

  const signInGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const query = new URL(request.url, config.publicUrl).searchParams
    const next = query.get("next")
    if ((yield* signedIn(request, names, sessions)) !== undefined) return seeOther(localPath(next, config.publicUrl))
    const refused = query.get("sso")
    const state: FormState = refused === null || ssoName === undefined ? {} : { notice: ssoRefusal(ssoName, refused) }
    return anonymousPage(request, (csrf) => signInPage(csrf, state, { signup: config.signup, next: next ?? undefined, sso: ssoName }), refused === null ? 200 : 403)
  })

  /** Why the OpenID Connect provider's sign-in did not sign the person in (the callback's `sso` reason). */
  const ssoRefusal = (provider: string, reason: string) => {
    switch (reason) {
      case "unavailable":
        return `Signing in with ${provider} is not possible right now. Try again, or use your password.`
      case "refused":
        return `${provider} did not sign you in.`
      case "unverified":
        return `${provider} has not verified your email address; the ledger signs in verified addresses only.`
      case "domain":
        return `Accounts of your email domain may not sign in here through ${provider}.`
      case "none":
        return `No one with your email address is a member here. Ask an administrator for an invitation.`
      case "several":
        return `Your email address belongs to several users here; sign in with your password.`
      case "linked-elsewhere":
        return `Your ledger user signs in with another account at ${provider}; use that one, or your password.`
      default:
        return `Signing in with ${provider} failed. Try again, or use your password.`
    }
  }

  const signInPost = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const form = yield* checkedPost(request)
    if (form === undefined) return forbidden()
    const email = (form.get("email") ?? "").slice(0, 320)
    const password = (form.get("password") ?? "").slice(0, 1024)
    const next = form.get("next") ?? undefined
    const again = (state: FormState, status: number) =>
      anonymousPage(request, (csrf) => signInPage(csrf, { values: { email }, ...state }, { signup: config.signup, next, sso: ssoName }), status)
    const wait = yield* limiter.attempt(email, addressOf(request))
    if (wait > 0) {
      yield* Effect.logWarning("app sign-in limited").pipe(Effect.annotateLogs({ address: addressOf(request) }))
      return HttpServerResponse.setHeader(
        again({ notice: `Too many sign-in attempts. ${retryIn(wait)}` }, 429),
        "retry-after",
        String(wait)
      )
    }
    const member = yield* accounts.signIn(email, password)
    if (member === undefined) {
      yield* limiter.failed(email)
      return again({ notice: "That email and password do not match an account." }, 401)
    }
    yield* limiter.succeeded(email)
    yield* Effect.logInfo("app sign-in").pipe(Effect.annotateLogs({ tenant_id: member.tenant_id, user_id: member.user_id }))
    return yield* startSession(member, seeOther(localPath(next, config.publicUrl)))
  })

  const signUpGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const invitation = new URL(request.url, config.publicUrl).searchParams.get("invitation")
    if (invitation !== null && config.signup !== "closed") {
      const pending = yield* accounts.pendingInvitation(invitation)
      if (pending === undefined) return messagePage("Invitation", "This invitation has expired or was already used. Ask for a new one.", 404)
      return anonymousPage(request, (csrf) => invitationPage(csrf, invitation, pending, {}))
    }
    if (config.signup !== "open") return pageResponse(signupClosedPage(config.signup), 403)
    return anonymousPage(request, (csrf) => signUpPage(csrf, {}))
  })

  const signUpPost = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const form = yield* checkedPost(request)
    if (form === undefined) return forbidden()
    const wait = signups(addressOf(request), yield* Clock.currentTimeMillis)
    if (wait > 0) return HttpServerResponse.setHeader(messagePage("Sign-up", "Too many sign-ups from your address; try again in a minute.", 429), "retry-after", String(wait))
    const invitation = form.get("invitation")
    const password = (form.get("password") ?? "").slice(0, 2048)
    if (invitation !== null) {
      if (config.signup === "closed") return pageResponse(signupClosedPage(config.signup), 403)
      const joined = yield* accounts.acceptInvitation(invitation, password).pipe(
        Effect.map((ok) => ({ ok, refused: undefined })),
        Effect.catchTags({
          NotFound: (refused) => Effect.succeed({ ok: undefined, refused }),
          AccountProblem: (refused) => Effect.succeed({ ok: undefined, refused })
        })
      )
      if (joined.refused?._tag === "NotFound") return messagePage("Invitation", joined.refused.message, 404)
      if (joined.refused?._tag === "AccountProblem") {
        const problem = joined.refused
        const pending = yield* accounts.pendingInvitation(invitation)
        if (pending === undefined) return messagePage("Invitation", "This invitation has expired or was already used.", 404)
        return anonymousPage(request, (csrf) => invitationPage(csrf, invitation, pending, { problem }), 400)
      }
      return yield* provisioned(joined.ok!)
    }
    if (config.signup !== "open") return pageResponse(signupClosedPage(config.signup), 403)
    const values = { organisation: form.get("organisation") ?? "", workspace: form.get("workspace") ?? "", email: form.get("email") ?? "" }
    const created = yield* accounts.signUp({ ...values, password }).pipe(
      Effect.map((ok) => ({ ok, problem: undefined })),
      Effect.catchTag("AccountProblem", (problem) => Effect.succeed({ ok: undefined, problem }))
    )
    if (created.problem !== undefined) {
      const problem = created.problem
      return anonymousPage(request, (csrf) => signUpPage(csrf, { values, problem }), 400)
    }
    return yield* provisioned(created.ok!)
  })

  /** The keys of a new account or membership, shown once, on the first page of its new session. */
  const provisioned = Effect.fnUntraced(function*(created: MemberIds & { readonly gateway_key: string; readonly pat: string | null }) {
    const token = yield* sessions.start(created)
    const member = yield* sessions.resolve(token)
    if (member === undefined) return messagePage("Sign-up", "Your account was created, but its session could not be opened: sign in.", 500)
    const user = frameUser({ member, session: token, csrf: csrfTokenOf(token) })
    return withSession(pageResponse(provisionedPage(user, context.setup, created)), names, token)
  })

  const linkGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const token = new URL(request.url, config.publicUrl).searchParams.get("token") ?? ""
    // a page with a button, not a sign-in on GET: link previews and prefetchers must not use the link up
    return anonymousPage(request, (csrf) =>
      page({
        title: "Sign in",
        body: html`<div class="narrow"><section class="card"><p>This one-time link signs you in to the ledger.</p>
<form method="post" action="/signin/link" class="stack">${csrfField(csrf)}<input type="hidden" name="token" value="${token}">
<button type="submit" class="primary">Sign in</button></form></section></div>`
      }))
  })

  const linkPost = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const form = yield* checkedPost(request)
    if (form === undefined) return forbidden()
    const used = yield* sessions.useSignInLink(form.get("token") ?? "")
    if (used === undefined) return messagePage("Sign in", "This sign-in link has expired or was already used. Sign in with your password, or ask for a new link.", 404)
    yield* Effect.logInfo("app sign-in by link").pipe(Effect.annotateLogs({ tenant_id: used.member.tenant_id, user_id: used.member.user_id }))
    // the link is for people without a password, or who lost theirs: they choose one next
    return withSession(seeOther("/account/password"), names, used.session)
  })

  /**
   * Whether changing the password asks for the current one: always when the user has one, but in the first minutes
   * of a session a sign-in link started (AppSessions.PASSWORD_RESET_MS) — how an administrator lets someone who
   * lost theirs back in. A user without a password has nothing to confirm.
   */
  const asksCurrentPassword = (signed: SignedIn) =>
    signed.member.resetsPassword ? Effect.succeed(false) : accounts.hasPassword(signed.member.principal.user_id)

  const passwordGet = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.map(asksCurrentPassword(signed), (current) => pageResponse(passwordPage(frameUser(signed), {}, current))))

  /**
   * A wrong current password counts as a failed sign-in (SignInLimiter), so the form cannot be used to guess. A
   * change ends every other session of the user and moves this browser to a new one.
   */
  const passwordPost = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checkedPost(request, signed.session)
        if (form === undefined) return forbidden()
        const { email, principal } = signed.member
        const current = yield* asksCurrentPassword(signed)
        const again = (state: FormState, status: number) => pageResponse(passwordPage(frameUser(signed), state, current), status)
        if (current) {
          const wait = yield* limiter.attempt(email, addressOf(request))
          if (wait > 0) {
            return HttpServerResponse.setHeader(again({ notice: `Too many wrong passwords. ${retryIn(wait)}` }, 429), "retry-after", String(wait))
          }
          if (!(yield* accounts.passwordMatches(principal.user_id, (form.get("current_password") ?? "").slice(0, 1024)))) {
            yield* limiter.failed(email)
            return again({
              notice: "That is not your current password; your password is unchanged.",
              problem: { field: "current_password", message: "Enter the password you sign in with now." }
            }, 401)
          }
          yield* limiter.succeeded(email)
        }
        const problem = yield* accounts.setPassword(principal.user_id, email, (form.get("password") ?? "").slice(0, 2048)).pipe(
          Effect.as(undefined),
          Effect.catchTag("AccountProblem", (problem) => Effect.succeed(problem))
        )
        if (problem !== undefined) return again({ problem }, 400)
        const token = yield* sessions.start({ tenant_id: principal.tenant_id, workspace_id: principal.workspace_id, user_id: principal.user_id })
        yield* sessions.endOthers(principal.user_id, token)
        yield* Effect.logInfo("app password changed").pipe(Effect.annotateLogs({ tenant_id: principal.tenant_id, user_id: principal.user_id }))
        const member = yield* sessions.resolve(token)
        if (member === undefined) return withoutSession(seeOther("/signin"), names)
        const moved = { member, session: token, csrf: csrfTokenOf(token) }
        return withSession(pageResponse(passwordPage(frameUser(moved), { notice: "Your password is set; your other sessions are signed out." }, true)), names, token)
      }))

  const signOut = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const signed = yield* signedIn(request, names, sessions)
    if (signed === undefined) return withoutSession(seeOther("/signin"), names)
    const form = yield* checkedPost(request, signed.session)
    if (form === undefined) return forbidden()
    yield* sessions.end(signed.session)
    return withoutSession(seeOther("/signin"), names)
  })

  const workspacesResponse = (signed: SignedIn, state: FormState, status = 200) =>
    Effect.map(
      accounts.workspaces(signed.member.principal),
      (workspaces) => pageResponse(workspacesPage(frameUser(signed), signed.member.principal.workspace_id, workspaces, state), status)
    )

  const workspacesGet = (request: HttpServerRequest.HttpServerRequest) => requireMember(context, request, (signed) => workspacesResponse(signed, {}))

  /** Moves the browser to another workspace of the user: a new session there (the old one ends). */
  const moveTo = Effect.fnUntraced(function*(signed: SignedIn, workspaceId: string) {
    const principal = signed.member.principal
    const token = yield* sessions.start({ tenant_id: principal.tenant_id, workspace_id: workspaceId, user_id: principal.user_id })
    yield* sessions.end(signed.session)
    return withSession(seeOther("/"), names, token)
  })

  const workspaceSwitch = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checkedPost(request, signed.session)
        if (form === undefined) return forbidden()
        const target = form.get("workspace_id") ?? ""
        const mine = yield* accounts.workspaces(signed.member.principal)
        if (!mine.some((workspace) => workspace.workspace_id === target)) {
          return yield* workspacesResponse(signed, { notice: "You are not a member of that workspace." }, 404)
        }
        return yield* moveTo(signed, target)
      }))

  const workspaceCreate = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checkedPost(request, signed.session)
        if (form === undefined) return forbidden()
        if (!signed.member.admin) return yield* workspacesResponse(signed, { notice: "Only administrators create workspaces." }, 403)
        const name = (form.get("workspace") ?? "").slice(0, 200)
        const created = yield* accounts.createWorkspace(signed.member.principal, name).pipe(
          Effect.map((workspaceId) => ({ workspaceId, problem: undefined })),
          Effect.catchTag("AccountProblem", (problem) => Effect.succeed({ workspaceId: undefined, problem }))
        )
        if (created.problem !== undefined) return yield* workspacesResponse(signed, { values: { workspace: name }, problem: created.problem }, 400)
        yield* Effect.logInfo("app workspace created").pipe(Effect.annotateLogs({ workspace_id: created.workspaceId, user_id: signed.member.principal.user_id }))
        return yield* moveTo(signed, created.workspaceId!)
      }))

  return {
    signInGet,
    signInPost,
    signUpGet,
    signUpPost,
    linkGet,
    linkPost,
    signOut,
    passwordGet,
    passwordPost,
    workspacesGet,
    workspaceSwitch,
    workspaceCreate
  }
}
