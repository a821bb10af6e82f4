/**
 * The app's sign-in through the configured OpenID Connect provider (SSO), in headless Chromium against a fake
 * provider: "Continue with <provider>" on /signin, the provider's answer on the shared callback, an app session in the
 * user's workspace, and back to the page the person wanted; refusals come back to /signin with the reason.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { launchBrowser, openPage, screenshot } from "../support/browser.ts"
import { ApiStack } from "../support/api-stack.ts"
import { OidcProvider, oidcApiStack } from "../support/fake-oidc.ts"

layer(oidcApiStack(["acme.test"]), { timeout: 120_000, excludeTestServices: true })("the app's SSO", (it) => {
  it.effect("Continue with the provider: a verified member lands where they were going; others are told why not", () =>
    Effect.gen(function*() {
      const stack = yield* ApiStack
      const provider = yield* OidcProvider
      const browser = yield* launchBrowser
      const origin = new URL(provider.issuer).origin
      const { page, requests } = yield* openPage(browser, { allow: (url) => url.startsWith(stack.baseUrl) || url.startsWith(origin) })

      // ann (bootstrapped by the stack, no password) goes for /decisions, is sent to sign in, continues with the provider
      provider.signInAs({ email: "ann@acme.test" })
      yield* Effect.promise(() => page.goto(`${stack.baseUrl}/decisions`))
      yield* Effect.promise(() => page.waitForURL(/\/signin\?next=/))
      const host = new URL(provider.issuer).host
      yield* screenshot(page, "app-signin-sso")
      yield* Effect.promise(() => page.getByRole("link", { name: `Continue with ${host}` }).click())
      yield* Effect.promise(() => page.waitForURL(`${stack.baseUrl}/decisions`))
      assert.include(yield* Effect.promise(() => page.locator(".who").innerText()), "ann@acme.test")

      // an email no member has: back to /signin with the reason, and no session
      yield* Effect.promise(() => page.context().clearCookies())
      provider.signInAs({ email: "stranger@acme.test" })
      yield* Effect.promise(() => page.goto(`${stack.baseUrl}/signin`))
      yield* Effect.promise(() => page.getByRole("link", { name: `Continue with ${host}` }).click())
      yield* Effect.promise(() => page.waitForURL(/\/signin\?sso=none/))
      assert.include(yield* Effect.promise(() => page.locator(".notice.bad").innerText()), "No one with your email address")
      const home = yield* Effect.promise(() => page.goto(`${stack.baseUrl}/`))
      assert.match(home!.url(), /\/signin\?next=/)

      // the provider says no, or an unverified address
      provider.signInAs({ error: "access_denied" })
      yield* Effect.promise(() => page.goto(`${stack.baseUrl}/signin`))
      yield* Effect.promise(() => page.getByRole("link", { name: `Continue with ${host}` }).click())
      yield* Effect.promise(() => page.waitForURL(/\/signin\?sso=refused/))
      provider.signInAs({ email: "ann@acme.test", emailVerified: false, subject: "another-account" })
      yield* Effect.promise(() => page.getByRole("link", { name: `Continue with ${host}` }).click())
      yield* Effect.promise(() => page.waitForURL(/\/signin\?sso=unverified/))
      assert.deepStrictEqual(requests.blocked, [])
    }))
})
