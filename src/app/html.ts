/**
 * The app's HTML: escaping, the page frame (skip link, navigation, who is signed in, sign-out) and the response
 * every page goes out with — a Content-Security-Policy that allows only this origin's own script and styles, no
 * framing, no referrer, no caching of pages that may show secrets.
 */
import { HttpServerResponse } from "effect/http"
import { BRAND_MARK } from "../views/client.ts"
import { ASSET_VERSION } from "./assets.ts"

export const escape = (value: string): string =>
  value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

/** A template tag that escapes every interpolated value unless it is `raw(...)` HTML built by this module. */
export class Raw {
  readonly html: string
  constructor(html: string) {
    this.html = html
  }
}
export const raw = (html: string) => new Raw(html)

type Value = string | number | Raw | null | undefined | false | ReadonlyArray<Value>

const render = (value: Value): string =>
  value === null || value === undefined || value === false
    ? ""
    : value instanceof Raw
    ? value.html
    : Array.isArray(value)
    ? value.map(render).join("")
    : escape(String(value))

export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Value>): Raw =>
  raw(strings.reduce((out, part, i) => out + part + (i < values.length ? render(values[i]!) : ""), ""))

export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'"
].join("; ")

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  // not no-referrer: with it, browsers send `Origin: null` on form posts, and the origin check needs the origin
  "referrer-policy": "same-origin",
  "cache-control": "no-store"
}

export const pageResponse = (body: Raw, status = 200) =>
  HttpServerResponse.text(body.html, { status, contentType: "text/html; charset=utf-8", headers: SECURITY_HEADERS })

/** Who the frame shows as signed in, and the form token of the sign-out button. */
export interface FrameUser {
  readonly email: string
  readonly workspace: string
  readonly admin: boolean
  readonly operator: boolean
  readonly csrf: string
}

const NAV: ReadonlyArray<{ readonly href: string; readonly label: string; readonly admin?: boolean; readonly operator?: boolean }> = [
  { href: "/", label: "Agents" },
  { href: "/decisions", label: "Decisions" },
  { href: "/pulse", label: "Pulse" },
  { href: "/graph?mode=agent_network", label: "Graph" },
  { href: "/admin/api-keys", label: "API Keys" },
  { href: "/admin/members", label: "Members", admin: true },
  { href: "/admin/pipeline", label: "Pipeline", operator: true }
]

export interface PageInput {
  readonly title: string
  /** the nav entry to mark as current */
  readonly section?: string
  readonly user?: FrameUser
  readonly body: Raw
  /** scripts of this origin to load (the views' runtime, the app's own helpers) */
  readonly scripts?: ReadonlyArray<string>
}

export const page = (input: PageInput): Raw =>
  html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>${input.title} · Agent Decision Ledger</title>
<link rel="stylesheet" href="/app/app.css?v=${ASSET_VERSION}">
<link rel="icon" href="data:,">
</head>
<body>
<a class="skip" href="#content">Skip to content</a>
<header class="app">
<a class="home" href="/" aria-label="Agent Decision Ledger, home">${raw(BRAND_MARK)}</a>
<div class="titles"><div class="brand">Agent Decision Ledger${
    input.user ? html`<span> · <a href="/account/workspaces" title="Workspaces">${input.user.workspace}</a></span>` : ""
  }</div><h1 id="title">${input.title}</h1></div>
${
    input.user
      ? html`<form method="post" action="/signout" class="signout"><span class="who">${input.user.email}</span>
<input type="hidden" name="csrf" value="${input.user.csrf}"><button type="submit" class="back">Sign out</button></form>`
      : ""
  }
</header>
${
    input.user
      ? html`<nav class="site" aria-label="Main">${
        NAV.filter((item) => (!item.admin || input.user!.admin) && (!item.operator || input.user!.operator)).map((item) =>
          html`<a href="${item.href}"${raw(item.label === input.section ? ` aria-current="page"` : "")}>${item.label}</a>`
        )
      }</nav>`
      : ""
  }
<main id="content" tabindex="-1">
${input.body}
</main>
${(input.scripts ?? []).map((src) => html`<script src="${src}?v=${ASSET_VERSION}"></script>`)}
</body>
</html>
`

/** A form's hidden CSRF field. */
export const csrfField = (token: string) => html`<input type="hidden" name="csrf" value="${token}">`

/** A notice above a page's content (an error, or what just happened). */
export const notice = (text: string | undefined, tone: "bad" | "ok" = "bad") =>
  text === undefined ? "" : html`<div class="notice ${tone}" role="${tone === "bad" ? "alert" : "status"}">${text}</div>`
