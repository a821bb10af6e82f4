/**
 * The authorization server's pages as a browser without script uses them, over real HTTP: one cookie jar, forms
 * posted with this origin's Origin header, redirects not followed (each hop is checked). For flows the tests drive
 * by forms; the Chromium tests drive the same pages in a real browser.
 *
 *   const browser = oauthBrowser(stack.baseUrl)
 *   const page = await browser.authorize({ client_id, redirect_uri, code_challenge })
 *   const consent = await browser.signInWithPassword(page, "ann@acme.test", "…")
 *   const code = await browser.allow(consent, workspaceId)
 */
import { pkcePair, postForm, registerOAuthClient } from "./mcp-client.ts"

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly location: string | null
  readonly text: string
}

/** The request an MCP client sends the user to /oauth/authorize with (PKCE S256, state s-1, this server's resource). */
export const authorizationQuery = (baseUrl: string, input: { readonly clientId: string; readonly redirect: string; readonly challenge?: string }) => ({
  response_type: "code",
  client_id: input.clientId,
  redirect_uri: input.redirect,
  code_challenge: input.challenge ?? pkcePair().challenge,
  code_challenge_method: "S256",
  state: "s-1",
  scope: "ledger:read",
  resource: `${baseUrl}/mcp`
})

/** The hidden fields of the page's form that holds `field` (the password form, the token form, the consent form). */
export const formFields = (html: string, field: string): Record<string, string> => {
  const form = [...html.matchAll(/<form[^>]*>([\s\S]*?)<\/form>/g)].map((m) => m[1]!).find((body) => body.includes(`name="${field}"`))
  if (form === undefined) throw new Error(`no form with ${field} on the page:\n${html}`)
  const unescape = (value: string) =>
    value.replace(/&(amp|lt|gt|quot|#39);/g, (_, e) => ({ amp: "&", lt: "<", gt: ">", quot: "\"", "#39": "'" })[e as string]!)
  return Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, unescape(m[2]!)]))
}

export const ticketOf = (html: string) => /name="ticket" value="([^"]+)"/.exec(html)?.[1]

export const oauthBrowser = (baseUrl: string) => {
  const jar = new Map<string, string>()

  const request = async (path: string, init: { readonly form?: Record<string, string>; readonly headers?: Record<string, string> } = {}): Promise<Reply> => {
    const headers = new Headers(init.headers)
    if (jar.size > 0) headers.set("cookie", [...jar].map(([name, value]) => `${name}=${value}`).join("; "))
    if (init.form !== undefined) {
      headers.set("content-type", "application/x-www-form-urlencoded")
      if (!headers.has("origin")) headers.set("origin", baseUrl)
    }
    const response = await fetch(path.startsWith("http") ? path : `${baseUrl}${path}`, {
      method: init.form === undefined ? "GET" : "POST",
      headers,
      body: init.form === undefined ? null : new URLSearchParams(init.form).toString(),
      redirect: "manual"
    })
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(";")
      const at = pair!.indexOf("=")
      jar.set(pair!.slice(0, at), pair!.slice(at + 1))
    }
    return { status: response.status, headers: response.headers, location: response.headers.get("location"), text: await response.text() }
  }

  /** GET /oauth/authorize for a request: the sign-in page, the consent page (signed in) or an error. */
  const authorize = (query: Record<string, string>) => request(`/oauth/authorize?${new URLSearchParams(query)}`)

  /** Posts the sign-in page's email and password form (its hidden fields as the page gave them). */
  const signInWithPassword = (page: Reply, email: string, password: string, headers: Record<string, string> = {}) =>
    request("/oauth/authorize", { form: { ...formFields(page.text, "password"), email, password }, headers })

  /** Posts the sign-in page's Personal Access Token form. */
  const signInWithToken = (page: Reply, pat: string) => request("/oauth/authorize", { form: { ...formFields(page.text, "pat"), pat } })

  /** Answers the consent page (its hidden fields, the ticket and the CSRF token, as the page gave them). */
  const answer = (consent: Reply, fields: Record<string, string>) => {
    if (ticketOf(consent.text) === undefined) throw new Error(`not a consent page (${consent.status}):\n${consent.text}`)
    return request("/oauth/authorize", { form: { ...formFields(consent.text, "ticket"), ...fields } })
  }

  /** Allows the consent page's request for a workspace: the code the client is sent back with. */
  const allow = async (consent: Reply, workspaceId: string) => {
    const allowed = await answer(consent, { decision: "allow", workspace_id: workspaceId })
    if (allowed.status !== 302) throw new Error(`consent answered ${allowed.status}: ${allowed.text}`)
    return new URL(allowed.location!)
  }

  return { jar, request, authorize, signInWithPassword, signInWithToken, answer, allow }
}

/** The sign-in (PAT) and consent forms, as a browser posts them; returns the redirect with the code. */
export const authorizeWithForms = async (baseUrl: string, input: {
  readonly clientId: string
  readonly redirect: string
  readonly challenge: string
  readonly pat: string
  readonly workspaceId: string
  readonly state?: string
}): Promise<URL> => {
  const browser = oauthBrowser(baseUrl)
  const page = await browser.authorize({
    ...authorizationQuery(baseUrl, { clientId: input.clientId, redirect: input.redirect, challenge: input.challenge }),
    state: input.state ?? "state-1"
  })
  const consent = await browser.signInWithToken(page, input.pat)
  if (consent.status !== 200) throw new Error(`sign-in answered ${consent.status}: ${consent.text}`)
  return browser.allow(consent, input.workspaceId)
}

/** A whole grant without a browser: register, authorize by forms, exchange the code. */
export const grantByForms = async (baseUrl: string, input: { readonly pat: string; readonly workspaceId: string; readonly redirect: string }) => {
  const client = (await registerOAuthClient(baseUrl, input.redirect)).body
  const { verifier, challenge } = pkcePair()
  const redirected = await authorizeWithForms(baseUrl, { clientId: client.client_id, redirect: input.redirect, challenge, pat: input.pat, workspaceId: input.workspaceId })
  const code = redirected.searchParams.get("code")!
  const tokens = await postForm(`${baseUrl}/oauth/token`, {
    grant_type: "authorization_code",
    client_id: client.client_id,
    code,
    code_verifier: verifier,
    redirect_uri: input.redirect,
    resource: `${baseUrl}/mcp`
  })
  if (tokens.status !== 200) throw new Error(`token endpoint answered ${tokens.status}: ${tokens.text}`)
  return { client, code, verifier, redirected, tokens: tokens.json as { access_token: string; refresh_token: string; expires_in: number; scope: string } }
}
