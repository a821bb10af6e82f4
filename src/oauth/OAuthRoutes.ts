/**
 * The built-in OAuth 2.1 authorization server for MCP clients (see docs/ARCHITECTURE.md):
 *
 *   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (client_id_metadata_document_supported)
 *   POST /oauth/register                           RFC 7591 dynamic client registration (public or confidential)
 *   GET  /oauth/authorize                          checks the request (authorization code + PKCE S256 only); a browser
 *                                                  signed in to the app (its session cookie) goes straight to consent,
 *                                                  any other (or prompt=login) gets the sign-in page
 *   POST /oauth/authorize                          step=signin: the user's email and password (the app's accounts),
 *                                                  or a Personal Access Token, prove the user;
 *                                                  step=consent: the user picks one of their workspaces (or denies)
 *   GET  /oauth/oidc/start                         with LEDGER_OIDC_*: sends the user to the OpenID Connect provider
 *   GET  /oauth/oidc/callback                      its answer: the verified email names the user, then consent
 *   POST /oauth/token                              authorization_code and refresh_token (rotated) grants
 *   POST /oauth/revoke                             RFC 7009
 *
 * Clients: registered dynamically (`ldg_client_…`), or named by the https URL of their Client ID Metadata Document
 * (draft-ietf-oauth-client-id-metadata-document, recommended by the MCP authorization spec 2025-11-25), which is
 * fetched — public addresses only, 5 s, 5 KB, no redirects — checked (its client_id is its URL, redirect_uris,
 * public clients only), cached per its Cache-Control, and named with its host on the consent page
 * (clientMetadataDocument.ts). Such a client is stored, keyed by its URL, when a user signs in for it.
 *
 * Signing in is the same as in the app: the account's email and password (Accounts.signIn), limited per account
 * and per address by the SignInLimiter the app's sign-in uses (a 429 page with Retry-After when limited), the form
 * protected by the app's signed-out CSRF cookie and an Origin check; or the browser's live app session. The page
 * leads with that form; a Personal Access Token stays available below it.
 *
 * Access tokens (`ldg_oat_…`, one hour) are bound to `{publicUrl}/mcp` (RFC 8707) and carry the member's tenant,
 * workspace, user and role: the MCP endpoint resolves them through the common Authenticator like a PAT.
 *
 * Sign-in is also where an external identity provider plugs in. With LEDGER_OIDC_ISSUER and its client id set, the
 * sign-in page offers "Continue with <provider>": the provider's ID token (checked by `OidcProvider`) gives a
 * verified email, and the ledger user with that email continues to the same consent step as after a password. The
 * password and the PAT stay on the page for accounts the provider does not know, and for an email that is a user in
 * several tenants.
 *
 * This module only mounts the steps, each built from one shared `OAuthContext`: metadata.ts, registration.ts,
 * authorize.ts (with authorizationRequest.ts, which the OpenID Connect login shares), oidcLogin.ts, token.ts and
 * revoke.ts (both authenticate the client in clientAuthentication.ts); clientMetadataDocument.ts looks clients up;
 * protocol.ts holds what they all use.
 */
import { Effect, Option } from "effect"
import { HttpRouter } from "effect/http"
import { Accounts } from "../auth/Accounts.ts"
import { AppSessions } from "../auth/AppSessions.ts"
import { Authenticator } from "../auth/Authenticator.ts"
import { SignInLimiter } from "../auth/SignInLimiter.ts"
import { cookieNames } from "../auth/browser.ts"
import { LedgerConfig, LOOPBACK_HOSTS } from "../config/LedgerConfig.ts"
import { mcpUrls } from "./urls.ts"
import { authorizeHandlers } from "./authorize.ts"
import { clientDirectory } from "./clientMetadataDocument.ts"
import { metadataHandlers } from "./metadata.ts"
import { OAuthStore } from "../auth/OAuthStore.ts"
import { oidcLoginHandlers } from "./oidcLogin.ts"
import { oidcProvider } from "./OidcProvider.ts"
import { forBrowsers, forClients, type OAuthContext, OIDC_CALLBACK_PATH, OIDC_START_PATH } from "./protocol.ts"
import { registrationHandlers } from "./registration.ts"
import { revocationHandlers } from "./revoke.ts"
import { tokenHandlers } from "./token.ts"

export const OAuthRoutes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const config = yield* LedgerConfig
  const urls = mcpUrls(config.publicUrl)
  const store = yield* OAuthStore
  const context: OAuthContext = {
    store,
    // Loopback documents (plain http included) only when the ledger itself is on loopback (a developer's machine,
    // the tests): a ledger others reach must not let them make it fetch from its own machine (SSRF).
    clients: clientDirectory(store, { allowLoopback: LOOPBACK_HOSTS.has(new URL(config.publicUrl).hostname) }),
    authenticator: yield* Authenticator,
    accounts: yield* Accounts,
    limiter: yield* SignInLimiter,
    sessions: yield* AppSessions,
    cookies: cookieNames(config.publicUrl),
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
