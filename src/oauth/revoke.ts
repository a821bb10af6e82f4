/** Token revocation (RFC 7009): the authenticated client ends one of its tokens; an unknown token is no error. */
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { authenticateClient } from "./clientAuthentication.ts"
import { formBody, json, type OAuthContext, OAuthError } from "./protocol.ts"

export const revocationHandlers = (context: OAuthContext) => {
  const revoke = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const params = yield* formBody(request)
    const client = yield* authenticateClient(context, request, params)
    const value = params.get("token")
    if (!value) return yield* new OAuthError({ error: "invalid_request", description: "token is required", status: 400 })
    yield* context.store.revoke(value, client.client_id)
    return json({})
  })

  return { revoke }
}
