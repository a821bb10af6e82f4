/**
 * Who calls the token and revocation endpoints (RFC 6749 §2.3.1): a confidential client by its secret, in the
 * Authorization header (client_secret_basic) or the form (client_secret_post); a public client by naming itself. A
 * client known by its metadata document is a public client whose row was written when a user signed in for it.
 */
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import * as Crypto from "node:crypto"
import { hashToken } from "../auth/Credentials.ts"
import type { ClientAuthMethod } from "../auth/OAuthStore.ts"
import { type OAuthContext, OAuthError } from "./protocol.ts"

const invalid = (description: string) => new OAuthError({ error: "invalid_client", description, status: 401 })

/** client_id and secret as an Authorization header carries them (form-encoded, then base64: RFC 6749 §2.3.1) */
const basicCredentials = (header: string | undefined) => {
  const basic = /^Basic\s+(\S+)$/i.exec(header ?? "")
  if (basic === null) return undefined
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  const form = (s: string) => decodeURIComponent(s.replace(/\+/g, " "))
  return {
    clientId: form(decoded.slice(0, colon < 0 ? decoded.length : colon)),
    secret: colon < 0 ? "" : form(decoded.slice(colon + 1))
  }
}

export const authenticateClient = Effect.fnUntraced(function*(
  { store }: OAuthContext,
  request: HttpServerRequest.HttpServerRequest,
  params: URLSearchParams
) {
  const basic = basicCredentials(request.headers.authorization)
  const clientId = basic?.clientId ?? params.get("client_id")
  const secret = basic !== undefined ? basic.secret : params.get("client_secret")
  const method: ClientAuthMethod = basic !== undefined ? "client_secret_basic" : secret === null ? "none" : "client_secret_post"
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
