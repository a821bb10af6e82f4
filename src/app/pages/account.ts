/**
 * The signed-out pages: sign-in, sign-up, an invitation to accept, and the page that shows a new account's keys
 * once, with setup for the OpenAI SDK, Claude Code and Codex.
 */
import type { WorkspaceMembership } from "../../auth/Accounts.ts"
import type { SignupPolicy } from "../../config/LedgerConfig.ts"
import { csrfField, html, notice, page, type FrameUser } from "../html.ts"

export interface FormState {
  readonly values?: Readonly<Record<string, string>>
  readonly problem?: { readonly field: string; readonly message: string }
  readonly notice?: string
}

const fieldError = (state: FormState, field: string) =>
  state.problem?.field === field ? html`<span class="field-error" id="${field}-error">${state.problem.message}</span>` : ""

const described = (state: FormState, field: string) => state.problem?.field === field ? `${field}-error` : undefined

const input = (state: FormState, field: string, label: string, type: string, autocomplete: string, hint?: string) =>
  html`<label for="${field}">${label}${hint ? html` <span class="hint">${hint}</span>` : ""}
<input id="${field}" name="${field}" type="${type}" autocomplete="${autocomplete}" required${
    type === "password" ? "" : html` value="${state.values?.[field] ?? ""}"`
  }${described(state, field) ? html` aria-invalid="true" aria-describedby="${described(state, field)!}"` : ""}>
${fieldError(state, field)}</label>`

export const signInPage = (
  csrf: string,
  state: FormState,
  options: { readonly signup: SignupPolicy; readonly next?: string | undefined; readonly sso?: string | undefined }
) =>
  page({
    title: "Sign in",
    body: html`<div class="narrow"><section class="card">
${notice(state.notice)}
<form method="post" action="/signin" class="stack">
${csrfField(csrf)}
${options.next ? html`<input type="hidden" name="next" value="${options.next}">` : ""}
${input(state, "email", "Email", "email", "username")}
${input(state, "password", "Password", "password", "current-password")}
<button type="submit" class="primary">Sign in</button>
</form>
${
      options.sso
        ? html`<p class="or">or</p><a class="sso" href="/oauth/oidc/start?app=1&amp;next=${encodeURIComponent(options.next ?? "/")}">Continue with ${options.sso}</a>`
        : ""
    }
${options.signup === "open" ? html`<p class="muted">New here? <a href="/signup">Create an organisation</a>.</p>` : ""}
</section></div>`
  })

export const signUpPage = (csrf: string, state: FormState) =>
  page({
    title: "Create your organisation",
    body: html`<div class="narrow"><section class="card">
${notice(state.notice)}
<form method="post" action="/signup" class="stack">
${csrfField(csrf)}
${input(state, "organisation", "Organisation", "text", "organization", "(your tenant; its data is kept apart from every other)")}
${input(state, "workspace", "First workspace", "text", "off", "(e.g. production)")}
${input(state, "email", "Email", "email", "email")}
${input(state, "password", "Password", "password", "new-password", "(at least 10 characters)")}
<button type="submit" class="primary">Create organisation</button>
</form>
<p class="muted">Already have an account? <a href="/signin">Sign in</a>.</p>
</section></div>`
  })

export const invitationPage = (csrf: string, token: string, invitation: { readonly email: string; readonly workspace_name: string; readonly tenant_name: string; readonly role: string }, state: FormState) =>
  page({
    title: "Join a workspace",
    body: html`<div class="narrow"><section class="card">
${notice(state.notice)}
<p>You are invited to the workspace <strong>${invitation.workspace_name}</strong> of <strong>${invitation.tenant_name}</strong>
as a ${invitation.role === "restricted" ? "restricted member (you see the decisions made with your own keys)" : "member"}.</p>
<form method="post" action="/signup" class="stack">
${csrfField(csrf)}
<input type="hidden" name="invitation" value="${token}">
<label for="email">Email<input id="email" type="email" value="${invitation.email}" autocomplete="username" readonly></label>
${input(state, "password", "Choose a password", "password", "new-password", "(at least 10 characters; if you already have one in this organisation, it stays)")}
<button type="submit" class="primary">Join</button>
</form>
</section></div>`
  })

export const signupClosedPage = (policy: SignupPolicy) =>
  page({
    title: "Sign-up",
    body: html`<div class="narrow"><section class="card">
<p>${policy === "invite" ? "Sign-up is by invitation: ask an administrator of your workspace for an invitation link." : "Sign-up is closed on this server. An operator adds accounts with ledger admin."}</p>
<p><a href="/signin">Sign in</a></p>
</section></div>`
  })

/** A secret shown once, with a copy button. */
export const secretBlock = (id: string, label: string, secret: string) =>
  html`<div class="stack"><div class="k">${label}</div><div class="secret"><code id="${id}">${secret}</code>
<button type="button" class="back" data-copy="${id}">Copy</button></div></div>`

export interface Setup {
  readonly gatewayUrl: string
  readonly apiUrl: string
}

