/**
 * The authorization endpoint: GET shows the sign-in page for a checked request; POST answers its two forms, sign-in
 * with a Personal Access Token (step=signin) and the user's choice of workspace or refusal (step=consent).
 */
import { Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { Unauthorized } from "../../domain/errors.ts"
import { checkAuthorize, consentResponse, refusedRequest, signInResponse } from "./authorizationRequest.ts"
import { errorPage } from "./pages.ts"
import { formBody, type OAuthContext, pageResponse, withQuery } from "./protocol.ts"

export const authorizeHandlers = (context: OAuthContext) => {
  const { store, authenticator, urls } = context

  const authorizeGet = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = new URL(request.url, urls.issuer).searchParams
    const check = yield* checkAuthorize(context, params)
    return check._tag === "Valid" ? signInResponse(context, check, params) : refusedRequest(check)
  })

  /** The PAT step: who the user is. (The OpenID Connect login is the other way to the same identity.) */
  const signIn = Effect.fnUntraced(function*(params: URLSearchParams) {
    const check = yield* checkAuthorize(context, params)
    if (check._tag !== "Valid") return refusedRequest(check)
    const principal = yield* authenticator.authenticate(params.get("pat") ?? undefined, "pat").pipe(
      Effect.catchTag("Unauthorized", (refused) => Effect.succeed(refused))
    )
    if (principal instanceof Unauthorized) {
      return signInResponse(
        context,
        check,
        params,
        `That token was not accepted (${principal.message}). Paste a Personal Access Token (ldg_pat_…).`
      )
    }
    const { email, workspaces } = yield* store.memberships(principal.tenant_id, principal.user_id)
    return yield* consentResponse(context, check.client, check.request, principal, email, workspaces, principal.workspace_id)
  })

  /** The user's answer on the consent page: a code for the chosen workspace, or access_denied. */
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

  return { authorizeGet, authorizePost }
}
