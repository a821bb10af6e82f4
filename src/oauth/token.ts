/**
 * The token endpoint: the authorization_code grant (checked against the request it was issued for, PKCE S256) and
 * the refresh_token grant (rotated). Tokens are issued for this server's MCP endpoint only (RFC 8707).
 */
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { LEDGER_SCOPE } from "./urls.ts"
import { authenticateClient } from "./clientAuthentication.ts"
import type { GrantRefusal, OAuthClient } from "../auth/OAuthStore.ts"
import { formBody, isCodeVerifier, json, normalizeResource, type OAuthContext, OAuthError, verifierMatches } from "./protocol.ts"
import { GRANT_TYPES } from "./redirectUris.ts"

const invalidRequest = (description: string) => new OAuthError({ error: "invalid_request", description, status: 400 })
const invalidGrant = (description: string) => new OAuthError({ error: "invalid_grant", description, status: 400 })

const refusal = (reason: GrantRefusal, what: string) =>
  invalidGrant({
    unknown: `unknown ${what}`,
    expired: `the ${what} has expired`,
    revoked: `the ${what} was revoked`,
    replayed: `the ${what} was already used; every token issued from it is revoked`
  }[reason])

/** a client that registered no grant types may use both */
const grantTypeAllowed = (client: OAuthClient, grant: string) =>
  !Array.isArray(client.metadata.grant_types) || client.metadata.grant_types.includes(grant)

export const tokenHandlers = (context: OAuthContext) => {
  const { store, urls } = context

  const token = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = yield* formBody(request)
    const client = yield* authenticateClient(context, request, params)
    const grant = params.get("grant_type")
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
      if (verifier === null || !isCodeVerifier(verifier)) return yield* invalidRequest("code_verifier is required (43–128 characters of [A-Za-z0-9-._~])")
      // a failed check keeps the code: the store redeems it only when this succeeds
      issued = yield* store.redeemCode(code, (authorization) =>
        authorization.client_id !== client.client_id
          ? Effect.fail(invalidGrant("the code was issued to another client"))
          : redirectUri === null || redirectUri !== authorization.redirect_uri
          ? Effect.fail(invalidGrant("redirect_uri does not match the authorization request"))
          : !verifierMatches(verifier, authorization.code_challenge)
          ? Effect.fail(invalidGrant("PKCE verification failed: code_verifier does not match code_challenge"))
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

  return { token }
}
