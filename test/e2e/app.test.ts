/**
 * The app in headless Chromium, the way a person uses it: sign up, copy the Gateway Key, call the gateway with it
 * through the `openai` SDK, see the agent on `/`, drill into the decision (and back and forward), create and revoke
 * a key, invite a restricted member who signs in and sees only their own decisions, and watch the pipeline page.
 * Every page is checked with axe-core (no serious or critical violation), nothing leaves the origin, and screenshots
 * land in test/artifacts/app-*.png.
 */
import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import type { Browser, Page } from "playwright-core"
import { AppSessions } from "../../src/auth/AppSessions.ts"
import { type AppStack, appStack } from "../support/app-stack.ts"
import { launchBrowser, openPage, screenshot, signUpOnPage } from "../support/browser.ts"
import { gatewayClient } from "../support/openai-client.ts"

const PROVIDER_KEY = "sk-provider-app-0123456789"
const PASSWORD = "correct horse battery staple"
const AXE_SOURCE = Fs.readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

class App extends Context.Service<App, { readonly app: AppStack; readonly browser: Browser }>()("test/App") {}

const AppLive = Layer.effect(App, Effect.gen(function*() {
  return { app: yield* appStack(), browser: yield* launchBrowser }
}))

const go = (page: Page, url: string) => Effect.promise(() => page.goto(url, { waitUntil: "load" }))

/** axe-core on the page as it is: serious and critical violations, named. */
const axe = (page: Page) =>
  Effect.promise(async () => {
    await page.evaluate(AXE_SOURCE)
    const result = await page.evaluate(async () => {
      const run = await (window as any).axe.run(document, { resultTypes: ["violations"] })
      return run.violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n: any) => n.target.join(" ") + " " + n.html.slice(0, 80) + " " + (n.any[0]?.message ?? "")).slice(0, 3) }))
    }) as Array<{ id: string; impact: string; nodes: Array<string> }>
    return result.filter((v) => v.impact === "serious" || v.impact === "critical")
  })

/** Checks a page: drawn without an error notice, accessible, screenshotted. */
const check = (page: Page, name: string) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => page.waitForFunction(() => document.querySelector("#view[aria-busy=true]") === null, undefined, { timeout: 10_000 }))
    const errors = yield* Effect.promise(() => page.locator(".notice.bad").count())
    assert.strictEqual(errors, 0, `${name}: ${yield* Effect.promise(() => page.locator("main").innerText())}`)
    const violations = yield* axe(page)
    assert.deepStrictEqual(violations, [], `${name}: axe violations ${JSON.stringify(violations)}`)
    yield* screenshot(page, `app-${name}`)
  })

const call = (app: AppStack, key: string, agent: string, content: string) =>
  Effect.promise(async () => {
    const client = gatewayClient({ baseURL: app.gateway.baseURL, gatewayKey: key }, { query: { agent_id: agent, agent_name: agent }, providerKey: PROVIDER_KEY })
    const { response } = await client.chat.completions.create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }] }).withResponse()
    return response.headers.get("x-ledger-id")!
  })

