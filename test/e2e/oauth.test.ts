/**
 * OAuth 2.1 for MCP, end to end: the MCP SDK client's own flow (`auth()` through StreamableHTTPClientTransport —
 * 401 challenge, resource metadata, authorization-server metadata, dynamic registration, PKCE S256) with the sign-in
 * and consent pages driven in headless Chromium, ending in a tool call scoped to the workspace the user picked;
 * then refresh (rotation) through the SDK, and the refusals: wrong PKCE verifier, reused code (which revokes what it
 * issued), a token for another resource, an expired token, a replayed refresh token, revocation, bad registrations.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { CACHE_TTL_MS } from "../../src/auth/Authenticator.ts"
import { Credentials, hashToken } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { GRANT_MAX_AGE_DAYS, OAuthStore } from "../../src/auth/OAuthStore.ts"
import { ApiStack, apiStack } from "../support/api-stack.ts"
import { launchBrowser, openPage, screenshot } from "../support/browser.ts"
import { Callback } from "../support/oauth-callback.ts"
import {
  beginSdkAuthorization,
  callTool,
  mcpAccepts,
  mcpClient,
  pkcePair,
  postForm,
  registerOAuthClient,
  textOf
} from "../support/mcp-client.ts"
import { authorizationQuery, authorizeWithForms, grantByForms, oauthBrowser } from "../support/oauth-browser.ts"
import { insertDecisions, makeCapture, seedDecision } from "../support/seed.ts"

/** acme has two workspaces; ann is a member of both, and only "research" has agent "researcher". */
class Setup extends Context.Service<Setup, { readonly researchWorkspace: string }>()("test/oauth/Setup") {
  static readonly layer = Layer.effect(
    Setup,
    Effect.gen(function*() {
      const stack = yield* ApiStack
      return yield* Effect.gen(function*() {
        const research = yield* Credentials.use((c) => c.bootstrap({ tenant: "acme", workspace: "research", email: "ann@acme.test", role: "member" }))
        const scope = { ...research, key_id: Crypto.randomUUID() }
        yield* insertDecisions([
          seedDecision(makeCapture({ scope, agent_id: "researcher", at: Date.now() - 60_000 }), Crypto.randomUUID())
        ])
        return { researchWorkspace: research.workspace_id }
      }).pipe(Effect.provide(stack.context), Effect.orDie)
    })
  )
}

const post = (url: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  Effect.promise(() => postForm(url, form, headers))

const pkce = pkcePair

const register = (redirect: string, extra: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* ApiStack
    return yield* Effect.promise(() => registerOAuthClient(baseUrl, redirect, extra))
  })

/** The sign-in and consent forms, as the browser posts them (ann, her "ops" workspace); returns the code. */
const authorizeByForms = (clientId: string, redirect: string, challenge: string) =>
  Effect.gen(function*() {
    const { baseUrl, pat, principal } = yield* ApiStack
    const location = yield* Effect.promise(() =>
      authorizeWithForms(baseUrl, { clientId, redirect, challenge, pat, workspaceId: principal.workspace_id, state: "s-1" })
    )
    assert.strictEqual(location.searchParams.get("state"), "s-1")
    assert.strictEqual(location.searchParams.get("iss"), baseUrl)
    return location.searchParams.get("code")!
  })

const tokenRequest = (form: Record<string, string>) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* ApiStack
    return yield* post(`${baseUrl}/oauth/token`, form)
  })

/** A fresh grant by forms: client, code, tokens. */
const grant = (redirect: string) =>
  Effect.gen(function*() {
    const { baseUrl, pat, principal } = yield* ApiStack
    return yield* Effect.promise(() => grantByForms(baseUrl, { pat, workspaceId: principal.workspace_id, redirect }))
  })

/** Whether /mcp accepts a bearer token. */
const accepted = (token: string) => Effect.flatMap(ApiStack, ({ baseUrl }) => Effect.promise(() => mcpAccepts(baseUrl, token)))

const challengeOf = (token: string) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* ApiStack
    return yield* Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })
      })
      return { status: response.status, challenge: response.headers.get("www-authenticate") ?? "" }
    })
  })

