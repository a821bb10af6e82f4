/**
 * The built-in OAuth 2.1 authorization server for MCP clients (see docs/ARCHITECTURE.md):
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
 *
 * This module only mounts the steps, each built from one shared `OAuthContext`: metadata.ts, registration.ts,
 * authorize.ts (with authorizationRequest.ts, which the OpenID Connect login shares), oidcLogin.ts, token.ts and
 * revoke.ts (both authenticate the client in clientAuthentication.ts); protocol.ts holds what they all use.
 */
import { Effect, Option } from "effect"
import { HttpRouter } from "effect/http"
import { Authenticator } from "../../auth/Authenticator.ts"
import { LedgerConfig } from "../../config/LedgerConfig.ts"
import { mcpUrls } from "../urls.ts"
import { authorizeHandlers } from "./authorize.ts"
import { metadataHandlers } from "./metadata.ts"
import { OAuthStore } from "../../auth/OAuthStore.ts"
import { oidcLoginHandlers } from "./oidcLogin.ts"
import { oidcProvider } from "./OidcProvider.ts"
import { forBrowsers, forClients, type OAuthContext, OIDC_CALLBACK_PATH, OIDC_START_PATH } from "./protocol.ts"
import { registrationHandlers } from "./registration.ts"
import { revocationHandlers } from "./revoke.ts"
import { tokenHandlers } from "./token.ts"

export const OAuthRoutes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const config = yield* LedgerConfig
  const urls = mcpUrls(config.publicUrl)
  const context: OAuthContext = {
    store: yield* OAuthStore,
    authenticator: yield* Authenticator,
    urls,
    oidc: Option.map(config.oidc, (settings) => oidcProvider(settings, `${urls.issuer}${OIDC_CALLBACK_PATH}`))
  }

  const { metadata, preflight } = metadataHandlers(context)
  const { register } = registrationHandlers(context)
  const { authorizeGet, authorizePost } = authorizeHandlers(context)
  const { oidcStart, oidcCallback } = oidcLoginHandlers(context)
  const { token } = tokenHandlers(context)
  const { revoke } = revocationHandlers(context)

  yield* router.add("GET", "/.well-known/oauth-authorization-server", metadata)
  for (const path of ["/.well-known/oauth-authorization-server", "/oauth/register", "/oauth/token", "/oauth/revoke"] as const) {
    yield* router.add("OPTIONS", path, preflight)
  }
  yield* router.add("POST", "/oauth/register", forClients(register))
  yield* router.add("GET", "/oauth/authorize", forBrowsers(authorizeGet))
  yield* router.add("POST", "/oauth/authorize", forBrowsers(authorizePost))
  yield* router.add("GET", OIDC_START_PATH, forBrowsers(oidcStart))
  yield* router.add("GET", OIDC_CALLBACK_PATH, forBrowsers(oidcCallback))
  yield* router.add("POST", "/oauth/token", forClients(token))
  yield* router.add("POST", "/oauth/revoke", forClients(revoke))
}))
