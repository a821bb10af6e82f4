/**
 * MCP OAuth with an external OpenID Connect provider (LEDGER_OIDC_*), end to end against a fake provider on a
 * loopback port: the SDK client's flow with the sign-in page, the provider and the consent page driven in headless
 * Chromium, ending in a tool call; the account linked to its user at its first sign-in (a later account with the same
 * email is refused; the linked one signs in after its email changed); an email from the userinfo endpoint; then
 * what is refused — an unverified email, a domain not allowed, an email no member has, an email of users in two
 * tenants, a forged ID token, a callback from another browser or replayed, a provider's refusal (reaches the client
 * as access_denied), a provider that cannot be reached, and too many sign-ins started from one address.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ApiStack } from "../support/api-stack.ts"
import { launchBrowser, openPage, screenshot } from "../support/browser.ts"
import { OidcProvider, oidcApiStack } from "../support/fake-oidc.ts"
import { beginSdkAuthorization, callTool, mcpClient, pkcePair, postForm, registerOAuthClient, textOf } from "../support/mcp-client.ts"
import { Callback } from "../support/oauth-callback.ts"
import { formFields } from "../support/oauth-browser.ts"

const Live = Callback.layer.pipe(Layer.provideMerge(oidcApiStack(["acme.test", "twice.test"])))

/** A fetch that does not follow redirects: each hop is checked. */
const hop = (url: string, cookie?: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, { redirect: "manual", headers: cookie === undefined ? {} : { cookie } })
    return {
      status: response.status,
      location: response.headers.get("location"),
      cookie: response.headers.get("set-cookie")?.split(";")[0],
      /** every cookie the answer sets, as a Cookie header sends them back */
      cookies: response.headers.getSetCookie().map((cookie) => cookie.split(";")[0]!).join("; "),
      text: await response.text()
    }
  })

/** `/oauth/oidc/start` for a client's authorization request (PKCE S256, state s-1), as the sign-in page links it. */
const startUrl = (baseUrl: string, clientId: string, redirect: string) => {
  const url = new URL(`${baseUrl}/oauth/oidc/start`)
  const request = { response_type: "code", client_id: clientId, redirect_uri: redirect, code_challenge: pkcePair().challenge, code_challenge_method: "S256", state: "s-1" }
  for (const [key, value] of Object.entries(request)) url.searchParams.set(key, value)
  return url.toString()
}

/**
 * A client registered with a loopback redirect, sent through `/oauth/oidc/start` and the provider to the ledger's
 * callback: the callback's answer (and the URL it was called at).
 */
const throughProvider = Effect.gen(function*() {
  const { baseUrl } = yield* ApiStack
  const redirect = "http://127.0.0.1:9/cb"
  const client = (yield* Effect.promise(() => registerOAuthClient(baseUrl, redirect))).body
  const toProvider = yield* hop(startUrl(baseUrl, client.client_id, redirect))
  assert.strictEqual(toProvider.status, 302, toProvider.text)
  assert.match(toProvider.cookie!, /^ledger_oidc_[\w-]{16}=/)
  const back = yield* hop(toProvider.location!)
  assert.strictEqual(back.status, 302)
  assert.isTrue(back.location!.startsWith(`${baseUrl}/oauth/oidc/callback?`), back.location!)
  return { callbackUrl: back.location!, cookie: toProvider.cookie!, answer: yield* hop(back.location!, toProvider.cookie) }
})

