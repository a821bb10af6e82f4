/**
 * The app's static assets, served from this origin (the pages' CSP allows nothing else): one stylesheet (the views'
 * styles plus the app's frame and forms), the views' web runtime, and a small script for the app's own pages (copy
 * buttons, confirmations, the pipeline page's live figures). Their URLs carry a content hash, so they are cached
 * for good and a new release is fetched at once.
 */
import { HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import { STYLES } from "../views/client.ts"
import { WEB_RUNTIME } from "./webRuntime.ts"

const APP_STYLES = `
.skip{position:absolute;left:-999px;top:8px;background:var(--panel);padding:6px 10px;border-radius:8px;z-index:10}.skip:focus{left:12px}
header.app a.home{display:flex}header.app .brand span{color:var(--muted);text-transform:none;letter-spacing:0;font-weight:600}
form.signout{display:flex;align-items:center;gap:10px}.who{color:var(--muted);font-size:13px}
nav.site{display:flex;flex-wrap:wrap;gap:4px;padding:6px 14px;border-bottom:1px solid var(--line);background:var(--panel)}
nav.site a{color:var(--muted);text-decoration:none;padding:6px 10px;border-radius:8px;font-weight:600}
nav.site a:hover{background:var(--sunk);color:var(--text)}nav.site a[aria-current=page]{background:var(--brand);color:#fff}
a{color:var(--brand)}a.drill{color:var(--brand)}
:focus-visible{outline:2px solid var(--brand);outline-offset:2px}
.narrow{max-width:520px;width:100%;margin:24px auto}
form.stack{display:grid;gap:12px}form.stack label{display:grid;gap:5px;font-weight:600}
form.stack .hint{font-weight:400;color:var(--muted);font-size:12.5px}
input[type=text],input[type=email],input[type=password],input[type=date],select{border:1px solid var(--line);background:var(--bg);color:var(--text);border-radius:8px;padding:8px 10px;font:inherit}
button.primary{border:1px solid var(--brand);background:var(--brand);color:#fff;border-radius:8px;padding:8px 14px;font:inherit;font-weight:600;cursor:pointer}
button.danger{border:1px solid var(--bad);background:transparent;color:var(--bad);border-radius:8px;padding:4px 10px;font:inherit;cursor:pointer}
.inline{display:inline-flex;gap:6px;align-items:center;margin:0}
.field-error{color:var(--bad);font-weight:500;font-size:13px}
.notice.ok{color:var(--ok)}
.secret{display:flex;gap:8px;align-items:center;flex-wrap:wrap}.secret code{font:13px var(--mono);background:var(--sunk);padding:6px 10px;border-radius:8px;word-break:break-all;flex:1;min-width:240px}
pre.snippet{background:var(--sunk);padding:10px 12px;border-radius:8px;max-height:none}
.row{display:flex;gap:10px;flex-wrap:wrap;align-items:end}
p.or{display:flex;align-items:center;gap:10px;color:var(--muted);margin:14px 0}p.or::before,p.or::after{content:"";flex:1;border-top:1px solid var(--line)}
a.sso{display:block;text-align:center;text-decoration:none;padding:8px 14px;border-radius:8px;border:1px solid var(--brand);color:var(--brand);font-weight:600}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`

/** Copy buttons, confirmations and the pipeline page's refresh: behaviour the app's own pages opt into by attribute. */
const APP_SCRIPT = String.raw`(() => {
"use strict";
for (const button of document.querySelectorAll("button[data-copy]")) {
  button.addEventListener("click", async () => {
    const source = document.getElementById(button.dataset.copy);
    try { await navigator.clipboard.writeText(source.textContent); button.textContent = "Copied"; }
    catch { const range = document.createRange(); range.selectNodeContents(source); const sel = getSelection(); sel.removeAllRanges(); sel.addRange(range); button.textContent = "Selected: press Ctrl+C"; }
  });
}
for (const form of document.querySelectorAll("form[data-confirm]")) {
  form.addEventListener("submit", (event) => { if (!window.confirm(form.dataset.confirm)) event.preventDefault(); });
}
const live = document.querySelector("[data-live]");
if (live) {
  const status = document.getElementById("live-status");
  const refresh = async () => {
    try {
      const response = await fetch(live.dataset.live, { headers: { accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const figures = await response.json();
      for (const node of live.querySelectorAll("[data-figure]")) {
        const value = node.dataset.figure.split(".").reduce((v, k) => v === null || v === undefined ? v : v[k], figures);
        node.textContent = value === null || value === undefined ? "–" : typeof value === "number" ? value.toLocaleString("en-US", { maximumFractionDigits: 2 }) : String(value);
      }
      if (status) status.textContent = "Updated " + new Date(figures.at).toLocaleTimeString();
    } catch (error) { if (status) status.textContent = "Could not refresh: " + error.message; }
  };
  setInterval(refresh, Number(live.dataset.every || 2000));
}
})();
`

const asset = (body: string, contentType: string) => ({ body, contentType })

export const ASSETS: Record<string, { readonly body: string; readonly contentType: string }> = {
  "/app/app.css": asset(STYLES + APP_STYLES, "text/css; charset=utf-8"),
  "/app/views.js": asset(WEB_RUNTIME, "text/javascript; charset=utf-8"),
  "/app/app.js": asset(APP_SCRIPT, "text/javascript; charset=utf-8")
}

export const ASSET_VERSION = Crypto.createHash("sha256").update(Object.values(ASSETS).map((a) => a.body).join("\0")).digest("hex").slice(0, 12)

export const assetResponse = (path: string) => {
  const found = ASSETS[path]!
  return HttpServerResponse.text(found.body, {
    contentType: found.contentType,
    headers: { "cache-control": "public, max-age=31536000, immutable", "x-content-type-options": "nosniff" }
  })
}
