/**
 * Headless Chromium for browser tests — CHROMIUM_PATH when set, else the system's `/usr/bin/chromium` when there is
 * one, else the Chromium that ships inside the npm package `@sparticuz/chromium` (a test-only tool in test/tools,
 * unpacked to the temp directory on first use), so `npm install && npm test` needs no system browser — with
 * helpers every suite needs: a page whose requests are all recorded and, unless allowed, aborted — so a test can
 * assert that nothing leaves the page — and screenshots under test/artifacts/.
 *
 *   const browser = yield* launchBrowser
 *   const { page, requests } = yield* openPage(browser, { allow: (url) => url.startsWith(stack.baseUrl) })
 *   ...
 *   assert.deepStrictEqual(requests.blocked, [])
 *   yield* screenshot(page, "docs")
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Browser, type BrowserContextOptions, chromium, type Page } from "playwright-core"

const SYSTEM_CHROMIUM = "/usr/bin/chromium"

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run"
]

export const ARTIFACTS_DIR = Path.resolve("test/artifacts")

/** The browser to launch: its executable and the arguments it needs. */
const chromiumToLaunch = async (): Promise<{ readonly executablePath: string; readonly args: ReadonlyArray<string> }> => {
  const configured = process.env.CHROMIUM_PATH ?? (Fs.existsSync(SYSTEM_CHROMIUM) ? SYSTEM_CHROMIUM : undefined)
  if (configured !== undefined) return { executablePath: configured, args: CHROMIUM_ARGS }
  // installed by the test command's global setup (test/support/global-setup.ts), not a dependency of the service
  const packaged: { default: { executablePath(): Promise<string>; readonly args: Array<string> } } = await import(
    Path.resolve(import.meta.dirname, "../tools/node_modules/@sparticuz/chromium/build/index.js")
  )
  // not the package's own arguments: they are for AWS Lambda (`--single-process` makes closing a browser context
  // close the browser; `--disable-web-security` would hide what the pages' tests check)
  return { executablePath: await packaged.default.executablePath(), args: CHROMIUM_ARGS }
}

/** One browser for the scope. */
export const launchBrowser: Effect.Effect<Browser, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () => {
    const { executablePath, args } = await chromiumToLaunch()
    return chromium.launch({ executablePath, args: [...args] })
  }),
  (browser) => Effect.promise(() => browser.close())
)

export interface RecordedRequests {
  /** every request the page (and its frames) made, in order */
  readonly all: Array<string>
  /** the ones that were not allowed, and were aborted */
  readonly blocked: Array<string>
}

/**
 * A fresh page in its own context, closed with the scope. Every request is recorded; those `allow` refuses (all,
 * by default) are aborted, so a page can never reach the network unnoticed.
 */
export const openPage = (
  browser: Browser,
  options: { readonly allow?: (url: string) => boolean; readonly context?: BrowserContextOptions } = {}
): Effect.Effect<{ readonly page: Page; readonly requests: RecordedRequests }, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const context = await browser.newContext({ viewport: { width: 1200, height: 900 }, ...options.context })
      const page = await context.newPage()
      const requests: RecordedRequests = { all: [], blocked: [] }
      await context.route("**/*", (route) => {
        const url = route.request().url()
        requests.all.push(url)
        if (options.allow?.(url)) return route.continue()
        requests.blocked.push(url)
        return route.abort("blockedbyclient")
      })
      return { page, requests }
    }),
    ({ page }) => Effect.promise(() => page.context().close())
  )

/** Writes `test/artifacts/<name>.png` (the whole page, or what the window shows) and returns its path. */
export const screenshot = (page: Page, name: string, options: { readonly fullPage?: boolean } = {}) =>
  Effect.promise(async () => {
    Fs.mkdirSync(ARTIFACTS_DIR, { recursive: true })
    const path = Path.join(ARTIFACTS_DIR, `${name}.png`)
    await page.screenshot({ path, fullPage: options.fullPage ?? true })
    return path
  })

/** Signs up an organisation on the app's /signup form, as a person does (the page must show the form). */
export const signUpOnPage = (page: Page, baseUrl: string, account: { readonly organisation: string; readonly email: string; readonly password: string }) =>
  Effect.promise(async () => {
    await page.getByLabel("Organisation").fill(account.organisation)
    await page.getByLabel("First workspace").fill("production")
    await page.getByLabel("Email").fill(account.email)
    await page.getByLabel("Password").fill(account.password)
    await page.getByRole("button", { name: "Create organisation" }).click()
    await page.waitForURL(`${baseUrl}/signup`)
  })
