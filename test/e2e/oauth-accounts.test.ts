/**
 * MCP OAuth signed in with the app's accounts, end to end: the SDK client's flow with the sign-in page's email and
 * password form and the consent page driven in headless Chromium, ending in a tool call; the same by forms (the
 * form's CSRF and origin checks first); a browser signed in to the app (its session cookie) going straight to
 * consent, or to the sign-in page with prompt=login, an unknown or ended session; and the guessing limits shared
 * with the app's sign-in — five failures lock the account out (the right password too), a success clears the count —
 * with no password in any log line.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { Accounts } from "../../src/auth/Accounts.ts"
import { AppSessions } from "../../src/auth/AppSessions.ts"
import type { MemberIds } from "../../src/auth/Credentials.ts"
import { MAX_FAILURES, WINDOW_MS } from "../../src/auth/SignInLimiter.ts"
import { ApiStack } from "../support/api-stack.ts"
import { launchBrowser, openPage, screenshot } from "../support/browser.ts"
import { beginSdkAuthorization, callTool, mcpAccepts, mcpClient, pkcePair, postForm, registerOAuthClient, textOf } from "../support/mcp-client.ts"
import { Callback } from "../support/oauth-callback.ts"
import { authorizationQuery, oauthBrowser, ticketOf } from "../support/oauth-browser.ts"

const logs: Array<string> = []

const Live = Callback.layer.pipe(
  Layer.provideMerge(ApiStack.layer({ logLevel: "Info", onLog: (entry) => logs.push(JSON.stringify(entry)) }))
)

const PASSWORD = "correct horse battery staple"
let accounts = 0

/** A new account (its own organisation, workspace and admin) through the app's sign-up. */
const newAccount = Effect.gen(function*() {
  const { context } = yield* ApiStack
  const n = ++accounts
  const email = `owner${n}@accounts${n}.test`
  const ids = yield* Accounts.use((a) => a.signUp({ organisation: `Accounts ${n}`, workspace: `desk ${n}`, email, password: PASSWORD })).pipe(
    Effect.provide(context),
    Effect.orDie
  )
  return { email, ids: ids as MemberIds }
})

/** A public client registered with a loopback redirect. */
const registered = Effect.gen(function*() {
  const { baseUrl } = yield* ApiStack
  const redirect = "http://127.0.0.1:9/cb"
  const client = (yield* Effect.promise(() => registerOAuthClient(baseUrl, redirect))).body
  return { clientId: client.client_id as string, redirect }
})

/** The code's tokens (PKCE), as the client redeems it. */
const redeem = (clientId: string, redirect: string, code: string, verifier: string) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* ApiStack
    const reply = yield* Effect.promise(() =>
      postForm(`${baseUrl}/oauth/token`, { grant_type: "authorization_code", client_id: clientId, code, code_verifier: verifier, redirect_uri: redirect })
    )
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.json as { access_token: string; refresh_token: string }
  })

/** Whether /mcp accepts a bearer token. */
const accepted = (token: string) => Effect.flatMap(ApiStack, ({ baseUrl }) => Effect.promise(() => mcpAccepts(baseUrl, token)))

const live = <A>(f: () => Promise<A>) => Effect.promise(f)

class Used extends Context.Service<Used, { readonly secrets: Array<string> }>()("test/oauth-accounts/Used") {
  static readonly layer = Layer.sync(Used, () => ({ secrets: [] }))
}

