/**
 * The API reference at `/docs` in headless Chromium: it renders the REST API (every endpoint, the bearer scheme)
 * without any request leaving the server's origin — the page works with no internet access.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { apiStack } from "../support/api-stack.ts"
import { launchBrowser, openPage, screenshot } from "../support/browser.ts"

describe("/docs", () => {
  it.live("renders the API reference offline: every endpoint, nothing fetched from another origin", () =>
    Effect.gen(function*() {
      const stack = yield* apiStack()
      const browser = yield* launchBrowser
      const sameOrigin = (url: string) => url.startsWith(`${stack.baseUrl}/`) || url.startsWith("data:") || url.startsWith("blob:")
      const { page, requests } = yield* openPage(browser, { allow: sameOrigin })
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))

      const response = yield* Effect.promise(() => page.goto(`${stack.baseUrl}/docs`, { waitUntil: "networkidle" }))
      assert.strictEqual(response?.status(), 200)
      assert.include(response?.headers()["content-type"], "text/html")
      yield* Effect.promise(() => page.getByText("Agent Decision Ledger — REST read API").first().waitFor({ timeout: 20_000 }))
      for (const summary of ["List agents", "List an agent's sessions", "Get a session", "List a session's decisions", "Get a decision", "List decisions"]) {
        yield* Effect.promise(() => page.getByText(summary, { exact: true }).first().waitFor({ timeout: 10_000 }))
      }
      const text = yield* Effect.promise(() => page.locator("body").innerText())
      for (const path of ["/v1/agents", "/v1/sessions/{session_id}", "/v1/sessions/{session_id}/decisions/{ledger_id}"]) {
        assert.include(text, path)
      }
      yield* screenshot(page, "docs")

      assert.deepStrictEqual(requests.blocked, [], "the page fetched nothing from another origin")
      assert.deepStrictEqual(errors, [])
    }).pipe(Effect.scoped), 90_000)
})
