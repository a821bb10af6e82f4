/**
 * The authorization server's pages: sign-in (the user proves who they are with a Personal Access Token, or through
 * the OpenID Connect provider when one is configured), consent
 * (pick the workspace the client may read) and errors. Self-contained HTML — inline CSS and SVG, no script, no
 * external request — and every value escaped.
 */
import { BRAND_MARK } from "../ui/client.ts"

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
input[type=password]{width:100%;padding:10px 12px;border:1px solid var(--line);border-radius:9px;background:var(--bg);color:var(--text);font:14px ui-monospace,SFMono-Regular,Menlo,monospace}
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
<meta name="referrer" content="no-referrer">
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
  readonly redirectHost: string
  /** the authorization request, carried through the form */
  readonly request: Record<string, string | null | undefined>
  readonly error?: string | undefined
  /** the OpenID Connect provider's sign-in, when one is configured: its name and the link that starts it */
  readonly sso?: { readonly name: string; readonly href: string } | undefined
}

export const signInPage = (input: SignInPageInput): string =>
  page("Sign in", `
<h1>Sign in to connect ${escape(input.clientName)}</h1>
<p><strong>${escape(input.clientName)}</strong> wants to read your agents' decisions through MCP. It will be sent back to <strong>${escape(input.redirectHost)}</strong>.</p>
${input.error ? `<div class="error" role="alert">${escape(input.error)}</div>` : ""}
${input.sso ? `<a class="sso" href="${escape(input.sso.href)}">Continue with ${escape(input.sso.name)}</a>
<p class="or">or with a Personal Access Token</p>` : ""}
<form method="post" action="/oauth/authorize" autocomplete="off">
${hidden({ ...input.request, step: "signin" })}
<label for="pat">Personal Access Token</label>
<input id="pat" name="pat" type="password" required placeholder="ldg_pat_…" spellcheck="false"${input.sso ? "" : " autofocus"}>
<div class="actions"><button type="submit"${input.sso ? ' class="secondary"' : ""}>Continue</button></div>
</form>
<p class="fine">Create one with <code>ledger admin token create --kind pat</code> (embedded mode: see <code>credentials.json</code>). The token proves who you are; it is not shared with the client.</p>`)

export interface ConsentPageInput {
  readonly clientName: string
  readonly redirectHost: string
  readonly email: string
  readonly ticket: string
  readonly workspaces: ReadonlyArray<{ readonly workspace_id: string; readonly name: string; readonly role: string }>
  readonly preselected: string | undefined
}

export const consentPage = (input: ConsentPageInput): string =>
  page("Allow access", `
<h1>Allow ${escape(input.clientName)}?</h1>
<p>Signed in as <strong>${escape(input.email)}</strong>.</p>
<div class="scope">Read-only access to one workspace's ledger: agents, sessions and decisions — what you can see yourself.</div>
<form method="post" action="/oauth/authorize">
${hidden({ step: "consent", ticket: input.ticket })}
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
