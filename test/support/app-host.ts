/**
 * A bare MCP Apps host in headless Chromium, the way a real host runs an App: the resource HTML in a sandboxed
 * iframe, the ext-apps SDK's own `AppBridge` on the host side (so the App's `tools/call`s really reach /mcp through
 * the given client), and the tool input and result delivered as `ui/notifications/tool-*`.
 *
 *   const { page, frame, requests } = yield* mountApp({ browser, client, html, args, result })
 */
import { AppBridge } from "@modelcontextprotocol/ext-apps/app-bridge"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolResult,
  EmptyResultSchema,
  type JSONRPCMessage,
  type Notification,
  type Request,
  type Result
} from "@modelcontextprotocol/sdk/types.js"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import type { Browser, Frame, Page } from "playwright-core"
import { openPage, type RecordedRequests } from "./browser.ts"

const HOST_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Test host</title>
<style>body{margin:0;background:#e8e8f0;font:13px system-ui,sans-serif}.chrome{padding:8px 16px;color:#555}
.frame{margin:0 16px 16px;border:1px solid #cfcfe0;border-radius:12px;overflow:hidden;background:#fff}
iframe{display:block;width:100%;height:480px;border:0}</style></head>
<body><div class="chrome">Test host · MCP Apps</div><div class="frame"><iframe id="app" sandbox="allow-scripts" title="render_ui"></iframe></div>
<script>
const app = document.getElementById("app");
window.addEventListener("message", (event) => { if (event.source === app.contentWindow) window.toHost(event.data); });
window.toApp = (message) => app.contentWindow.postMessage(message, "*");
window.resizeApp = (height) => { app.style.height = Math.min(Math.max(height, 200), 6000) + "px"; };
</script></body></html>`

/** The host side of postMessage, carried across Playwright: the page relays the iframe's messages to Node. */
const pageTransport = (page: Page): Transport => {
  const transport: Transport = {
    start: async () => {},
    send: async (message: JSONRPCMessage) => {
      await page.evaluate((m) => (window as any).toApp(m), message)
    },
    close: async () => transport.onclose?.()
  }
  return transport
}

export interface MountedApp {
  readonly page: Page
  readonly frame: Frame
  readonly requests: RecordedRequests
  /** the Content-Security-Policy violations Chromium reported on the page or in the App's frame */
  readonly violations: Array<string>
  /** Delivers a tool result as the host does, and returns once the App has handled it (a ping behind it answered). */
  deliver(result: CallToolResult): Effect.Effect<void>
}

/**
 * Opens the host page, runs the App in its iframe behind an AppBridge, delivers `result` and waits for `ready`
 * (by default the drawn view, `html[data-view=<args.view>]`), which must be drawn without a CSP violation. The page
 * closes, after a documented teardown, with the scope.
 */
export const mountApp = (options: {
  readonly browser: Browser
  /** the bridge forwards the App's requests through this client */
  readonly client: Client
  readonly html: string
  readonly args: Record<string, unknown>
  readonly result: CallToolResult
  readonly hostContext?: Record<string, unknown>
  readonly ready?: string
}) =>
  Effect.gen(function*() {
    const { page, requests } = yield* openPage(options.browser)
    const violations: Array<string> = []
    page.on("console", (message) => {
      if (message.text().includes("Content Security Policy")) violations.push(message.text())
    })
    const transport = pageTransport(page)
    yield* Effect.promise(() => page.exposeFunction("toHost", (message: JSONRPCMessage) => transport.onmessage?.(message)))
    yield* Effect.promise(() => page.setContent(HOST_PAGE))
    const bridge = new AppBridge(options.client, { name: "ledger-test-host", version: "1.0.0" }, { serverTools: {}, logging: {} }, {
      hostContext: { displayMode: "inline", platform: "web", locale: "en-US", theme: "light", ...options.hostContext }
    })
    bridge.onsizechange = ({ height }) => {
      // fire-and-forget: a late size change may arrive while the page is closing, and that rejection is expected
      if (height !== undefined) page.evaluate((h) => (window as any).resizeApp(h), height).catch(() => {})
    }
    const initialized = new Promise<void>((resolve) => {
      bridge.oninitialized = () => resolve()
    })
    yield* Effect.promise(() => bridge.connect(transport))
    yield* Effect.promise(() =>
      page.evaluate((doc) => ((document.getElementById("app") as HTMLIFrameElement).srcdoc = doc), options.html)
    )
    yield* Effect.promise(() => initialized)
    yield* Effect.promise(async () => {
      await bridge.sendToolInput({ arguments: options.args })
      await bridge.sendToolResult(options.result)
    })
    const frame = yield* Effect.promise(async () => (await (await page.waitForSelector("#app")).contentFrame())!)
    yield* Effect.promise(() => frame.waitForSelector(options.ready ?? `html[data-view="${options.args.view}"]`))
    assert.deepStrictEqual(violations, [], "the App drew without breaking its Content-Security-Policy")
    // the documented end of a view: the host asks it to tear down, and the App answers
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => bridge.teardownResource({})).pipe(Effect.timeout("2 seconds"), Effect.ignore)
    )
    const deliver = (result: CallToolResult) =>
      Effect.promise(async () => {
        await bridge.sendToolResult(result)
        // postMessage keeps order: the App has handled the result once it answers a ping sent after it
        // (AppBridge's typings lose the Protocol methods it inherits)
        await (bridge as unknown as Pick<Protocol<Request, Notification, Result>, "request">).request({ method: "ping" }, EmptyResultSchema)
      })
    return { page, frame, requests, violations, deliver } satisfies MountedApp
  })

/** Waits until the host has sized the iframe to the App's content (size-changed delivered), then for a paint. */
export const settle = (page: Page) =>
  Effect.promise(async () => {
    const frame = (await (await page.waitForSelector("#app")).contentFrame())!
    for (let i = 0; i < 50; i++) {
      const content = await frame.evaluate(() => Math.ceil(document.documentElement.getBoundingClientRect().height))
      const box = await page.evaluate(() => document.getElementById("app")!.getBoundingClientRect().height)
      if (Math.abs(content - box) <= 1) break
      await page.waitForTimeout(50)
    }
    // Chromium paints an out-of-process iframe only within the viewport: grow the viewport to the whole page
    const height = await page.evaluate(() => Math.ceil(document.documentElement.scrollHeight))
    await page.setViewportSize({ width: page.viewportSize()!.width, height })
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))))
  })

export const count = (frame: Frame, selector: string) => Effect.promise(() => frame.locator(selector).count())
export const text = (frame: Frame, selector: string) =>
  Effect.promise(() => frame.locator(selector).first().innerText())
