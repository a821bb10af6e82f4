/**
 * The MCP App resource of render_ui: one self-contained HTML document (inline CSS, JS and SVG; a CSP that forbids
 * every network request) that draws whichever view a render_ui result names.
 */
import { RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/server"
import * as Crypto from "node:crypto"
import { BRAND_MARK, RUNTIME, STYLES } from "../views/client.ts"
import { viewRenderers } from "../views/index.ts"

export const UI_RESOURCE_URI = "ui://ledger/render-ui.html"


const script = RUNTIME.replace("__LEDGER_VIEWS__", () => viewRenderers)

// the script is inlined: a closing tag inside it would end the element early
if (/<\/script/i.test(script) || /<\/style/i.test(STYLES)) throw new Error("render_ui: inline code must not contain closing tags")

const sha256 = (text: string) => `'sha256-${Crypto.createHash("sha256").update(text).digest("base64")}'`

// the document is static, so its one script and one stylesheet are allowed by hash and nothing else runs: markup
// that data ever reached (an inline handler, an injected <script>) stays inert; the views style through the CSSOM
// (client.ts `h` and `s`), which style-src does not govern
const CSP = `default-src 'none'; script-src ${sha256(script)}; style-src ${sha256(STYLES)}; img-src data:; base-uri 'none'; form-action 'none'`

export const renderUiHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${CSP}">
<title>Agent Decision Ledger</title>
<style>${STYLES}</style>
</head>
<body>
<header class="app">${BRAND_MARK}<div class="titles"><div class="brand">Agent Decision Ledger<span id="subtitle"></span></div><h1 id="title">Loading…</h1></div><button id="back" class="back" type="button" hidden>← Back</button></header>
<main><div class="notice" role="status">Waiting for data from the host…</div></main>
<footer></footer>
<script>${script}</script>
</body>
</html>
`

export interface UiResource {
  readonly uri: string
  readonly name: string
  readonly title: string
  readonly description: string
  readonly mimeType: string
  readonly text: string
  readonly meta: Record<string, unknown>
}

export const uiResources: ReadonlyArray<UiResource> = [{
  uri: UI_RESOURCE_URI,
  name: "render-ui",
  title: "Agent Decision Ledger views",
  description: "Interactive views of the ledger (agents, agent, session timeline, decision audit trail, decisions table) for render_ui.",
  mimeType: RESOURCE_MIME_TYPE,
  text: renderUiHtml,
  // no external origins: the host's sandbox may stay fully closed
  meta: { ui: { csp: { connectDomains: [], resourceDomains: [] }, prefersBorder: true } }
}]