describe("MCP OAuth with the app's accounts", () => {
  layer(Layer.merge(Live, Used.layer), { timeout: 180_000, excludeTestServices: true })("sign-in", (it) => {
    it.effect("the SDK client signs in with an email and password in the browser, picks a workspace, calls a tool", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const callback = yield* Callback
        const { email, ids } = yield* newAccount
        const { provider, transport, authorizationUrl } = yield* beginSdkAuthorization(baseUrl, callback.url)

        const browser = yield* launchBrowser
        const { page, requests } = yield* openPage(browser, {
          allow: (url) => url.startsWith(`${baseUrl}/oauth/`) || url.startsWith(callback.url)
        })
        yield* live(() => page.goto(authorizationUrl.toString()))
        // the email and password lead the page; the token is folded away below them
        assert.deepStrictEqual(
          yield* live(() => page.locator("form input:not([type=hidden])").evaluateAll((inputs) => inputs.map((i) => (i as HTMLInputElement).name))),
          ["email", "password", "pat"]
        )
        assert.isFalse(yield* live(() => page.locator("#pat").isVisible()), "the token form is folded")
        assert.strictEqual(yield* live(() => page.evaluate(() => document.activeElement?.id)), "email")

        yield* live(() => page.fill("#email", email))
        yield* live(() => page.fill("#password", "not the password"))
        yield* live(() => page.click("form:has(#password) button[type=submit]"))
        assert.include(yield* live(() => page.locator(".error").innerText()), "do not match an account")
        assert.strictEqual(yield* live(() => page.inputValue("#email")), email, "the email is kept")
        assert.strictEqual(yield* live(() => page.inputValue("#password")), "", "the password is not")
        yield* screenshot(page, "oauth-signin-password")
        yield* live(() => page.fill("#password", PASSWORD))
        yield* live(() => page.click("form:has(#password) button[type=submit]"))
        yield* live(() => page.waitForSelector("input[name=workspace_id]"))
        assert.include(yield* live(() => page.locator("main").innerText()), email)
        assert.strictEqual(yield* live(() => page.locator("input[name=workspace_id]:checked").getAttribute("value")), ids.workspace_id)
        const [query] = yield* Effect.all([callback.next, live(() => page.click("button[value=allow]"))], { concurrency: 2 })
        assert.deepStrictEqual(requests.blocked, [], "the pages load nothing from elsewhere")
        assert.strictEqual(query.get("iss"), baseUrl)

        yield* live(() => transport.finishAuth(query.get("code")!))
        assert.match(provider.saved!.access_token, /^ldg_oat_/)
        const client = yield* mcpClient(baseUrl, { authProvider: provider })
        const agents = yield* callTool(client, "list_agents")
        assert.notStrictEqual(agents.isError, true, textOf(agents))
        ;(yield* Used).secrets.push(PASSWORD, "not the password", provider.saved!.access_token)
      }))

    it.effect("by forms: the password form needs this site's CSRF cookie and origin; the code it leads to is accepted at /mcp", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const { email, ids } = yield* newAccount
        const { clientId, redirect } = yield* registered
        const { verifier, challenge } = pkcePair()
        const query = authorizationQuery(baseUrl, { clientId, redirect, challenge })

        // a form posted without the cookie the page set (another site's copy of the form) is refused, before any
        // password is checked
        const stranger = oauthBrowser(baseUrl)
        const strangerPage = yield* live(() => stranger.authorize(query))
        stranger.jar.clear()
        const forged = yield* live(() => stranger.signInWithPassword(strangerPage, email, PASSWORD))
        assert.strictEqual(forged.status, 403)
        assert.include(forged.text, "did not come from this site")
        assert.isUndefined(ticketOf(forged.text))

        const browser = oauthBrowser(baseUrl)
        const page = yield* live(() => browser.authorize(query))
        assert.strictEqual(page.status, 200)
        assert.match(page.headers.getSetCookie().join("\n"), /^ledger_csrf=[^;]+;.*HttpOnly/m, "the form's cookie is set with the page")
        const crossSite = yield* live(() => browser.signInWithPassword(page, email, PASSWORD, { origin: "https://elsewhere.example" }))
        assert.strictEqual(crossSite.status, 403, "a form posted from another origin is refused")
        const crossFetch = yield* live(() => browser.signInWithPassword(page, email, PASSWORD, { "sec-fetch-site": "cross-site" }))
        assert.strictEqual(crossFetch.status, 403)

        const consent = yield* live(() => browser.signInWithPassword(page, email, PASSWORD))
        assert.strictEqual(consent.status, 200, consent.text)
        assert.include(consent.text, `Signed in as <strong>${email}</strong>`)
        assert.notInclude(consent.text, "Use another account", "signed in just now: no other account to offer")
        assert.notInclude(consent.headers.getSetCookie().join("\n"), "ledger_session", "connecting a client does not sign the browser in to the app")
        const location = yield* live(() => browser.allow(consent, ids.workspace_id))
        assert.strictEqual(location.searchParams.get("state"), "s-1")
        const tokens = yield* redeem(clientId, redirect, location.searchParams.get("code")!, verifier)
        assert.isTrue(yield* accepted(tokens.access_token))
        ;(yield* Used).secrets.push(tokens.access_token, tokens.refresh_token)
      }))

    it.effect("a browser signed in to the app goes straight to consent; prompt=login, an unknown or ended session get the sign-in page", () =>
      Effect.gen(function*() {
        const { baseUrl, context } = yield* ApiStack
        const { email, ids } = yield* newAccount
        const { clientId, redirect } = yield* registered
        const { verifier, challenge } = pkcePair()
        const query = authorizationQuery(baseUrl, { clientId, redirect, challenge })
        const session = yield* AppSessions.use((sessions) => sessions.start(ids)).pipe(Effect.provide(context), Effect.orDie)

        const browser = oauthBrowser(baseUrl)
        browser.jar.set("ledger_session", session)
        const consent = yield* live(() => browser.authorize(query))
        assert.strictEqual(consent.status, 200, consent.text)
        assert.isString(ticketOf(consent.text), "the consent page, with its ticket")
        assert.notInclude(consent.text, `name="password"`, "no sign-in form")
        assert.include(consent.text, `Signed in as <strong>${email}</strong>`)
        const other = /<a href="([^"]+)">Not you\? Use another account<\/a>/.exec(consent.text)
        assert.isNotNull(other, "the page offers another account")
        const otherUrl = new URL(other![1]!.replaceAll("&amp;", "&"), baseUrl)
        assert.strictEqual(otherUrl.searchParams.get("prompt"), "login")
        assert.strictEqual(otherUrl.searchParams.get("code_challenge"), challenge, "the same request")

        const location = yield* live(() => browser.allow(consent, ids.workspace_id))
        const tokens = yield* redeem(clientId, redirect, location.searchParams.get("code")!, verifier)
        assert.isTrue(yield* accepted(tokens.access_token), "the session's member is the token's")
        ;(yield* Used).secrets.push(session, tokens.access_token)

        // "use another account": the sign-in page, whatever the session
        const again = yield* live(() => browser.request(`${otherUrl.pathname}${otherUrl.search}`))
        assert.strictEqual(again.status, 200)
        assert.include(again.text, `name="password"`)
        assert.isUndefined(ticketOf(again.text))

        const forged = oauthBrowser(baseUrl)
        forged.jar.set("ledger_session", "not-a-session")
        assert.include((yield* live(() => forged.authorize(query))).text, `name="password"`, "an unknown session signs no one in")

        yield* AppSessions.use((sessions) => sessions.end(session)).pipe(Effect.provide(context), Effect.orDie)
        const ended = yield* live(() => browser.authorize(query))
        assert.include(ended.text, `name="password"`, "an ended session signs no one in")
        assert.isUndefined(ticketOf(ended.text))
      }))

    it.effect(`${MAX_FAILURES} wrong passwords lock the account out (the right one too) with a 429 page; other accounts go on`, () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const locked = yield* newAccount
        const bystander = yield* newAccount
        const { clientId, redirect } = yield* registered
        const browser = oauthBrowser(baseUrl)
        const page = yield* live(() => browser.authorize(authorizationQuery(baseUrl, { clientId, redirect })))

        for (let i = 0; i < MAX_FAILURES; i++) {
          const wrong = yield* live(() => browser.signInWithPassword(page, locked.email, `wrong password ${i}`))
          assert.strictEqual(wrong.status, 401, `attempt ${i + 1}`)
          assert.include(wrong.text, "do not match an account")
        }
        for (const email of [locked.email, locked.email.toUpperCase()]) {
          const refused = yield* live(() => browser.signInWithPassword(page, email, PASSWORD))
          assert.strictEqual(refused.status, 429, "the right password is refused while the account is locked out")
          assert.include(refused.text, "Too many sign-in attempts")
          assert.isUndefined(ticketOf(refused.text))
          const retryAfter = Number(refused.headers.get("retry-after"))
          assert.isTrue(retryAfter > WINDOW_MS / 1000 - 60 && retryAfter <= WINDOW_MS / 1000, `retry-after ${retryAfter}`)
        }
        // the same browser and address, another account
        const other = yield* live(() => browser.signInWithPassword(page, bystander.email, PASSWORD))
        assert.strictEqual(other.status, 200)
        assert.isString(ticketOf(other.text))
        // a Personal Access Token is no password: it is not locked out
        assert.include((yield* live(() => browser.signInWithToken(page, "ldg_pat_wrong"))).text, "not accepted")
      }))

    it.effect("a success clears the account's failures", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const { email } = yield* newAccount
        const { clientId, redirect } = yield* registered
        const browser = oauthBrowser(baseUrl)
        const page = yield* live(() => browser.authorize(authorizationQuery(baseUrl, { clientId, redirect })))
        for (let round = 0; round < 2; round++) {
          for (let i = 0; i < MAX_FAILURES - 1; i++) {
            assert.strictEqual((yield* live(() => browser.signInWithPassword(page, email, "wrong password"))).status, 401)
          }
          const right = yield* live(() => browser.signInWithPassword(page, email, PASSWORD))
          assert.strictEqual(right.status, 200, `round ${round + 1}: ${MAX_FAILURES - 1} failures, then the right password`)
        }
      }))

    it.effect("no password or token is written to the log", () =>
      Effect.gen(function*() {
        const { secrets } = yield* Used
        assert.isAtLeast(secrets.length, 5)
        assert.isTrue(logs.some((line) => line.includes("oauth sign-in with a password")), "sign-ins are logged")
        assert.isTrue(logs.some((line) => line.includes("oauth sign-in by the app session")))
        assert.isTrue(logs.some((line) => line.includes("oauth sign-in limited")))
        for (const secret of [...secrets, PASSWORD]) {
          assert.isFalse(logs.some((line) => line.includes(secret)), "a secret in the log")
        }
      }))
  })
})