/** Runs SQL as the control role (the tests' way to age tokens). */
const control = <A>(effect: Effect.Effect<A, unknown, ScopedSql>) =>
  Effect.gen(function*() {
    const { context } = yield* ApiStack
    return yield* TenantSql.use((sql) => sql.control(effect)).pipe(Effect.provide(context), Effect.orDie)
  })

const Live = Layer.mergeAll(Setup.layer, Callback.layer).pipe(Layer.provideMerge(ApiStack.layer()))

describe("MCP OAuth", () => {
  layer(Live, { timeout: 180_000, excludeTestServices: true })("authorization server", (it) => {
    it.effect("the SDK client signs in through the browser, picks a workspace, calls a tool, refreshes", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const { researchWorkspace } = yield* Setup
        const callback = yield* Callback

        // 1. no token: the transport follows the 401 challenge, registers, and asks to open the sign-in page
        const { provider, transport, authorizationUrl: authorize } = yield* beginSdkAuthorization(baseUrl, callback.url)
        assert.match(String((provider.client as any)?.client_id), /^ldg_client_/, "registered dynamically")
        assert.strictEqual(`${authorize.origin}${authorize.pathname}`, `${baseUrl}/oauth/authorize`)
        assert.strictEqual(authorize.searchParams.get("code_challenge_method"), "S256")
        assert.strictEqual(authorize.searchParams.get("resource"), `${baseUrl}/mcp`)

        // 2. the user signs in with a PAT and picks the research workspace, in the browser
        const browser = yield* launchBrowser
        const { page, requests } = yield* openPage(browser, {
          allow: (url) => url.startsWith(`${baseUrl}/oauth/`) || url.startsWith(callback.url)
        })
        yield* Effect.promise(() => page.goto(authorize.toString()))
        assert.include(yield* Effect.promise(() => page.locator("h1").innerText()), "Ledger e2e client")
        yield* screenshot(page, "oauth-signin")
        // the token is the page's second way in, below the email and password
        yield* Effect.promise(() => page.click("summary"))
        yield* Effect.promise(() => page.fill("#pat", "ldg_pat_wrong"))
        yield* Effect.promise(() => page.click("details button[type=submit]"))
        assert.include(yield* Effect.promise(() => page.locator(".error").innerText()), "not accepted")
        const { pat } = yield* ApiStack
        yield* Effect.promise(() => page.fill("#pat", pat))
        yield* Effect.promise(() => page.click("details button[type=submit]"))
        yield* Effect.promise(() => page.waitForSelector("input[name=workspace_id]"))
        assert.include(yield* Effect.promise(() => page.locator("main").innerText()), "ann@acme.test")
        assert.sameMembers(
          yield* Effect.promise(() => page.locator("label.choice").allInnerTexts()).pipe(Effect.map((labels) => labels.map((l) => l.trim()))),
          ["ops", "research"]
        )
        yield* Effect.promise(() => page.check(`input[value="${researchWorkspace}"]`))
        yield* screenshot(page, "oauth-consent")
        const [query] = yield* Effect.all([
          callback.next,
          Effect.promise(() => page.click("button[value=allow]"))
        ], { concurrency: 2 })
        assert.deepStrictEqual(requests.blocked, [], "the pages load nothing from elsewhere")
        assert.strictEqual(query.get("iss"), baseUrl)

        // 3. the SDK exchanges the code (PKCE) and the next connection carries the access token
        yield* Effect.promise(() => transport.finishAuth(query.get("code")!))
        const tokens = provider.saved!
        assert.match(tokens.access_token, /^ldg_oat_/)
        assert.isString(tokens.refresh_token)
        assert.strictEqual(tokens.token_type, "Bearer")
        const client = yield* mcpClient(baseUrl, { authProvider: provider })
        const agents = yield* callTool(client, "list_agents")
        assert.notStrictEqual(agents.isError, true, textOf(agents))
        assert.deepStrictEqual((agents.structuredContent as any).data.map((a: any) => a.agent_id), ["researcher"], "scoped to the picked workspace")

        // 4. the access token expires: the SDK refreshes (rotation) and the call goes through
        yield* control(ScopedSql.use((sql) =>
          sql`UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = ${hashToken(tokens.access_token)}`
        ))
        yield* Effect.sleep(CACHE_TTL_MS + 100)
        const again = yield* mcpClient(baseUrl, { authProvider: provider })
        const afterRefresh = yield* callTool(again, "list_agents")
        assert.notStrictEqual(afterRefresh.isError, true, textOf(afterRefresh))
        assert.notStrictEqual(provider.saved!.access_token, tokens.access_token, "a new access token")
        assert.notStrictEqual(provider.saved!.refresh_token, tokens.refresh_token, "the refresh token rotated")
        // the spent refresh token presented again: refused, and the whole grant is revoked
        const replay = yield* tokenRequest({ grant_type: "refresh_token", client_id: (provider.client as any).client_id, refresh_token: tokens.refresh_token! })
        assert.strictEqual(replay.status, 400)
        assert.strictEqual(replay.json.error, "invalid_grant")
        yield* Effect.sleep(CACHE_TTL_MS + 100)
        assert.isFalse(yield* accepted(provider.saved!.access_token), "the grant's current access token is revoked too")
      }))

    it.effect("wrong PKCE verifier refused (code kept); a reused code is refused and revokes what it issued", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const redirect = "http://127.0.0.1:9/cb"
        const client = (yield* register(redirect)).body
        const { verifier, challenge } = pkce()
        const code = yield* authorizeByForms(client.client_id, redirect, challenge)
        const exchange = (codeVerifier: string) =>
          tokenRequest({
            grant_type: "authorization_code",
            client_id: client.client_id,
            code,
            code_verifier: codeVerifier,
            redirect_uri: redirect,
            resource: `${baseUrl}/mcp`
          })
        const wrong = yield* exchange(pkce().verifier)
        assert.strictEqual(wrong.status, 400)
        assert.deepInclude(wrong.json, { error: "invalid_grant" })
        assert.include(wrong.json.error_description, "PKCE")
        const right = yield* exchange(verifier)
        assert.strictEqual(right.status, 200, right.text)
        assert.isTrue(yield* accepted(right.json.access_token))
        const reused = yield* exchange(verifier)
        assert.strictEqual(reused.status, 400)
        assert.include(reused.json.error_description, "already used")
        yield* Effect.sleep(CACHE_TTL_MS + 100)
        assert.isFalse(yield* accepted(right.json.access_token), "tokens from a replayed code are revoked")
        const viaRefresh = yield* tokenRequest({ grant_type: "refresh_token", client_id: client.client_id, refresh_token: right.json.refresh_token })
        assert.strictEqual(viaRefresh.status, 400)
        // other clients and redirect URIs cannot redeem a code either
        const { verifier: v2, challenge: c2 } = pkce()
        const other = (yield* register(redirect)).body
        const code2 = yield* authorizeByForms(client.client_id, redirect, c2)
        const stolen = yield* tokenRequest({ grant_type: "authorization_code", client_id: other.client_id, code: code2, code_verifier: v2, redirect_uri: redirect })
        assert.strictEqual(stolen.status, 400)
        assert.include(stolen.json.error_description, "another client")
      }))

    it.effect("a token for another resource is refused, at the authorization server and at /mcp", () =>
      Effect.gen(function*() {
        const { baseUrl, settings } = yield* ApiStack
        const redirect = "http://127.0.0.1:9/cb"
        const client = (yield* register(redirect)).body
        const { challenge } = pkce()
        // asking for a token for another resource: refused back to the client with invalid_target
        const params = new URLSearchParams({
          response_type: "code",
          client_id: client.client_id,
          redirect_uri: redirect,
          code_challenge: challenge,
          code_challenge_method: "S256",
          state: "x",
          resource: "https://elsewhere.example/mcp"
        })
        const response = yield* Effect.promise(() => fetch(`${baseUrl}/oauth/authorize?${params}`, { redirect: "manual" }))
        assert.strictEqual(response.status, 302)
        const location = new URL(response.headers.get("location")!)
        assert.strictEqual(location.searchParams.get("error"), "invalid_target")
        assert.strictEqual(location.searchParams.get("state"), "x")
        const atTokenEndpoint = yield* tokenRequest({ grant_type: "refresh_token", client_id: client.client_id, refresh_token: "x", resource: "https://elsewhere.example/mcp" })
        assert.strictEqual(atTokenEndpoint.json.error, "invalid_target")

        // a token this server issued, presented to another deployment (another public URL) on the same database
        const { tokens } = yield* grant(redirect)
        const elsewhere = yield* apiStack({ settings: { databaseUrl: settings.databaseUrl, publicUrl: "http://ledger-b.test" } })
        const refusedThere = yield* Effect.promise(async () => {
          const r = await fetch(`${elsewhere.baseUrl}/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })
          })
          return { status: r.status, challenge: r.headers.get("www-authenticate") ?? "" }
        })
        assert.strictEqual(refusedThere.status, 401)
        assert.include(refusedThere.challenge, "error=\"invalid_token\"")
        assert.include(refusedThere.challenge, "another resource")
        assert.include(refusedThere.challenge, "resource_metadata=\"http://ledger-b.test/.well-known/oauth-protected-resource/mcp\"")
        assert.isTrue(yield* accepted(tokens.access_token), "and still accepted where it was issued")
      }))

    it.effect("an expired access token is refused with invalid_token; revocation ends a grant", () =>
      Effect.gen(function*() {
        const redirect = "http://127.0.0.1:9/cb"
        const first = yield* grant(redirect)
        yield* control(ScopedSql.use((sql) =>
          sql`UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = ${hashToken(first.tokens.access_token)}`
        ))
        const expired = yield* challengeOf(first.tokens.access_token)
        assert.strictEqual(expired.status, 401)
        assert.include(expired.challenge, "error=\"invalid_token\"")
        assert.include(expired.challenge, "token expired")
        assert.strictEqual(first.tokens.expires_in, 3600)

        const second = yield* grant(redirect)
        assert.isTrue(yield* accepted(second.tokens.access_token))
        const { baseUrl } = yield* ApiStack
        const revoked = yield* post(`${baseUrl}/oauth/revoke`, { client_id: second.client.client_id, token: second.tokens.refresh_token })
        assert.strictEqual(revoked.status, 200)
        yield* Effect.sleep(CACHE_TTL_MS + 100)
        assert.isFalse(yield* accepted(second.tokens.access_token), "revoking the refresh token ends the grant")
        const unknownClient = yield* post(`${baseUrl}/oauth/revoke`, { client_id: "nope", token: "x" })
        assert.strictEqual(unknownClient.status, 401)
        assert.strictEqual(unknownClient.json.error, "invalid_client")
      }))

    it.effect("a grant ends 90 days after consent however often it is refreshed: its last tokens expire then", () =>
      Effect.gen(function*() {
        const first = yield* grant("http://127.0.0.1:9/cb")
        const authorization = (yield* control(ScopedSql.use((sql) =>
          sql<{ id: string }>`SELECT authorization_id AS id FROM oauth_tokens WHERE token_hash = ${hashToken(first.tokens.refresh_token)}`
        )))[0]!.id
        const consentedAgo = (interval: string) =>
          control(ScopedSql.use((sql) => sql`UPDATE oauth_authorizations SET consented_at = now() - ${interval}::interval WHERE authorization_id = ${authorization}`))
        const refresh = (refreshToken: string) =>
          tokenRequest({ grant_type: "refresh_token", client_id: first.client.client_id, refresh_token: refreshToken })

        // half an hour before the grant ends: the new tokens end with it, not 1 hour / 30 days later
        yield* consentedAgo(`${GRANT_MAX_AGE_DAYS} days - 30 minutes`)
        const late = yield* refresh(first.tokens.refresh_token)
        assert.strictEqual(late.status, 200, late.text)
        const lifetimes = yield* control(ScopedSql.use((sql) =>
          sql<{ kind: string; seconds: number }>`SELECT kind, extract(epoch FROM expires_at - now())::float8 AS seconds FROM oauth_tokens
            WHERE token_hash IN (${hashToken(late.json.access_token)}, ${hashToken(late.json.refresh_token)}) ORDER BY kind`
        ))
        assert.deepStrictEqual(lifetimes.map((t) => t.kind), ["access", "refresh"])
        for (const { seconds } of lifetimes) assert.isTrue(seconds > 25 * 60 && seconds <= 30 * 60, String(seconds))

        // once it has ended, the refresh token is refused and the client must sign the user in again
        yield* consentedAgo(`${GRANT_MAX_AGE_DAYS} days`)
        const ended = yield* refresh(late.json.refresh_token)
        assert.strictEqual(ended.status, 400)
        assert.strictEqual(ended.json.error, "invalid_grant")
        assert.include(ended.json.error_description, "expired")
      }))

    it.effect("the sweeper deletes tokens and authorizations a day after they expired, and nothing still usable", () =>
      Effect.gen(function*() {
        const { baseUrl, context, pat } = yield* ApiStack
        const redirect = "http://127.0.0.1:9/cb"
        const grantOf = (accessToken: string) =>
          control(ScopedSql.use((sql) => sql<{ authorization_id: string }>`SELECT authorization_id FROM oauth_tokens WHERE token_hash = ${hashToken(accessToken)}`))
            .pipe(Effect.map((rows) => rows[0]!.authorization_id))
        const live = yield* grant(redirect)
        const old = yield* grant(redirect)
        const liveGrant = yield* grantOf(live.tokens.access_token)
        const oldGrant = yield* grantOf(old.tokens.access_token)
        // a sign-in nobody answered
        const client = (yield* register(redirect)).body
        const signIn = yield* Effect.promise(async () => {
          const browser = oauthBrowser(baseUrl)
          return browser.signInWithToken(await browser.authorize(authorizationQuery(baseUrl, { clientId: client.client_id, redirect })), pat)
        })
        assert.strictEqual(signIn.status, 200)

        // the old grant and the sign-in expired two days ago; the live grant's access token an hour ago (within the grace)
        yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`UPDATE oauth_tokens SET expires_at = now() - interval '2 days' WHERE authorization_id = ${oldGrant}`
          yield* sql`UPDATE oauth_authorizations SET expires_at = now() - interval '2 days'
            WHERE authorization_id = ${oldGrant} OR (client_id = ${client.client_id} AND consented_at IS NULL)`
          yield* sql`UPDATE oauth_tokens SET expires_at = now() - interval '1 hour' WHERE token_hash = ${hashToken(live.tokens.access_token)}`
        }))
        const sweep = OAuthStore.use((store) => store.sweep).pipe(Effect.provide(OAuthStore.layer), Effect.provide(context), Effect.orDie)
        const swept = yield* sweep
        assert.isAtLeast(swept.tokens, 2)
        assert.isAtLeast(swept.authorizations, 2)

        const left = yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          const tokens = yield* sql<{ authorization_id: string; n: number }>`
            SELECT authorization_id, count(*)::int AS n FROM oauth_tokens WHERE authorization_id IN (${liveGrant}, ${oldGrant}) GROUP BY 1`
          const authorizations = yield* sql<{ authorization_id: string }>`
            SELECT authorization_id FROM oauth_authorizations WHERE client_id IN (${live.client.client_id}, ${old.client.client_id}, ${client.client_id})`
          return { tokens, authorizations: authorizations.map((row) => row.authorization_id) }
        }))
        assert.deepStrictEqual(left.tokens, [{ authorization_id: liveGrant, n: 2 }], "the live grant keeps both its tokens")
        assert.deepStrictEqual(left.authorizations, [liveGrant], "only the live grant's authorization is left")
        // the swept refresh token is simply unknown now; the live one still refreshes
        const refreshOld = yield* tokenRequest({ grant_type: "refresh_token", client_id: old.client.client_id, refresh_token: old.tokens.refresh_token })
        assert.strictEqual(refreshOld.json.error, "invalid_grant")
        const refreshLive = yield* tokenRequest({ grant_type: "refresh_token", client_id: live.client.client_id, refresh_token: live.tokens.refresh_token })
        assert.strictEqual(refreshLive.status, 200)
        assert.deepStrictEqual(yield* sweep, { tokens: 0, authorizations: 0, clients: 0 }, "nothing more to sweep")
      }))

    it.effect("the sweeper forgets clients never used a day after they registered, and used ones idle for 90 days once no grant is left", () =>
      Effect.gen(function*() {
        const { baseUrl, context } = yield* ApiStack
        const redirect = "http://127.0.0.1:9/cb"
        const registered = (yield* register(redirect)).body.client_id as string
        const unused = (yield* register(redirect)).body.client_id as string
        const idle = yield* grant(redirect)
        const recent = yield* grant(redirect)
        const live = yield* grant(redirect)
        const usedAt = control(ScopedSql.use((sql) =>
          sql<{ client_id: string; last_used_at: Date | null }>`SELECT client_id, last_used_at FROM oauth_clients
            WHERE client_id IN (${registered}, ${idle.client.client_id})`
        ))
        const used = new Map((yield* usedAt).map((row) => [row.client_id, row.last_used_at]))
        assert.isNull(used.get(registered), "registering is not a use")
        assert.instanceOf(used.get(idle.client.client_id), Date, "a grant is")

        yield* control(Effect.gen(function*() {
          const sql = yield* ScopedSql
          yield* sql`UPDATE oauth_clients SET created_at = now() - interval '2 days' WHERE client_id = ${unused}`
          // idle and recent: their grants expired long ago; idle was last used 91 days ago, recent 10 days ago
          for (const [client, days] of [[idle.client.client_id, 91], [recent.client.client_id, 10], [live.client.client_id, 91]] as const) {
            yield* sql`UPDATE oauth_clients SET last_used_at = now() - make_interval(days => ${days}) WHERE client_id = ${client}`
            if (client === live.client.client_id) continue
            yield* sql`UPDATE oauth_tokens SET expires_at = now() - interval '40 days' WHERE client_id = ${client}`
            yield* sql`UPDATE oauth_authorizations SET expires_at = now() - interval '40 days' WHERE client_id = ${client}`
          }
        }))
        const sweep = OAuthStore.use((store) => store.sweep).pipe(Effect.provide(OAuthStore.layer), Effect.provide(context), Effect.orDie)
        assert.strictEqual((yield* sweep).clients, 2)
        const left = yield* control(ScopedSql.use((sql) =>
          sql<{ client_id: string }>`SELECT client_id FROM oauth_clients
            WHERE client_id IN (${registered}, ${unused}, ${idle.client.client_id}, ${recent.client.client_id}, ${live.client.client_id})`
        ))
        assert.sameMembers(left.map((row) => row.client_id), [registered, recent.client.client_id, live.client.client_id],
          "a new registration, a client used 10 days ago and one with a live grant stay")

        // a forgotten client is told to register again; the live grant still refreshes
        const page = yield* Effect.promise(async () => {
          const response = await fetch(`${baseUrl}/oauth/authorize?response_type=code&client_id=${unused}&redirect_uri=${encodeURIComponent(redirect)}`)
          return { status: response.status, text: await response.text() }
        })
        assert.strictEqual(page.status, 400)
        assert.include(page.text, "not registered here")
        // a sign-in that looked the client up just before the sweep deleted it: no ticket (the page says register
        // again), not a foreign-key failure
        const { principal } = yield* ApiStack
        const ticket = yield* OAuthStore.use((store) =>
          store.startAuthorization(
            { client_id: unused, redirect_uri: redirect, code_challenge: pkce().challenge, state: null, scope: "ledger", resource: `${baseUrl}/mcp` },
            principal
          )
        ).pipe(Effect.provide(OAuthStore.layer), Effect.provide(context), Effect.orDie)
        assert.isUndefined(ticket)
        const refreshed = yield* tokenRequest({ grant_type: "refresh_token", client_id: live.client.client_id, refresh_token: live.tokens.refresh_token })
        assert.strictEqual(refreshed.status, 200)
        assert.isAbove((yield* control(ScopedSql.use((sql) =>
          sql<{ last_used_at: Date }>`SELECT last_used_at FROM oauth_clients WHERE client_id = ${live.client.client_id}`
        )))[0]!.last_used_at.getTime(), Date.now() - 60_000, "a refresh is a use")
      }))

    it.effect("registration and authorization refuse what they must; tokens are stored hashed", () =>
      Effect.gen(function*() {
        const { baseUrl, pat, context } = yield* ApiStack
        for (const [uris, why] of [[[], "empty"], [["http://evil.example/cb"], "http for non-loopback"], [["javascript:alert(1)"], "script scheme"], [["https://app.example/cb#x"], "fragment"]] as const) {
          const response = yield* register(uris[0] ?? "", { redirect_uris: uris })
          assert.strictEqual(response.status, 400, why)
          assert.strictEqual(response.body.error, "invalid_redirect_uri", why)
        }
        const confidential = yield* register("https://app.example/cb", { token_endpoint_auth_method: "client_secret_basic" })
        assert.strictEqual(confidential.status, 201)
        assert.match(confidential.body.client_secret, /^ldg_ocs_/)
        // a confidential client must authenticate at the token endpoint
        const noSecret = yield* tokenRequest({ grant_type: "refresh_token", client_id: confidential.body.client_id, refresh_token: "x" })
        assert.strictEqual(noSecret.status, 401)
        const basic = Buffer.from(`${confidential.body.client_id}:${confidential.body.client_secret}`).toString("base64")
        const withSecret = yield* post(`${baseUrl}/oauth/token`, { grant_type: "refresh_token", refresh_token: "x" }, { authorization: `Basic ${basic}` })
        assert.strictEqual(withSecret.status, 400, "authenticated; the refresh token is what is wrong")
        assert.strictEqual(withSecret.json.error, "invalid_grant")

        const page = (query: Record<string, string>) =>
          Effect.promise(async () => {
            const response = await fetch(`${baseUrl}/oauth/authorize?${new URLSearchParams(query)}`, { redirect: "manual" })
            return { status: response.status, location: response.headers.get("location"), text: await response.text() }
          })
        const publicClient = (yield* register("http://127.0.0.1:9/cb")).body
        const base = { response_type: "code", client_id: publicClient.client_id, redirect_uri: "http://127.0.0.1:9/cb", code_challenge: pkce().challenge, code_challenge_method: "S256" }
        assert.strictEqual((yield* page({ ...base, client_id: "unknown" })).status, 400, "unknown client: an error page, no redirect")
        assert.strictEqual((yield* page({ ...base, redirect_uri: "https://attacker.example/cb" })).status, 400, "unregistered redirect: no redirect")
        const loopbackPort = yield* page({ ...base, redirect_uri: "http://127.0.0.1:5555/cb" })
        assert.strictEqual(loopbackPort.status, 200, "loopback redirects may use any port (RFC 8252)")
        assert.include(new URL((yield* page({ ...base, code_challenge_method: "plain" })).location!).search, "error=invalid_request")
        assert.include(new URL((yield* page({ ...base, code_challenge: "" })).location!).search, "error=invalid_request")
        assert.include(new URL((yield* page({ ...base, scope: "admin" })).location!).search, "error=invalid_scope")
        assert.include(new URL((yield* page({ ...base, response_type: "token" })).location!).search, "error=unsupported_response_type")
        const signIn = yield* page(base)
        assert.include(signIn.text, "Personal Access Token")
        assert.notInclude(signIn.text, "<script", "the sign-in page runs no script")

        // the user denies: the client learns access_denied
        const browser = oauthBrowser(baseUrl)
        const consentPage = () => Effect.promise(async () => browser.signInWithToken(await browser.authorize({ ...base, state: "d" }), pat))
        const consent = yield* consentPage()
        const denied = yield* Effect.promise(() => browser.answer(consent, { decision: "deny" }))
        assert.strictEqual(new URL(denied.location!).searchParams.get("error"), "access_denied")
        const again = yield* Effect.promise(() => browser.answer(consent, { decision: "allow", workspace_id: "x" }))
        assert.strictEqual(again.status, 400, "a ticket answers once")
        // a workspace the user is not a member of cannot be picked
        const other = yield* Credentials.use((c) => c.bootstrap({ tenant: "acme", workspace: "finance", email: "fin@acme.test", role: "member" })).pipe(
          Effect.provide(context),
          Effect.orDie
        )
        const foreign = yield* consentPage().pipe(
          Effect.flatMap((page) => Effect.promise(() => browser.answer(page, { decision: "allow", workspace_id: other.workspace_id })))
        )
        assert.strictEqual(foreign.status, 400)

        // nothing secret is stored in clear
        const { tokens, code } = yield* grant("http://127.0.0.1:9/cb")
        const dump = yield* Effect.gen(function*() {
          const sql = yield* ScopedSql
          const rows = [
            ...(yield* sql`SELECT * FROM oauth_tokens`),
            ...(yield* sql`SELECT * FROM oauth_authorizations`),
            ...(yield* sql`SELECT * FROM oauth_clients`)
          ]
          return JSON.stringify(rows, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v))
        }).pipe((effect) => TenantSql.use((s) => s.control(effect)), Effect.provide(context), Effect.orDie)
        for (const secret of [tokens.access_token, tokens.refresh_token, code, confidential.body.client_secret]) {
          assert.notInclude(dump, secret)
          assert.include(dump, hashToken(secret).toString("hex"))
        }
      }))
  })
})