/** Copy-ready setup for the three clients people point at the gateway. */
export const setupSnippets = (setup: Setup, gatewayKey: string) => {
  const v1 = `${setup.gatewayUrl}/v1`
  return html`<h2>OpenAI SDK</h2>
<pre class="snippet" id="setup-openai">import OpenAI from "openai"

const client = new OpenAI({
  baseURL: "${v1}",
  apiKey: "${gatewayKey}",
  defaultHeaders: { "x-service-provider-api-key": process.env.OPENAI_API_KEY, "x-ledger-agent-id": "my-agent" }
})</pre>
<button type="button" class="back" data-copy="setup-openai">Copy</button>
<h2>Claude Code</h2>
<pre class="snippet" id="setup-claude">export ANTHROPIC_BASE_URL=${setup.gatewayUrl}
export ANTHROPIC_AUTH_TOKEN=${gatewayKey}
export ANTHROPIC_CUSTOM_HEADERS=$'x-service-provider-api-key: sk-ant-…'
claude</pre>
<button type="button" class="back" data-copy="setup-claude">Copy</button>
<h2>Codex</h2>
<pre class="snippet" id="setup-codex"># ~/.codex/config.toml — then: export LEDGER_GATEWAY_KEY=${gatewayKey}
model_provider = "ledger"

[model_providers.ledger]
name = "Agent Decision Ledger"
base_url = "${v1}"
env_key = "LEDGER_GATEWAY_KEY"
wire_api = "responses"
env_http_headers = { "x-service-provider-api-key" = "OPENAI_API_KEY" }</pre>
<button type="button" class="back" data-copy="setup-codex">Copy</button>
<p class="muted">Subscription users without a provider key: run <code>npx ledger watch</code> with
<code>LEDGER_GATEWAY_URL=${setup.gatewayUrl}</code> and <code>LEDGER_GATEWAY_KEY</code> to record Claude Code and Codex from their transcripts.</p>`
}

/** After sign-up or joining: the new keys, shown this once. */
export const provisionedPage = (user: FrameUser, setup: Setup, keys: { readonly gateway_key: string; readonly pat: string | null }) =>
  page({
    title: "Your keys",
    user,
    scripts: ["/app/app.js"],
    body: html`<section class="card">
<div class="notice ok" role="status">Copy these now: they are shown only this once. Only their hashes are stored; if you lose one, create a new key under API Keys.</div>
${secretBlock("gateway-key", "Gateway Key (for your agents, at the gateway)", keys.gateway_key)}
${keys.pat === null ? "" : secretBlock("pat", `Personal Access Token (REST ${setup.apiUrl}/v1 and MCP ${setup.apiUrl}/mcp)`, keys.pat)}
</section>
<section class="card">${setupSnippets(setup, keys.gateway_key)}</section>
<p><a href="/">Go to the ledger →</a></p>`
  })

/** `current`: whether the form asks for the current password (see the password routes). */
export const passwordPage = (user: FrameUser, state: FormState, current: boolean) =>
  page({
    title: "Your password",
    user,
    body: html`<div class="narrow"><section class="card">
${notice(state.notice, state.problem === undefined ? "ok" : "bad")}
<p>Set the password you sign in with from now on; this signs out your other sessions.</p>
<form method="post" action="/account/password" class="stack">
${csrfField(user.csrf)}
${current ? input(state, "current_password", "Current password", "password", "current-password") : ""}
${input(state, "password", "New password", "password", "new-password", "(at least 10 characters)")}
<button type="submit" class="primary">Set password</button>
</form>
</section></div>`
  })

/** The workspaces the user belongs to in their organisation: switch between them; an administrator creates more. */
export const workspacesPage = (user: FrameUser, current: string, workspaces: ReadonlyArray<WorkspaceMembership>, state: FormState) =>
  page({
    title: "Workspaces",
    user,
    body: html`<section class="card" aria-labelledby="yours">
${notice(state.notice)}
<h2 id="yours">Your workspaces</h2>
<div class="tablewrap"><table><caption class="sr-only">Your workspaces</caption>
<thead><tr><th scope="col">Workspace</th><th scope="col">Role</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${
      workspaces.map((workspace) =>
        html`<tr><td>${workspace.name}</td><td>${workspace.role}${workspace.admin ? ", administrator" : ""}</td><td>${
          workspace.workspace_id === current
            ? html`<span class="muted">current</span>`
            : html`<form method="post" action="/account/workspaces/switch" class="inline">${csrfField(user.csrf)}
<input type="hidden" name="workspace_id" value="${workspace.workspace_id}"><button type="submit" class="back" aria-label="Switch to ${workspace.name}">Switch</button></form>`
        }</td></tr>`
      )
    }</tbody></table></div>
</section>
${
      user.admin
        ? html`<section class="card" aria-labelledby="create-workspace"><h2 id="create-workspace">Create a workspace</h2>
<form method="post" action="/account/workspaces" class="row">${csrfField(user.csrf)}
${input(state, "workspace", "Name", "text", "off")}
<button type="submit" class="primary">Create workspace</button></form>
<p class="muted">Its data is kept apart from your other workspaces; you administer it and invite its members.</p></section>`
        : ""
    }`
  })