/** The status of one gateway call with a key (200, or 401 once revoked). */
const statusWith = (app: AppStack, key: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${app.gateway.baseURL}/chat/completions?agent_id=probe`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-service-provider-api-key": PROVIDER_KEY },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "ping" }] })
    })
    await response.arrayBuffer()
    return response.status
  })

/** Reloads `url` until `selector` shows up (the builder makes decisions a moment after the call). */
const waitFor = (page: Page, url: string, selector: string) =>
  Effect.gen(function*() {
    yield* go(page, url)
    const found = yield* Effect.promise(() => page.locator(selector).count())
    if (found === 0) return yield* Effect.fail("not yet")
  }).pipe(Effect.retry({ schedule: Schedule.spaced("250 millis"), times: 60 }), Effect.orDie)

const sameOrigin = (app: AppStack) => (url: string) => url.startsWith(app.baseUrl) || url.startsWith("data:")

layer(AppLive, { timeout: 240_000, excludeTestServices: true })("the app in a browser", (it) => {
  it.effect("sign up, record a call, drill down, manage keys, invite a restricted member, watch the pipeline", () =>
    Effect.gen(function*() {
      const { app, browser } = yield* App
      const { page, requests } = yield* openPage(browser, { allow: sameOrigin(app) })
      page.on("dialog", (dialog) => void dialog.accept())

      // --- sign up: the keys are shown once, with setup snippets
      yield* go(page, `${app.baseUrl}/signup`)
      yield* check(page, "signup")
      yield* signUpOnPage(page, app.baseUrl, { organisation: "Initech", email: "ann@initech.test", password: PASSWORD })
      yield* check(page, "keys-once")
      // copy the Gateway Key as a person does: its Copy button, then the clipboard
      yield* Effect.promise(() => page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: app.baseUrl }))
      yield* Effect.promise(() => page.locator("button[data-copy='gateway-key']").click())
      const gatewayKey = yield* Effect.promise(() => page.evaluate(() => navigator.clipboard.readText()))
      assert.match(gatewayKey, /^ldg_gw_/)
      assert.strictEqual(gatewayKey, yield* Effect.promise(() => page.locator("#gateway-key").innerText()))
      const snippet = yield* Effect.promise(() => page.locator("#setup-openai").innerText())
      assert.include(snippet, gatewayKey)
      assert.include(yield* Effect.promise(() => page.locator("#setup-claude").innerText()), "ANTHROPIC_BASE_URL=")
      assert.include(yield* Effect.promise(() => page.locator("#setup-codex").innerText()), 'wire_api = "responses"')

      // --- the Gateway Key works through the openai SDK; the agent appears on /
      const ledgerId = yield* call(app, gatewayKey, "billing-agent", "Refund invoice 42?")
      yield* waitFor(page, `${app.baseUrl}/`, "a.drill:has-text('billing-agent')")
      yield* check(page, "home")

      // --- drill down: agent → session → decision, then back and forward
      yield* Effect.promise(() => page.locator("a.drill", { hasText: "billing-agent" }).first().click())
      yield* Effect.promise(() => page.waitForURL(/\/agents\/billing-agent$/))
      yield* check(page, "agent")
      // by keyboard: focus the session's row, Enter
      yield* Effect.promise(async () => {
        await page.locator("tbody tr.clickable").first().focus()
        await page.keyboard.press("Enter")
      })
      yield* Effect.promise(() => page.waitForURL(/\/sessions\/[0-9a-f-]{36}$/))
      const sessionUrl = page.url()
      yield* check(page, "session")
      yield* Effect.promise(() => page.locator(`li[data-ledger-id="${ledgerId}"] a.drill`).click())
      yield* Effect.promise(() => page.waitForURL(`${app.baseUrl}/decisions/${ledgerId}`))
      yield* check(page, "decision")
      assert.include(yield* Effect.promise(() => page.locator("main").innerText()), "Refund invoice 42?")
      yield* Effect.promise(() => page.goBack())
      assert.strictEqual(page.url(), sessionUrl)
      yield* Effect.promise(() => page.goForward())
      assert.strictEqual(page.url(), `${app.baseUrl}/decisions/${ledgerId}`)
      for (const [path, name] of [["/decisions", "decisions"], ["/pulse", "pulse"], ["/graph?mode=agent_network", "graph"]] as const) {
        yield* go(page, `${app.baseUrl}${path}`)
        yield* check(page, name)
      }

      // --- Admin → API Keys: create a key (shown once), use it, revoke it: refused within 5 s
      yield* go(page, `${app.baseUrl}/admin/api-keys`)
      yield* check(page, "api-keys")
      yield* Effect.promise(async () => {
        await page.getByLabel("Kind").selectOption("gateway")
        await page.getByLabel("Name").fill("ci-runner")
        await page.getByRole("button", { name: "Create key" }).click()
        await page.waitForSelector("#new-secret")
      })
      const created = yield* Effect.promise(() => page.locator("#new-secret").innerText())
      yield* screenshot(page, "app-key-created")
      assert.strictEqual(yield* statusWith(app, created), 200)
      yield* go(page, `${app.baseUrl}/admin/api-keys`)
      assert.notInclude(yield* Effect.promise(() => page.content()), created, "the secret is not shown again")
      const row = page.locator("tr", { hasText: "ci-runner" })
      yield* Effect.promise(() => row.getByRole("button", { name: /Revoke/ }).click())
      yield* Effect.promise(() => page.waitForSelector(".notice.ok"))
      const revokedAt = Date.now()
      yield* statusWith(app, created).pipe(
        Effect.flatMap((status) => (status === 401 ? Effect.void : Effect.fail(status))),
        Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 100 }),
        Effect.orDie
      )
      assert.isBelow(Date.now() - revokedAt, 5_000, "revocation takes effect within 5 s")
      yield* screenshot(page, "app-key-revoked")

      // --- Members: invite a restricted member
      yield* go(page, `${app.baseUrl}/admin/members`)
      yield* check(page, "members")
      yield* Effect.promise(async () => {
        await page.getByLabel("Email").fill("rex@initech.test")
        await page.locator("#invite-role").selectOption("restricted")
        await page.getByRole("button", { name: "Create invitation" }).click()
        await page.waitForSelector("#invitation-link")
      })
      const invitation = yield* Effect.promise(() => page.locator("#invitation-link").innerText())

      // rex, in a browser of their own: joins, records a call, sees only their own decisions
      const rex = yield* openPage(browser, { allow: sameOrigin(app) })
      yield* go(rex.page, invitation)
      yield* check(rex.page, "invitation")
      yield* Effect.promise(async () => {
        await rex.page.getByLabel("Choose a password").fill("rex's own passphrase")
        await rex.page.getByRole("button", { name: "Join" }).click()
        await rex.page.waitForSelector("#gateway-key")
      })
      const rexKey = yield* Effect.promise(() => rex.page.locator("#gateway-key").innerText())
      yield* Effect.promise(() => rex.page.getByRole("button", { name: "Sign out" }).click())
      yield* Effect.promise(() => rex.page.waitForURL(/\/signin$/))
      yield* check(rex.page, "signin")
      yield* Effect.promise(async () => {
        await rex.page.getByLabel("Email").fill("rex@initech.test")
        await rex.page.getByLabel("Password").fill("rex's own passphrase")
        await rex.page.getByRole("button", { name: "Sign in" }).click()
        await rex.page.waitForURL(`${app.baseUrl}/`)
      })
      yield* call(app, rexKey, "rex-agent", "Rex's question")
      yield* waitFor(rex.page, `${app.baseUrl}/`, "a.drill:has-text('rex-agent')")
      yield* check(rex.page, "restricted-home")
      assert.strictEqual(yield* Effect.promise(() => rex.page.locator("a.drill:has-text('billing-agent')").count()), 0)
      const foreign = yield* Effect.promise(() => rex.page.goto(`${app.baseUrl}/decisions/${ledgerId}`))
      assert.strictEqual(foreign!.status(), 404, "a restricted member cannot open another member's decision")
      const members = yield* Effect.promise(() => rex.page.goto(`${app.baseUrl}/admin/members`))
      assert.strictEqual(members!.status(), 403)
      assert.deepStrictEqual(rex.requests.blocked, [])

      // --- workspaces: ann creates "staging" (empty: workspaces are kept apart) and switches back to production
      yield* go(page, `${app.baseUrl}/account/workspaces`)
      yield* check(page, "workspaces")
      yield* Effect.promise(async () => {
        await page.getByLabel("Name").fill("staging")
        await page.getByRole("button", { name: "Create workspace" }).click()
        await page.waitForURL(`${app.baseUrl}/`)
      })
      assert.include(yield* Effect.promise(() => page.locator("header .brand").innerText()), "staging")
      assert.strictEqual(yield* Effect.promise(() => page.locator("a.drill:has-text('billing-agent')").count()), 0)
      yield* go(page, `${app.baseUrl}/account/workspaces`)
      yield* Effect.promise(async () => {
        await page.getByRole("button", { name: "Switch to production" }).click()
        await page.waitForURL(`${app.baseUrl}/`)
      })
      assert.isAbove(yield* Effect.promise(() => page.locator("a.drill:has-text('billing-agent')").count()), 0)

      // --- Initech's admin is not the installation's operator: the pipeline spans every tenant
      const refusedPipeline = yield* Effect.promise(() => page.goto(`${app.baseUrl}/admin/pipeline`))
      assert.strictEqual(refusedPipeline!.status(), 403)

      // --- the operator (the installation's first tenant, bootstrapped without a password) signs in by a one-time
      // link, sets a password, and watches the pipeline page update live
      const boot = app.gateway.principal
      const linkToken = yield* AppSessions.use((sessions) => sessions.createSignInLink(boot)).pipe(Effect.provide(app.gateway.context))
      const operator = yield* openPage(browser, { allow: sameOrigin(app) })
      yield* go(operator.page, `${app.baseUrl}/signin/link?token=${linkToken}`)
      yield* check(operator.page, "signin-link")
      yield* Effect.promise(async () => {
        await operator.page.getByRole("button", { name: "Sign in" }).click()
        await operator.page.waitForURL(/\/account\/password$/)
        await operator.page.getByLabel("New password").fill("operator passphrase 1")
        await operator.page.getByRole("button", { name: "Set password" }).click()
        await operator.page.waitForSelector(".notice.ok")
      })
      yield* check(operator.page, "password-set")
      // from now on a change asks for the current password
      yield* Effect.promise(async () => {
        await operator.page.getByLabel("Current password").fill("operator passphrase 1")
        await operator.page.getByLabel("New password").fill("operator passphrase 2")
        const [changed] = await Promise.all([
          operator.page.waitForResponse((response) => response.request().method() === "POST"),
          operator.page.getByRole("button", { name: "Set password" }).click()
        ])
        assert.strictEqual(changed.status(), 200, await changed.text())
      })
      const reused = yield* Effect.promise(async () => {
        const response = await fetch(`${app.baseUrl}/signin/link?token=${linkToken}`)
        return response.status
      })
      assert.strictEqual(reused, 200, "the link page itself still shows (a button), but it signs no one in again")
      yield* go(operator.page, `${app.baseUrl}/admin/pipeline`)
      yield* check(operator.page, "pipeline")
      const before = yield* Effect.promise(() => operator.page.locator("#live-status").innerText())
      yield* Effect.promise(() => operator.page.waitForFunction((text) => document.getElementById("live-status")!.textContent !== text, before, { timeout: 10_000 }))
      const figure = yield* Effect.promise(() => operator.page.locator("[data-figure='stream.length']").innerText())
      assert.match(figure, /^[\d,]+$/)
      assert.deepStrictEqual(operator.requests.blocked, [])

      assert.deepStrictEqual(requests.blocked, [], "no request leaves the origin")
    }))
})

