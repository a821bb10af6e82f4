/**
 * Probe: no `next` sends a browser off the origin. A browser drops tabs and newlines from a URL and reads a
 * backslash as a slash, so `/\t/other.host` is `//other.host`; every such form, and arbitrary mixes of them
 * (property-based), must resolve to a page of this site — checked in headless Chromium for a signed-in browser
 * (GET /signin) and for one signing in (POST /signin with the form's `next`).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import type { Browser, Page } from "playwright-core"
import { localPath } from "../../src/auth/browser.ts"
import { type AppStack, appStack } from "../support/app-stack.ts"
import { launchBrowser, openPage, screenshot, signUpOnPage } from "../support/browser.ts"

const PASSWORD = "correct horse battery staple"
const BASE = "https://ledger.example"

/** Values of `next` that leave the origin under a naive check, each as the attacker would send it. */
const HOSTILE = [
  "//other.host/x",
  "/\\other.host/x",
  "\\\\other.host/x",
  "/\t/other.host/x",
  "/\n/other.host/x",
  "/\r\n/other.host/x",
  "\t//other.host/x",
  "/\\\t\\other.host/x",
  " //other.host/x",
  "https://other.host/x",
  "https:other.host/x",
  "http://127.0.0.1:1/x",
  "javascript:alert(1)",
  "data:text/html,<script>alert(1)</script>",
  "/%09/other.host/x",
  "/%2F/other.host/x",
  "/%5C/other.host/x",
  `${BASE}//other.host/x`,
  "https://ledger.example@other.host/x",
  "///other.host/x"
]

describe("localPath", () => {
  it("keeps paths of this site, with their query and fragment", () => {
    assert.strictEqual(localPath("/decisions?agent=a#top", BASE), "/decisions?agent=a#top")
    assert.strictEqual(localPath(`${BASE}/pulse`, BASE), "/pulse")
    assert.strictEqual(localPath("sessions/1", BASE), "/sessions/1")
    assert.strictEqual(localPath(undefined, BASE), "/")
  })

  it("never answers a place off the origin, however it is written", () => {
    for (const next of HOSTILE) {
      const path = localPath(next, BASE)
      assert.strictEqual(new URL(path, BASE).origin, BASE, `${JSON.stringify(next)} → ${path}`)
      assert.match(path, /^\/(?![/\\])/, JSON.stringify(next))
    }
    const piece = fc.constantFrom("/", "\\", "\t", "\n", "\r", " ", "other.host", "@", ":", "%2F", "%5C", "%09", "http:", "https:", ".", "..", "?", "#", "x")
    fc.assert(fc.property(fc.array(piece, { maxLength: 12 }).map((parts) => parts.join("")), (next) => {
      const path = localPath(next, BASE)
      return new URL(path, BASE).origin === BASE && /^\/(?![/\\])/.test(path) && !/[\t\n\r]/.test(path)
    }), { numRuns: 5_000 })
  })
})

class Site extends Context.Service<Site, { readonly app: AppStack; readonly browser: Browser }>()("test/probes/Site") {}

const SiteLive = Layer.effect(Site, Effect.gen(function*() {
  return { app: yield* appStack(), browser: yield* launchBrowser }
}))

/** Where the page ended up after opening `url` (off-origin navigations are aborted and recorded). */
const landing = (page: Page, action: () => Promise<unknown>) =>
  Effect.promise(async () => {
    await action().catch(() => undefined)
    await page.waitForLoadState("load").catch(() => undefined)
    return page.url()
  })

layer(SiteLive, { timeout: 180_000, excludeTestServices: true })("sign-in redirects in a browser", (it) => {
  it.effect("no next, in any browser-cleaned form, leaves the origin", () =>
    Effect.gen(function*() {
      const { app, browser } = yield* Site
      const stayHere = (url: string) => url.startsWith(app.baseUrl)
      const { page, requests } = yield* openPage(browser, { allow: stayHere })
      yield* Effect.promise(() => page.goto(`${app.baseUrl}/signup`))
      yield* signUpOnPage(page, app.baseUrl, { organisation: "Probe Org", email: "probe@redirect.test", password: PASSWORD })
      const hostile = [...HOSTILE, `${app.baseUrl}//other.host/x`, `${app.baseUrl.replace("http:", "http:\t")}@other.host/`]

      // signed in: GET /signin?next=… redirects at once
      for (const next of hostile) {
        const url = yield* landing(page, () => page.goto(`${app.baseUrl}/signin?next=${encodeURIComponent(next)}`))
        assert.isTrue(stayHere(url), `signed in, next=${JSON.stringify(next)} landed on ${url}`)
      }
      // a page of this site is still honoured
      assert.strictEqual(yield* landing(page, () => page.goto(`${app.baseUrl}/signin?next=${encodeURIComponent("/pulse")}`)), `${app.baseUrl}/pulse`)

      // signing in: the form carries next through the POST
      const { page: fresh, requests: freshRequests } = yield* openPage(browser, { allow: stayHere })
      for (const next of hostile.slice(0, 8)) {
        yield* Effect.promise(() => fresh.context().clearCookies())
        const url = yield* landing(fresh, async () => {
          await fresh.goto(`${app.baseUrl}/signin?next=${encodeURIComponent(next)}`)
          await fresh.getByLabel("Email").fill("probe@redirect.test")
          await fresh.getByLabel("Password").fill(PASSWORD)
          await fresh.getByRole("button", { name: "Sign in" }).click()
          await fresh.waitForLoadState("load")
        })
        assert.isTrue(stayHere(url), `signing in, next=${JSON.stringify(next)} landed on ${url}`)
      }
      yield* screenshot(fresh, "probe-redirect")
      assert.deepStrictEqual([...requests.blocked, ...freshRequests.blocked], [], "no request left the origin")
    }))
})
