/**
 * The ledger as a client of an external OpenID Connect provider (LEDGER_OIDC_*), for the MCP OAuth sign-in (SSO).
 *
 * `openid-client` does the protocol: discovery, the authorization URL (code flow, PKCE S256, nonce), the code
 * exchange and the ID token's checks (issuer, audience, expiry, nonce, and its signature against the provider's JWKS). This
 * module only says what the ledger asks for (`openid email`) and what it takes from the answer: the email, and
 * whether the provider verified it.
 */
import { Effect, Option, Redacted, Schema } from "effect"
import * as Oidc from "openid-client"
import { LOOPBACK_HOSTS, type OidcSettings } from "../config/LedgerConfig.ts"
import type { OidcLogin } from "../auth/OAuthStore.ts"

export class OidcFailure extends Schema.TaggedError<OidcFailure>()("OidcFailure", {
  message: Schema.String
}) {}

export interface OidcIdentity {
  /** the issuer as the provider names itself, and its subject identifier: the account, for good */
  readonly issuer: string
  readonly subject: string
  /** undefined when the provider told none */
  readonly email: string | undefined
  readonly emailVerified: boolean
}

export interface OidcProvider {
  /** the provider's host, as the sign-in page names it */
  readonly name: string
  /** email domains whose users may sign in (lower case); empty: any */
  readonly allowedDomains: ReadonlyArray<string>
  /** The provider's configuration is at hand (discovered once; a failure is tried again next time). */
  readonly ready: Effect.Effect<void, OidcFailure>
  /** Where to send the user to sign in for this login. */
  authorizationUrl(login: OidcLogin): Effect.Effect<URL, OidcFailure>
  /** Redeems the code of the provider's callback (its query) and checks its ID token: who signed in. */
  identify(callbackQuery: URLSearchParams, login: OidcLogin): Effect.Effect<OidcIdentity, OidcFailure>
}

/** seconds for each request to the provider (openid-client's default is 30) */
const REQUEST_TIMEOUT_S = 10

const messageOf = (cause: unknown): string => {
  const error = cause as { message?: unknown; error?: unknown; error_description?: unknown; cause?: unknown }
  // an OAuth error answered by the provider names itself in `error` / `error_description`
  const oauth = [error?.error, error?.error_description].filter((part) => typeof part === "string").join(": ")
  return oauth !== "" ? oauth : typeof error?.message === "string" ? error.message : String(cause)
}

/** `redirectUri`: the ledger's callback, as registered at the provider. */
export const oidcProvider = (settings: OidcSettings, redirectUri: string): OidcProvider => {
  const issuer = new URL(settings.issuer)
  // a provider on this machine (local development, tests) may speak plain HTTP; any other must use HTTPS
  const insecure = issuer.protocol === "http:" && LOOPBACK_HOSTS.has(issuer.hostname)
  const name = issuer.host

  /** Discovered once; a failed discovery is tried again at the next sign-in. */
  let discovered: Promise<Oidc.Configuration> | undefined
  const configuration = Effect.tryPromise({
    try: () =>
      discovered ??= Oidc.discovery(
        issuer,
        settings.clientId,
        undefined,
        // client_secret_basic: the token endpoint's default method (RFC 6749 §2.3.1, OpenID Connect Core §9)
        Option.match(settings.clientSecret, { onNone: () => Oidc.None(), onSome: (secret) => Oidc.ClientSecretBasic(Redacted.value(secret)) }),
        {
          timeout: REQUEST_TIMEOUT_S,
          // The ID token's signature is checked against the provider's keys too, not only trusted for arriving over
          // TLS from the token endpoint (which OpenID Connect Core allows): a ledger of record keeps that proof.
          execute: insecure ? [Oidc.enableNonRepudiationChecks, Oidc.allowInsecureRequests] : [Oidc.enableNonRepudiationChecks]
        }
      ).catch((cause: unknown) => {
        discovered = undefined
        throw cause
      }),
    catch: (cause) => new OidcFailure({ message: `${name} could not be reached for its OpenID configuration (${messageOf(cause)})` })
  })

  const authorizationUrl = Effect.fnUntraced(function*(login: OidcLogin) {
    const config = yield* configuration
    const challenge = yield* Effect.promise(() => Oidc.calculatePKCECodeChallenge(login.codeVerifier))
    return Oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: "openid email",
      state: login.state,
      nonce: login.nonce,
      code_challenge: challenge,
      code_challenge_method: "S256"
    })
  })

  const identify = Effect.fnUntraced(function*(callbackQuery: URLSearchParams, login: OidcLogin) {
    const config = yield* configuration
    // the URL the provider was given, with its answer: the token request must name the same redirect URI
    const callbackUrl = new URL(redirectUri)
    callbackUrl.search = callbackQuery.toString()
    const claims = yield* Effect.tryPromise({
      try: async () => {
        const tokens = await Oidc.authorizationCodeGrant(config, callbackUrl, {
          pkceCodeVerifier: login.codeVerifier,
          expectedState: login.state,
          expectedNonce: login.nonce,
          idTokenExpected: true
        })
        const claims = tokens.claims()!
        // a provider may keep the email out of the ID token and answer it from its userinfo endpoint; what the
        // signed ID token says wins over it
        return (typeof claims.email === "string" && claims.email_verified !== undefined) || config.serverMetadata().userinfo_endpoint === undefined
          ? claims
          : { ...await Oidc.fetchUserInfo(config, tokens.access_token, claims.sub), ...claims }
      },
      catch: (cause) => new OidcFailure({ message: `the answer of ${name} could not be verified (${messageOf(cause)})` })
    })
    return {
      issuer: config.serverMetadata().issuer,
      subject: claims.sub,
      email: typeof claims.email === "string" && claims.email !== "" ? claims.email : undefined,
      // some providers answer the flag as a string
      emailVerified: claims.email_verified === true || claims.email_verified === "true"
    } satisfies OidcIdentity
  })

  return { name, allowedDomains: settings.allowedDomains, ready: Effect.asVoid(configuration), authorizationUrl, identify }
}
