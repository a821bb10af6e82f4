/**
 * Admin → API Keys (every member: their own keys; an admin: the workspace's), Members and Pipeline (admins). Every
 * POST is checked for origin and the session's CSRF token; a secret is in the response that creates it and nowhere
 * else (never logged, never stored in plain text, never shown again).
 */
import { Clock, Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { BadRequest, type DatabaseUnavailable, type NotFound } from "../../domain/errors.ts"
import type { MemberRole } from "../../domain/principal.ts"
import { PipelineStatus } from "../../ops/Status.ts"
import { csrfValid, sameOrigin, type SignedIn } from "../../auth/browser.ts"
import { type AppContext, frameUser, messagePage, readForm, requireMember } from "../context.ts"
import { pageResponse } from "../html.ts"
import { keysPage, membersPage, pipelinePage } from "../pages/admin.ts"
import { isUuid } from "../../domain/identifiers.ts"

type Message = { readonly text: string; readonly tone: "ok" | "bad" }

const MAX_KEY_NAME = 100

const workspaceOf = (signed: SignedIn) => ({ tenant_id: signed.member.principal.tenant_id, workspace_id: signed.member.principal.workspace_id })

/** An expiry date from the form (end of that day, UTC), undefined when none, or a message why it is refused. */
const expiryOf = (value: string, now: number): Date | undefined | string => {
  if (value === "") return undefined
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return "Give the expiry as a date."
  const date = new Date(`${value}T23:59:59.999Z`)
  if (Number.isNaN(date.getTime())) return "Give the expiry as a date."
  return date.getTime() <= now ? "The expiry must be in the future." : date
}

export const adminHandlers = (context: AppContext, pipeline: PipelineStatus["Service"]) => {
  const { credentials, accounts, config } = context

  /** A POST from a signed-in member, checked; undefined when it must be refused. */
  const checked = (request: HttpServerRequest.HttpServerRequest, signed: SignedIn) =>
    Effect.map(readForm(request), (form) => (sameOrigin(request, config.publicUrl) && csrfValid(request, context.names, form, signed.session) ? form : undefined))

  const refused = (signed: SignedIn) => messagePage("Refused", "This form has expired or did not come from this site. Reload the page and try again.", 403, signed)
  const adminsOnly = (signed: SignedIn) => messagePage("Administrators only", "Only the workspace's administrators can see this page.", 403, signed)

  const keysResponse = Effect.fnUntraced(function*(signed: SignedIn, extra: { created?: { kind: "pat" | "gateway"; token: string }; message?: Message } = {}, status = 200) {
    const keys = yield* credentials.list(workspaceOf(signed), signed.member.admin ? undefined : signed.member.principal.user_id)
    const now = new Date(yield* Clock.currentTimeMillis)
    return pageResponse(keysPage({ user: frameUser(signed), keys, now, ...extra }), status)
  })

  const keysGet = (request: HttpServerRequest.HttpServerRequest) => requireMember(context, request, (signed) => keysResponse(signed))

  const keysCreate = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checked(request, signed)
        if (form === undefined) return refused(signed)
        const kind = form.get("kind")
        if (kind !== "pat" && kind !== "gateway") return yield* keysResponse(signed, { message: { text: "Choose a kind of key.", tone: "bad" } }, 400)
        const expiry = expiryOf(form.get("expires") ?? "", yield* Clock.currentTimeMillis)
        if (typeof expiry === "string") return yield* keysResponse(signed, { message: { text: expiry, tone: "bad" } }, 400)
        const name = (form.get("name") ?? "").trim().slice(0, MAX_KEY_NAME)
        const principal = signed.member.principal
        const created = yield* credentials.issue(
          { tenant_id: principal.tenant_id, workspace_id: principal.workspace_id, user_id: principal.user_id },
          kind,
          expiry ?? null,
          name === "" ? null : name
        )
        yield* Effect.logInfo("app key created").pipe(Effect.annotateLogs({ token_id: created.token_id, kind, user_id: principal.user_id }))
        return yield* keysResponse(signed, { created: { kind, token: created.token } })
      }))

  const keysRevoke = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checked(request, signed)
        if (form === undefined) return refused(signed)
        const tokenId = form.get("token_id") ?? ""
        const revoked = isUuid(tokenId)
          ? yield* credentials.revokeIn(workspaceOf(signed), tokenId, signed.member.admin ? undefined : signed.member.principal.user_id)
          : false
        if (revoked) yield* Effect.logInfo("app key revoked").pipe(Effect.annotateLogs({ token_id: tokenId, by: signed.member.principal.user_id }))
        return yield* keysResponse(
          signed,
          { message: revoked ? { text: "Revoked: it stops working on every surface within 5 seconds.", tone: "ok" } : { text: "No such active key.", tone: "bad" } },
          revoked ? 200 : 404
        )
      }))

  const membersResponse = Effect.fnUntraced(function*(signed: SignedIn, extra: { invited?: { email: string; link: string }; message?: Message } = {}, status = 200) {
    const [members, invitations] = yield* Effect.all([accounts.members(workspaceOf(signed)), accounts.invitations(workspaceOf(signed))])
    return pageResponse(membersPage({
      user: { ...frameUser(signed), user_id: signed.member.principal.user_id },
      members,
      invitations,
      invitationsOpen: config.signup !== "closed",
      ...extra
    }), status)
  })

  /** An admin-only page or action. */
  const forAdmins = <E, R>(request: HttpServerRequest.HttpServerRequest, then: (signed: SignedIn) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    requireMember(context, request, (signed) => (signed.member.admin ? then(signed) : Effect.succeed(adminsOnly(signed))))

  const membersGet = (request: HttpServerRequest.HttpServerRequest) => forAdmins(request, (signed) => membersResponse(signed))

  const membersInvite = (request: HttpServerRequest.HttpServerRequest) =>
    forAdmins(request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checked(request, signed)
        if (form === undefined) return refused(signed)
        if (config.signup === "closed") return yield* membersResponse(signed, { message: { text: "Sign-up is closed on this server.", tone: "bad" } }, 403)
        const role = form.get("role") === "restricted" ? "restricted" : "member"
        const email = (form.get("email") ?? "").slice(0, 320)
        const result = yield* accounts.invite(workspaceOf(signed), signed.member.principal.user_id, email, role).pipe(
          Effect.map((ok) => ({ ok, problem: undefined })),
          Effect.catchTag("AccountProblem", (problem) => Effect.succeed({ ok: undefined, problem }))
        )
        if (result.problem !== undefined) return yield* membersResponse(signed, { message: { text: result.problem.message, tone: "bad" } }, 400)
        yield* Effect.logInfo("app invitation created").pipe(Effect.annotateLogs({ invitation_id: result.ok!.invitation_id, role }))
        return yield* membersResponse(signed, { invited: { email, link: `${config.publicUrl}/signup?invitation=${result.ok!.token}` } })
      }))

  /** A change to one member (role or removal), with the refusals the store gives turned into messages. */
  const memberChange = (
    request: HttpServerRequest.HttpServerRequest,
    change: (signed: SignedIn, userId: string, form: URLSearchParams) => Effect.Effect<string, NotFound | BadRequest | DatabaseUnavailable>
  ) =>
    forAdmins(request, (signed) =>
      Effect.gen(function*() {
        const form = yield* checked(request, signed)
        if (form === undefined) return refused(signed)
        const userId = form.get("user_id") ?? ""
        const outcome = yield* change(signed, userId, form).pipe(
          Effect.map((text): Message => ({ text, tone: "ok" })),
          Effect.catchTags({
            NotFound: (error) => Effect.succeed<Message>({ text: error.message, tone: "bad" }),
            BadRequest: (error) => Effect.succeed<Message>({ text: error.message, tone: "bad" })
          })
        )
        return yield* membersResponse(signed, { message: outcome }, outcome.tone === "ok" ? 200 : 400)
      }))

  const membersRole = (request: HttpServerRequest.HttpServerRequest) =>
    memberChange(request, (signed, userId, form) => {
      const role: MemberRole = form.get("role") === "restricted" ? "restricted" : "member"
      return Effect.as(accounts.setRole(workspaceOf(signed), userId, role), `Role set to ${role}.`)
    })

  const membersRemove = (request: HttpServerRequest.HttpServerRequest) =>
    memberChange(request, (signed, userId) =>
      userId === signed.member.principal.user_id
        ? Effect.fail(new BadRequest({ message: "You cannot remove yourself." }))
        : Effect.as(accounts.removeMember(workspaceOf(signed), userId), "Removed: their keys and sessions no longer work."))

  /** The pipeline's figures span every tenant: operators only (AppMember.operator). */
  const forOperators = <E, R>(request: HttpServerRequest.HttpServerRequest, then: (signed: SignedIn) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    requireMember(context, request, (signed) =>
      signed.member.operator
        ? then(signed)
        : Effect.succeed(messagePage("Operators only", "The pipeline's figures span the whole installation: only its operators see them.", 403, signed)))

  const pipelineGet = (request: HttpServerRequest.HttpServerRequest) =>
    forOperators(request, (signed) => Effect.map(pipeline.report, (report) => pageResponse(pipelinePage(frameUser(signed), report))))

  const pipelineJson = (request: HttpServerRequest.HttpServerRequest) =>
    forOperators(request, () => Effect.map(pipeline.report, (report) => HttpServerResponse.jsonUnsafe(report, { headers: { "cache-control": "no-store" } })))

  return { keysGet, keysCreate, keysRevoke, membersGet, membersInvite, membersRole, membersRemove, pipelineGet, pipelineJson }
}
