/**
 * The authorization server's pages: sign-in (the user proves who they are with their account's email and password,
 * through the OpenID Connect provider when one is configured, or with a Personal Access Token), consent (pick the
 * workspace the client may read) and errors. Self-contained HTML — inline CSS and SVG, no script, no external
 * request — and every value escaped.
 */
import { BRAND_MARK } from "../views/client.ts"

const escape = (value: string): string =>
  value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const STYLE = `
:root{--bg:#f4f4fb;--panel:#fff;--text:#1c1b33;--muted:#5f5e7a;--line:#e3e3ef;--brand:#4f46e5;--bad:#dc2f45;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#12111f;--panel:#1b1a2e;--text:#ecebff;--muted:#b3b1d4;--line:#302f4a;--brand:#8b85ff;--bad:#fb7185}}
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:grid;place-items:center;background:var(--bg);color:var(--text);
font:15px/1.5 ui-sans-serif,system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;padding:24px}
main{width:100%;max-width:440px;background:var(--panel);border:1px solid var(--line);border-radius:14px;padding:28px 28px 24px;box-shadow:0 10px 30px rgba(30,27,75,.08)}
.brand{display:flex;align-items:center;gap:10px;margin-bottom:18px}.brand span{font-size:12px;letter-spacing:.08em;text-transform:uppercase;color:var(--brand);font-weight:700}
h1{font-size:21px;margin:0 0 6px}p{margin:0 0 14px;color:var(--muted)}strong{color:var(--text)}
label{display:block;font-weight:600;margin:14px 0 6px}
input[type=password],input[type=email]{width:100%;padding:10px 12px;border:1px solid var(--line);border-radius:9px;background:var(--bg);color:var(--text);font:14px inherit}
#pat{font:14px ui-monospace,SFMono-Regular,Menlo,monospace}
details{margin:18px 0 0;border-top:1px solid var(--line);padding-top:12px}summary{cursor:pointer;color:var(--muted);font-size:13.5px}
a{color:var(--brand)}.host{color:var(--muted);font-weight:400}
fieldset{border:1px solid var(--line);border-radius:10px;padding:6px 12px;margin:12px 0}legend{padding:0 6px;color:var(--muted);font-size:13px}
.choice{display:flex;gap:10px;align-items:center;padding:8px 0;font-weight:500;margin:0}.choice small{color:var(--muted);font-weight:400}
.actions{display:flex;gap:10px;margin-top:18px}.actions.consent{flex-direction:row-reverse}
button{flex:1;padding:10px 14px;border-radius:9px;border:1px solid var(--brand);background:var(--brand);color:#fff;font-family:inherit;font-size:14px;font-weight:600;cursor:pointer}
button.secondary{background:transparent;color:var(--text);border-color:var(--line)}
a.sso{display:block;text-align:center;text-decoration:none;padding:10px 14px;border-radius:9px;border:1px solid var(--brand);background:var(--brand);color:#fff;font-weight:600;font-size:14px;margin:18px 0 4px}
.or{display:flex;align-items:center;gap:10px;margin:18px 0 0;font-size:13px}.or::before,.or::after{content:"";flex:1;border-top:1px solid var(--line)}
.error{border:1px solid var(--bad);color:var(--bad);border-radius:9px;padding:8px 12px;margin:0 0 12px}
.scope{background:var(--bg);border-radius:9px;padding:10px 12px;margin:0 0 4px;color:var(--text)}
.fine{font-size:12.5px;color:var(--muted);margin:16px 0 0}code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}
`

