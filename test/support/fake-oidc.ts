/**
 * A fake OpenID Connect provider on a loopback port, speaking what the ledger's SSO sign-in uses (OpenID Connect
 * Core 1.0, Discovery 1.0): the discovery document, an authorization endpoint that signs in whoever the test chose
 * (no page of its own), the token endpoint (client secret, PKCE S256) answering an RS256 ID token, the JWKS, and a
 * userinfo endpoint (for providers that keep the email out of the ID token).
 */
import { Context, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { ApiStack } from "./api-stack.ts"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeOidcUser {
  readonly email: string
  readonly emailVerified?: boolean
  /** the account's subject identifier; default `sub-<email>` */
  readonly subject?: string
  /** the email and its flag only from the userinfo endpoint, not in the ID token */
  readonly emailInUserinfoOnly?: boolean
}

export interface FakeOidc {
  /** `http://127.0.0.1:PORT` */
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** Who signs in at the authorization endpoint from now on, or the OAuth error it answers instead. */
  signInAs(next: FakeOidcUser | { readonly error: string }): void
  /** Signs ID tokens with a key the JWKS does not publish (a forged token), or stops doing so. */
  forgeTokens(on: boolean): void
  /** code exchanges the token endpoint accepted */
  readonly exchanges: () => number
}

const base64url = (value: Buffer | string) => Buffer.from(value).toString("base64url")

interface PendingCode {
  readonly nonce: string
  readonly challenge: string
  readonly redirectUri: string
  readonly user: FakeOidcUser
}

export const fakeOidc: Effect.Effect<FakeOidc, never, Scope.Scope> = Effect.gen(function*() {
  const clientId = "ledger-test-client"
  const clientSecret = Crypto.randomBytes(16).toString("hex")
  const signing = Crypto.generateKeyPairSync("rsa", { modulusLength: 2048 })
  const forger = Crypto.generateKeyPairSync("rsa", { modulusLength: 2048 })
  const kid = "test-key-1"
  let next: FakeOidcUser | { readonly error: string } = { email: "ann@acme.test", emailVerified: true }
  let forging = false
  let exchanges = 0
  const codes = new Map<string, PendingCode>()
  /** access token → who it was issued to (userinfo) */
  const accessTokens = new Map<string, FakeOidcUser>()
  const subjectOf = (user: FakeOidcUser) => user.subject ?? `sub-${user.email}`
  const emailClaims = (user: FakeOidcUser) => ({ email: user.email, email_verified: user.emailVerified ?? true })
  let issuer = ""

  const idToken = (user: FakeOidcUser, nonce: string) => {
    const now = Math.floor(Date.now() / 1000)
    const header = base64url(JSON.stringify({ alg: "RS256", typ: "JWT", kid }))
    const payload = base64url(JSON.stringify({
      iss: issuer,
      sub: subjectOf(user),
      aud: clientId,
      iat: now,
      exp: now + 300,
      nonce,
      ...(user.emailInUserinfoOnly ? {} : emailClaims(user))
    }))
    const signature = Crypto.sign("sha256", Buffer.from(`${header}.${payload}`), (forging ? forger : signing).privateKey)
    return `${header}.${payload}.${base64url(signature)}`
  }

  const json = (response: Http.ServerResponse, status: number, body: unknown) =>
    response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(JSON.stringify(body))

  const server = Http.createServer((request, response) => {
    const url = new URL(request.url!, issuer)
    if (request.method === "GET" && url.pathname === "/.well-known/openid-configuration") {
      return json(response, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        userinfo_endpoint: `${issuer}/userinfo`,
        response_types_supported: ["code"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
        scopes_supported: ["openid", "email"]
      })
    }
    if (request.method === "GET" && url.pathname === "/jwks") {
      return json(response, 200, { keys: [{ ...signing.publicKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" }] })
    }
    if (request.method === "GET" && url.pathname === "/userinfo") {
      const user = accessTokens.get(/^Bearer (.+)$/.exec(request.headers.authorization ?? "")?.[1] ?? "")
      if (user === undefined) return json(response, 401, { error: "invalid_token" })
      return json(response, 200, { sub: subjectOf(user), ...emailClaims(user) })
    }
    if (request.method === "GET" && url.pathname === "/authorize") {
      const q = url.searchParams
      const redirectUri = q.get("redirect_uri")!
      const back = new URL(redirectUri)
      back.searchParams.set("state", q.get("state") ?? "")
      const valid = q.get("client_id") === clientId && q.get("response_type") === "code" && q.get("code_challenge_method") === "S256" &&
        (q.get("scope") ?? "").split(" ").includes("openid")
      if (!valid) back.searchParams.set("error", "invalid_request")
      else if ("error" in next) back.searchParams.set("error", next.error)
      else {
        const code = Crypto.randomBytes(16).toString("hex")
        codes.set(code, { nonce: q.get("nonce") ?? "", challenge: q.get("code_challenge")!, redirectUri, user: next })
        back.searchParams.set("code", code)
      }
      return response.writeHead(302, { location: back.toString() }).end()
    }
    if (request.method === "POST" && url.pathname === "/token") {
      let body = ""
      request.on("data", (chunk: Buffer) => {
        body += chunk.toString()
      })
      request.on("end", () => {
        const form = new URLSearchParams(body)
        const basic = /^Basic (.+)$/.exec(request.headers.authorization ?? "")
        const [id, secret] = basic !== null
          ? Buffer.from(basic[1]!, "base64").toString().split(":").map(decodeURIComponent)
          : [form.get("client_id"), form.get("client_secret")]
        if (id !== clientId || secret !== clientSecret) return json(response, 401, { error: "invalid_client" })
        const pending = codes.get(form.get("code") ?? "")
        codes.delete(form.get("code") ?? "")
        const verifier = form.get("code_verifier") ?? ""
        if (
          form.get("grant_type") !== "authorization_code" || pending === undefined || pending.redirectUri !== form.get("redirect_uri") ||
          base64url(Crypto.createHash("sha256").update(verifier).digest()) !== pending.challenge
        ) {
          return json(response, 400, { error: "invalid_grant" })
        }
        exchanges++
        const accessToken = Crypto.randomBytes(16).toString("hex")
        accessTokens.set(accessToken, pending.user)
        return json(response, 200, {
          access_token: accessToken,
          token_type: "Bearer",
          expires_in: 300,
          scope: "openid email",
          id_token: idToken(pending.user, pending.nonce)
        })
      })
      return
    }
    json(response, 404, { error: "not_found" })
  })
  yield* Effect.acquireRelease(
    Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))),
    () => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    issuer,
    clientId,
    clientSecret,
    signInAs: (user) => {
      next = user
    },
    forgeTokens: (on) => {
      forging = on
    },
    exchanges: () => exchanges
  }
})

/** The fake provider as a service of a test's layer. */
export class OidcProvider extends Context.Service<OidcProvider, FakeOidc>()("test/support/OidcProvider") {
  static readonly layer = Layer.effect(OidcProvider, fakeOidc)
}

/** An API stack whose OpenID Connect provider (LEDGER_OIDC_*) is the fake one, with the provider beside it. */
export const oidcApiStack = (allowedDomains: ReadonlyArray<string>) =>
  Layer.unwrap(Effect.gen(function*() {
    const provider = yield* OidcProvider
    return ApiStack.layer({
      settings: {
        oidc: Option.some({
          issuer: provider.issuer,
          clientId: provider.clientId,
          clientSecret: Option.some(Redacted.make(provider.clientSecret)),
          allowedDomains
        })
      }
    })
  })).pipe(Layer.provideMerge(OidcProvider.layer))
