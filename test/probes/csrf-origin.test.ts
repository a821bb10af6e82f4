/**
 * Probe: every state-changing route a browser can reach — each POST of the app (read from its route table, so a new
 * one cannot be forgotten) and each step of the OAuth authorization server's POST /oauth/authorize — refuses a form
 * from another origin (Origin or Sec-Fetch-Site) and a form without this session's CSRF token, with a 403 and
 * nothing changed, even from a browser that is signed in and holds a valid token for another form. Wrong tokens are
 * drawn property-based.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as Fs from "node:fs"
import { AppSessions, csrfTokenOf } from "../../src/auth/AppSessions.ts"
import { cookieNames } from "../../src/auth/browser.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ApiStack } from "../support/api-stack.ts"
import { withStack } from "../support/ledger-fixture.ts"
import { registerOAuthClient } from "../support/mcp-client.ts"
import { authorizationQuery, formFields, oauthBrowser, ticketOf } from "../support/oauth-browser.ts"

/** The app's POST routes, as its route table lists them. */
const appPostRoutes = [...Fs.readFileSync("src/app/AppRoutes.ts", "utf8").matchAll(/\["POST", "([^"]+)"/g)].map((m) => m[1]!)

/** What a form posted from another site carries. */
const FOREIGN: ReadonlyArray<Record<string, string>> = [{ origin: "https://evil.example" }, { origin: "null" }, { "sec-fetch-site": "cross-site" }]

const ANONYMOUS_CSRF = "c".repeat(43)

interface Sent {
  readonly origin?: string | undefined
  readonly site?: string | undefined
  readonly csrf?: string | undefined
}

layer(ApiStack.layer(), { timeout: 120_000, excludeTestServices: true })("CSRF and origin probes", (it) => {
  /** A signed-in browser's POST of `form` to `path`, with what it sends as its origin and token. */
  const poster = Effect.gen(function*() {
    const stack = yield* ApiStack
    const session = yield* withStack(stack)(AppSessions.use((sessions) => sessions.start(stack.principal)))
    const names = cookieNames(stack.baseUrl)
    const cookie = `${names.session}=${session}; ${names.csrf}=${ANONYMOUS_CSRF}`
    const post = (path: string, sent: Sent, form: Record<string, string> = {}) =>
      Effect.promise(async () => {
        const headers: Record<string, string> = { cookie, "content-type": "application/x-www-form-urlencoded" }
        if (sent.origin !== undefined) headers.origin = sent.origin
        if (sent.site !== undefined) headers["sec-fetch-site"] = sent.site
        const body = new URLSearchParams({ ...form, ...(sent.csrf === undefined ? {} : { csrf: sent.csrf }) })
        const response = await fetch(`${stack.baseUrl}${path}`, { method: "POST", headers, body, redirect: "manual" })
        return { status: response.status, text: await response.text() }
      })
    return { stack, post, valid: { session: csrfTokenOf(session), anonymous: csrfTokenOf(ANONYMOUS_CSRF) } }
  })

  it.effect("the app: every POST refuses another origin and a missing or wrong token", () =>
    Effect.gen(function*() {
      const { stack, post, valid } = yield* poster
      assert.includeMembers(appPostRoutes, ["/signin", "/signup", "/signout", "/account/password", "/admin/api-keys", "/admin/members/remove"])
      const tokensBefore = yield* withStack(stack)(Credentials.use((c) => c.list(stack.principal)))
      for (const path of appPostRoutes) {
        const form = { name: "probe", kind: "pat", email: "probe@evil.test", token_id: tokensBefore[0]?.token_id ?? "", user_id: stack.principal.user_id }
        for (const token of [valid.session, valid.anonymous]) {
          for (const sent of [{ origin: "https://evil.example", csrf: token }, { origin: "null", csrf: token }, { site: "cross-site", csrf: token }, { site: "same-site", csrf: token }]) {
            const answer = yield* post(path, sent, form)
            assert.strictEqual(answer.status, 403, `${path} from ${JSON.stringify(sent)}`)
          }
        }
        assert.strictEqual((yield* post(path, { origin: stack.baseUrl }, form)).status, 403, `${path} without a token`)
      }
      // wrong tokens, of every shape
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.constantFrom(...appPostRoutes), fc.string({ maxLength: 80 }), async (path, token) => {
            fc.pre(token !== valid.session && token !== valid.anonymous)
            const answer = await Effect.runPromise(post(path, { origin: stack.baseUrl, csrf: token }))
            return answer.status === 403
          }),
          { numRuns: 200 }
        )
      )
      // nothing changed: the same keys, and the session still signed in
      const tokensAfter = yield* withStack(stack)(Credentials.use((c) => c.list(stack.principal)))
      assert.deepStrictEqual(tokensAfter.map((t) => [t.token_id, t.revoked_at]), tokensBefore.map((t) => [t.token_id, t.revoked_at]))
      // the probe is not vacuous: with this origin and the session's token, a form is accepted
      const created = yield* post("/admin/api-keys", { origin: stack.baseUrl, csrf: valid.session }, { kind: "pat", name: "probe-key" })
      assert.notStrictEqual(created.status, 403, created.text)
    }))

  it.effect("the authorization server: sign-in (password and token) and consent refuse another origin and a missing token", () =>
    Effect.gen(function*() {
      const { stack, post } = yield* poster
      const redirect = "http://127.0.0.1:9/cb"
      const client = (yield* Effect.promise(() => registerOAuthClient(stack.baseUrl, redirect))).body
      const browser = oauthBrowser(stack.baseUrl)
      const page = yield* Effect.promise(() => browser.authorize({ ...authorizationQuery(stack.baseUrl, { clientId: client.client_id, redirect }), prompt: "login" }))
      const password: Record<string, string> = { ...formFields(page.text, "password"), email: "ann@acme.test", password: "not the password" }
      const token: Record<string, string> = { ...formFields(page.text, "pat"), pat: stack.pat }
      const send = (form: Record<string, string>, headers: Record<string, string>) =>
        Effect.promise(() => browser.request("/oauth/authorize", { form, headers }))
      for (const [name, form] of [["password", password], ["token", token]] as const) {
        for (const headers of FOREIGN) {
          const answer = yield* send(form, headers)
          assert.strictEqual(answer.status, 403, `${name} sign-in from ${JSON.stringify(headers)}`)
          assert.isUndefined(ticketOf(answer.text))
        }
        const { csrf: _, ...withoutToken } = form
        const answer = yield* send(withoutToken, {})
        assert.strictEqual(answer.status, 403, `${name} sign-in without a token`)
        assert.isUndefined(ticketOf(answer.text))
      }
      // the token's form with its token leads to consent; the consent answer refuses the same attacks
      const consent = yield* send(token, {})
      assert.isString(ticketOf(consent.text))
      const allow: Record<string, string> = { ...formFields(consent.text, "ticket"), decision: "allow", workspace_id: stack.principal.workspace_id }
      for (const headers of FOREIGN) {
        assert.strictEqual((yield* send(allow, headers)).status, 403, `consent from ${JSON.stringify(headers)}`)
      }
      const { csrf: _, ...allowWithoutToken } = allow
      assert.strictEqual((yield* post("/oauth/authorize", { origin: stack.baseUrl }, allowWithoutToken)).status, 403, "consent without a token")
      // refused answers left the ticket unanswered: the real answer still gets the code
      const answered = yield* send(allow, {})
      assert.strictEqual(answered.status, 302)
      assert.isString(new URL(answered.location!).searchParams.get("code"))
    }))
})