const page = (title: string, body: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${escape(title)} · Agent Decision Ledger</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<div class="brand">${BRAND_MARK}<span>Agent Decision Ledger</span></div>
${body}
</main>
</body>
</html>
`

const hidden = (fields: Record<string, string | null | undefined>) =>
  Object.entries(fields)
    .filter((entry): entry is [string, string] => typeof entry[1] === "string")
    .map(([name, value]) => `<input type="hidden" name="${escape(name)}" value="${escape(value)}">`)
    .join("\n")

export interface SignInPageInput {
  readonly clientName: string
  /** the host of the client's metadata document, for a client known by one */
  readonly clientHost?: string | undefined
  readonly redirectHost: string
  /** the authorization request, carried through the forms */
  readonly request: Record<string, string | null | undefined>
  /** the forms' CSRF token */
  readonly csrf: string
  /** the email to fill in again */
  readonly email?: string | undefined
  readonly error?: string | undefined
  /** the form the error is about: the token's form is shown open */
  readonly failed?: "password" | "pat" | undefined
  /** the OpenID Connect provider's sign-in, when one is configured: its name and the link that starts it */
  readonly sso?: { readonly name: string; readonly href: string } | undefined
}

const clientLine = (name: string, host: string | undefined) =>
  `<strong>${escape(name)}</strong>${host === undefined ? "" : ` <span class="host">(${escape(host)})</span>`}`

export const signInPage = (input: SignInPageInput): string =>
  page("Sign in", `
<h1>Sign in to connect ${escape(input.clientName)}</h1>
<p>${clientLine(input.clientName, input.clientHost)} wants to read your agents' decisions through MCP. It will be sent back to <strong>${escape(input.redirectHost)}</strong>.</p>
${input.error ? `<div class="error" role="alert">${escape(input.error)}</div>` : ""}
<form method="post" action="/oauth/authorize">
${hidden({ ...input.request, step: "signin", csrf: input.csrf })}
<label for="email">Email</label>
<input id="email" name="email" type="email" required autocomplete="username" spellcheck="false" value="${escape(input.email ?? "")}"${input.failed === undefined ? " autofocus" : ""}>
<label for="password">Password</label>
<input id="password" name="password" type="password" required autocomplete="current-password"${input.failed === "password" ? " autofocus" : ""}>
<div class="actions"><button type="submit">Sign in</button></div>
</form>
${input.sso ? `<p class="or">or</p>
<a class="sso" href="${escape(input.sso.href)}">Continue with ${escape(input.sso.name)}</a>` : ""}
<details${input.failed === "pat" ? " open" : ""}><summary>Use a Personal Access Token instead</summary>
<form method="post" action="/oauth/authorize" autocomplete="off">
${hidden({ ...input.request, step: "signin", csrf: input.csrf })}
<label for="pat">Personal Access Token</label>
<input id="pat" name="pat" type="password" required placeholder="ldg_pat_…" spellcheck="false"${input.failed === "pat" ? " autofocus" : ""}>
<div class="actions"><button type="submit" class="secondary">Continue with the token</button></div>
</form>
<p class="fine">Create one with <code>ledger admin token create --kind pat</code> (embedded mode: see <code>credentials.json</code>). The token proves who you are; it is not shared with the client.</p>
</details>`)

export interface ConsentPageInput {
  readonly clientName: string
  /** the host of the client's metadata document, for a client known by one */
  readonly clientHost?: string | undefined
  readonly redirectHost: string
  readonly email: string
  readonly ticket: string
  /** the form's CSRF token */
  readonly csrf: string
  readonly workspaces: ReadonlyArray<{ readonly workspace_id: string; readonly name: string; readonly role: string }>
  readonly preselected: string | undefined
  /** signed in by the browser's session: where to sign in as someone else */
  readonly switchAccount?: string | undefined
}

export const consentPage = (input: ConsentPageInput): string =>
  page("Allow access", `
<h1>Allow ${escape(input.clientName)}?</h1>
<p>Signed in as <strong>${escape(input.email)}</strong>.${input.switchAccount === undefined ? "" : ` <a href="${escape(input.switchAccount)}">Not you? Use another account</a>`}</p>
${
    input.clientHost === undefined ? "" : `<p>${clientLine(input.clientName, input.clientHost)} describes itself in a document on <strong>${
      escape(input.clientHost)
    }</strong>: connect it only if you trust that site.</p>`
  }
<div class="scope">Read-only access to one workspace's ledger: agents, sessions and decisions — what you can see yourself.</div>
<form method="post" action="/oauth/authorize">
${hidden({ step: "consent", ticket: input.ticket, csrf: input.csrf })}
<fieldset><legend>Workspace</legend>
${
    input.workspaces.map((w, i) =>
      `<label class="choice"><input type="radio" name="workspace_id" value="${escape(w.workspace_id)}"${
        (input.preselected === undefined ? i === 0 : w.workspace_id === input.preselected) ? " checked" : ""
      } required> ${escape(w.name)}${w.role === "restricted" ? " <small>(your own decisions only)</small>" : ""}</label>`
    ).join("\n")
  }
</fieldset>
<div class="actions consent">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</div>
</form>
<p class="fine">You will be sent back to ${escape(input.redirectHost)}. Access ends when the token expires or is revoked, or when you leave the workspace.</p>`)

export const errorPage = (message: string): string =>
  page("Cannot continue", `
<h1>This sign-in link cannot be used</h1>
<div class="error" role="alert">${escape(message)}</div>
<p>Start the connection again from your MCP client.</p>`)