describe("MCP OAuth with an OpenID Connect provider", () => {
  layer(Live, { timeout: 180_000, excludeTestServices: true })("sign-in through the provider", (it) => {
    it.effect("the SDK client signs in through the provider in the browser, picks a workspace, calls a tool", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const provider = yield* OidcProvider
        const callback = yield* Callback
        const { provider: auth, transport, authorizationUrl } = yield* beginSdkAuthorization(baseUrl, callback.url)

        const browser = yield* launchBrowser
        const { page, requests } = yield* openPage(browser, {
          allow: (url) => url.startsWith(`${baseUrl}/oauth/`) || url.startsWith(`${provider.issuer}/`) || url.startsWith(callback.url)
        })
        yield* Effect.promise(() => page.goto(authorizationUrl.toString()))
        const sso = page.locator("a.sso")
        assert.strictEqual((yield* Effect.promise(() => sso.innerText())).trim(), `Continue with ${new URL(provider.issuer).host}`)
        assert.strictEqual(yield* Effect.promise(() => page.locator("#pat").count()), 1, "the PAT stays on the page")
        yield* screenshot(page, "oauth-signin-sso")
        const exchanges = provider.exchanges()
        yield* Effect.promise(() => sso.click())
        yield* Effect.promise(() => page.waitForSelector("input[name=workspace_id]"))
        assert.strictEqual(provider.exchanges(), exchanges + 1, "the code was redeemed at the provider")
        assert.include(yield* Effect.promise(() => page.locator("main").innerText()), "ann@acme.test")
        yield* screenshot(page, "oauth-consent-sso")
        const [query] = yield* Effect.all([callback.next, Effect.promise(() => page.click("button[value=allow]"))], { concurrency: 2 })
        assert.deepStrictEqual(requests.blocked, [], "the pages load nothing from elsewhere")
        assert.strictEqual(query.get("iss"), baseUrl)

        yield* Effect.promise(() => transport.finishAuth(query.get("code")!))
        assert.match(auth.saved!.access_token, /^ldg_oat_/)
        const client = yield* mcpClient(baseUrl, { authProvider: auth })
        const agents = yield* callTool(client, "list_agents")
        assert.notStrictEqual(agents.isError, true, textOf(agents))
      }))

    it.effect("the consent step follows from the callback by forms; the callback works once, from the browser that started", () =>
      Effect.gen(function*() {
        const { baseUrl, principal } = yield* ApiStack
        const elsewhere = yield* Effect.gen(function*() {
          const client = (yield* Effect.promise(() => registerOAuthClient(baseUrl, "http://127.0.0.1:9/cb"))).body
          const toProvider = yield* hop(startUrl(baseUrl, client.client_id, "http://127.0.0.1:9/cb"))
          const back = yield* hop(toProvider.location!)
          return yield* hop(back.location!)
        })
        assert.strictEqual(elsewhere.status, 400)
        assert.include(elsewhere.text, "started in another browser")

        const { callbackUrl, cookie, answer } = yield* throughProvider
        assert.strictEqual(answer.status, 200)
        const consent = yield* Effect.promise(() =>
          postForm(
            `${baseUrl}/oauth/authorize`,
            { ...formFields(answer.text, "ticket"), decision: "allow", workspace_id: principal.workspace_id },
            { origin: baseUrl, cookie: answer.cookies }
          )
        )
        assert.strictEqual(consent.status, 302)
        const location = new URL(consent.location!)
        assert.isString(location.searchParams.get("code"))
        assert.strictEqual(location.searchParams.get("state"), "s-1")

        const replayed = yield* hop(callbackUrl, cookie)
        assert.strictEqual(replayed.status, 400)
        assert.include(replayed.text, "expired or was already used")
      }))

    it.effect("an account is linked to its user at its first sign-in: another account with the email is refused, the linked one follows its link", () =>
      Effect.gen(function*() {
        const provider = yield* OidcProvider
        const { context } = yield* ApiStack
        const signsIn = (expectEmail: string) =>
          Effect.gen(function*() {
            const { answer } = yield* throughProvider
            assert.strictEqual(answer.status, 200, answer.text)
            assert.include(answer.text, `Signed in as <strong>${expectEmail}</strong>`)
          })
        provider.signInAs({ email: "ann@acme.test" })
        yield* signsIn("ann@acme.test")
        provider.signInAs({ email: "ann@acme.test", subject: "someone-else" })
        const { answer } = yield* throughProvider
        assert.strictEqual(answer.status, 403)
        assert.include(answer.text, "The ledger user ann@acme.test signs in with another account at")
        // the linked account keeps signing in as ann after its email changed at the provider
        provider.signInAs({ email: "ann.renamed@acme.test", subject: "sub-ann@acme.test" })
        yield* signsIn("ann@acme.test")

        // a provider that answers the email from its userinfo endpoint only
        yield* Credentials.use((c) => c.bootstrap({ tenant: "acme", workspace: "ops", email: "una@acme.test", role: "member" })).pipe(Effect.provide(context))
        provider.signInAs({ email: "una@acme.test", emailInUserinfoOnly: true })
        yield* signsIn("una@acme.test")
        provider.signInAs({ email: "ann@acme.test" })
      }))

    it.effect("refused, with the sign-in page again: an unverified email, a domain not allowed, no member, users in two tenants, a forged ID token", () =>
      Effect.gen(function*() {
        const provider = yield* OidcProvider
        const { context } = yield* ApiStack
        const refusal = (expectStatus: number, expectText: string) =>
          Effect.gen(function*() {
            const { answer } = yield* throughProvider
            assert.strictEqual(answer.status, expectStatus, answer.text)
            assert.include(answer.text.replace(/&#39;/g, "'"), expectText)
            assert.notInclude(answer.text, "name=\"ticket\"")
            assert.include(answer.text, "name=\"pat\"", "the PAT is offered instead")
          })

        provider.signInAs({ email: "nora@acme.test", emailVerified: false })
        yield* refusal(403, "has not verified the email address nora@acme.test")

        provider.signInAs({ email: "nobody@elsewhere.test" })
        yield* refusal(403, "Accounts of elsewhere.test may not sign in here")

        provider.signInAs({ email: "nobody@acme.test" })
        yield* refusal(403, "No one with the email address nobody@acme.test is a member here")

        yield* Credentials.use((c) => c.bootstrap({ tenant: "globex", workspace: "ops", email: "Zed@Twice.test", role: "member" })).pipe(Effect.provide(context))
        yield* Credentials.use((c) => c.bootstrap({ tenant: "initech", workspace: "ops", email: "zed@twice.test", role: "member" })).pipe(Effect.provide(context))
        provider.signInAs({ email: "zed@twice.test" })
        yield* refusal(403, "is the email of several users here")

        provider.signInAs({ email: "ann@acme.test" })
        provider.forgeTokens(true)
        yield* refusal(502, "could not be verified")
        provider.forgeTokens(false)
        const { answer } = yield* throughProvider
        assert.strictEqual(answer.status, 200, "signs in again once the tokens are genuine")
      }))

    it.effect("a provider's refusal reaches the client as access_denied, with its state", () =>
      Effect.gen(function*() {
        const provider = yield* OidcProvider
        provider.signInAs({ error: "login_required" })
        const { answer } = yield* throughProvider
        provider.signInAs({ email: "ann@acme.test" })
        assert.strictEqual(answer.status, 302)
        const location = new URL(answer.location!)
        assert.strictEqual(`${location.origin}${location.pathname}`, "http://127.0.0.1:9/cb")
        assert.strictEqual(location.searchParams.get("error"), "access_denied")
        assert.include(location.searchParams.get("error_description")!, "login_required")
        assert.strictEqual(location.searchParams.get("state"), "s-1")
      }))
  })

  layer(ApiStack.layer({ settings: { oidc: Option.some({ issuer: "http://127.0.0.1:1", clientId: "ledger", clientSecret: Option.none(), allowedDomains: [] }) } }), {
    timeout: 60_000,
    excludeTestServices: true
  })("a provider that cannot be reached", (it) => {
    it.effect("the sign-in page says so and keeps the PAT; starts are limited per address", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const redirect = "http://127.0.0.1:9/cb"
        const client = (yield* Effect.promise(() => registerOAuthClient(baseUrl, redirect))).body
        const start = startUrl(baseUrl, client.client_id, redirect)
        const answer = yield* hop(start)
        assert.strictEqual(answer.status, 502)
        assert.include(answer.text, "Signing in with 127.0.0.1:1 is not possible right now")
        assert.include(answer.text, "name=\"pat\"")

        // each start stores a login: at most 30 a minute from one address
        const statuses: Array<number> = []
        while (statuses.length < 40 && statuses.at(-1) !== 429) statuses.push((yield* hop(start)).status)
        assert.strictEqual(statuses.at(-1), 429, String(statuses))
        assert.isAtLeast(statuses.length, 30, "a burst of 30 (this test's first start included) is let through")
      }))
  })
})
