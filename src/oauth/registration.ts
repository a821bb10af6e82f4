/**
 * Dynamic client registration (RFC 7591): any MCP client may register, as a public client (PKCE only) or a
 * confidential one (it gets a secret). The metadata is checked, then stored with the client.
 */
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { ClientAuthMethod } from "../auth/OAuthStore.ts"
import { bodyText, json, type OAuthContext, OAuthError, perAddressLimit } from "./protocol.ts"
import { GRANT_TYPES, redirectUriProblem } from "./redirectUris.ts"

/**
 * Client registrations accepted per connecting address and minute, in bursts of as many. Registration is open to
 * anyone (RFC 7591) and each one is a stored client; an MCP client registers once and keeps its client id.
 */
const REGISTRATIONS_PER_MINUTE = 30
/** the optional metadata kept and echoed back as the client sent it */
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
const AUTH_METHODS: ReadonlyArray<ClientAuthMethod> = ["none", "client_secret_post", "client_secret_basic"]

const invalidMetadata = (description: string) => new OAuthError({ error: "invalid_client_metadata", description, status: 400 })

export const registrationHandlers = ({ store }: OAuthContext) => {
  const registrations = perAddressLimit(REGISTRATIONS_PER_MINUTE)

  const register = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const wait = yield* registrations(request)
    if (wait > 0) {
      return json({
        error: "rate_limited",
        error_description: `at most ${REGISTRATIONS_PER_MINUTE} client registrations a minute from one address; retry in ${wait} s`
      }, 429, { "retry-after": String(wait) })
    }
    const text = yield* bodyText(request)
    const body = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => invalidMetadata("the body must be a JSON object")
    })
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* invalidMetadata("the body must be a JSON object")
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
      return yield* invalidMetadata(`token_endpoint_auth_method must be one of ${AUTH_METHODS.join(", ")}`)
    }
    const grantTypes = input.grant_types ?? GRANT_TYPES
    if (!Array.isArray(grantTypes) || !grantTypes.every((g) => GRANT_TYPES.includes(g))) {
      return yield* invalidMetadata(`grant_types may contain ${GRANT_TYPES.join(", ")}`)
    }
    const responseTypes = input.response_types ?? ["code"]
    if (!Array.isArray(responseTypes) || !responseTypes.every((r) => r === "code")) {
      return yield* invalidMetadata("response_types may contain code only")
    }
    if (input.client_name !== undefined && (typeof input.client_name !== "string" || input.client_name.length > 200)) {
      return yield* invalidMetadata("client_name must be a string of at most 200 characters")
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

  return { register }
}
