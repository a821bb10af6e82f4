/**
 * Admin pages: API Keys (every member manages their own keys; an admin sees and revokes everyone's), Members
 * (invitations, roles, removal) and the Pipeline (the operator's figures, refreshed live from /admin/pipeline.json).
 */
import type { Invitation, Member } from "../../auth/Accounts.ts"
import type { KeyListing } from "../../auth/Credentials.ts"
import type { PipelineReport } from "../../ops/Status.ts"
import { csrfField, type FrameUser, html, notice, page, type Raw } from "../html.ts"
import { secretBlock } from "./account.ts"

const day = (date: Date | null) => (date === null ? "–" : date.toISOString().slice(0, 16).replace("T", " ") + "Z")

const KIND_LABEL = { pat: "Personal Access Token", gateway: "Gateway Key" } as const

export interface KeysPageInput {
  readonly user: FrameUser
  readonly keys: ReadonlyArray<KeyListing>
  readonly created?: { readonly kind: "pat" | "gateway"; readonly token: string } | undefined
  readonly message?: { readonly text: string; readonly tone: "ok" | "bad" } | undefined
  readonly now: Date
}

const keyStatus = (key: KeyListing, now: Date) =>
  key.revoked_at !== null
    ? html`<span class="badge bad">revoked ${day(key.revoked_at)}</span>`
    : key.expires_at !== null && key.expires_at <= now
    ? html`<span class="badge warn">expired</span>`
    : html`<span class="badge ok">active</span>`

export const keysPage = (input: KeysPageInput) =>
  page({
    title: "API Keys",
    section: "API Keys",
    user: input.user,
    scripts: ["/app/app.js"],
    body: html`${input.message ? notice(input.message.text, input.message.tone) : ""}
${
      input.created
        ? html`<section class="card" aria-labelledby="new-key">
<h2 id="new-key">New ${KIND_LABEL[input.created.kind]}</h2>
<div class="notice ok" role="status">Copy it now: it is shown only this once.</div>
${secretBlock("new-secret", KIND_LABEL[input.created.kind], input.created.token)}
</section>`
        : ""
    }
<section class="card" aria-labelledby="create-key">
<h2 id="create-key">Create a key</h2>
<form method="post" action="/admin/api-keys" class="row">
${csrfField(input.user.csrf)}
<label for="kind">Kind <select id="kind" name="kind"><option value="gateway">Gateway Key (agents → gateway)</option><option value="pat">Personal Access Token (REST, MCP)</option></select></label>
<label for="name">Name <input id="name" name="name" type="text" maxlength="100" placeholder="e.g. billing-agent"></label>
<label for="expires">Expires <input id="expires" name="expires" type="date"></label>
<button type="submit" class="primary">Create key</button>
</form>
</section>
<section class="card" aria-labelledby="keys">
<h2 id="keys">${input.user.admin ? "The workspace's keys" : "Your keys"}</h2>
<div class="tablewrap"><table>
<caption class="sr-only">API keys</caption>
<thead><tr><th scope="col">Prefix</th><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Owner</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Status</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>
${
      input.keys.length === 0
        ? html`<tr><td colspan="9" class="muted">No keys yet.</td></tr>`
        : input.keys.map((key) =>
          html`<tr data-token-id="${key.token_id}"><td class="mono">${key.display_prefix}…</td><td>${KIND_LABEL[key.kind]}</td><td>${key.name ?? "–"}</td>
<td>${key.owner_email}</td><td class="nowrap">${day(key.created_at)}</td><td class="nowrap">${day(key.last_used_at)}</td><td class="nowrap">${day(key.expires_at)}</td>
<td>${keyStatus(key, input.now)}</td>
<td>${
            key.revoked_at === null
              ? html`<form method="post" action="/admin/api-keys/revoke" class="inline" data-confirm="Revoke ${key.display_prefix}…? Agents using it stop working within seconds.">
${csrfField(input.user.csrf)}<input type="hidden" name="token_id" value="${key.token_id}">
<button type="submit" class="danger" aria-label="Revoke ${key.display_prefix}…">Revoke</button></form>`
              : ""
          }</td></tr>`
        )
    }
</tbody></table></div>
</section>`
  })

export interface MembersPageInput {
  readonly user: FrameUser & { readonly user_id: string }
  readonly members: ReadonlyArray<Member>
  readonly invitations: ReadonlyArray<Invitation>
  readonly invitationsOpen: boolean
  readonly invited?: { readonly email: string; readonly link: string } | undefined
  readonly message?: { readonly text: string; readonly tone: "ok" | "bad" } | undefined
}

const roleSelect = (member: Member, csrf: string) =>
  html`<form method="post" action="/admin/members/role" class="inline">
${csrfField(csrf)}<input type="hidden" name="user_id" value="${member.user_id}">
<label class="sr-only" for="role-${member.user_id}">Role of ${member.email}</label>
<select id="role-${member.user_id}" name="role">
<option value="member"${member.role === "member" ? " selected" : ""}>member</option>
<option value="restricted"${member.role === "restricted" ? " selected" : ""}>restricted</option>
</select><button type="submit" class="back">Set</button></form>`

export const membersPage = (input: MembersPageInput) =>
  page({
    title: "Members",
    section: "Members",
    user: input.user,
    scripts: ["/app/app.js"],
    body: html`${input.message ? notice(input.message.text, input.message.tone) : ""}
${
      input.invited
        ? html`<section class="card"><h2>Invitation for ${input.invited.email}</h2>
<div class="notice ok" role="status">Send this link to them; it is shown only this once and works for 7 days.</div>
${secretBlock("invitation-link", "Invitation link", input.invited.link)}</section>`
        : ""
    }
<section class="card" aria-labelledby="invite">
<h2 id="invite">Invite someone</h2>
${
      input.invitationsOpen
        ? html`<form method="post" action="/admin/members/invite" class="row">
${csrfField(input.user.csrf)}
<label for="invite-email">Email <input id="invite-email" name="email" type="email" required></label>
<label for="invite-role">Role <select id="invite-role" name="role"><option value="member">member: every decision of the workspace</option><option value="restricted">restricted: only decisions made with their own keys</option></select></label>
<button type="submit" class="primary">Create invitation</button>
</form>`
        : html`<p class="muted">Sign-up is closed on this server (LEDGER_SIGNUP=closed): add members with <code>ledger admin bootstrap</code>.</p>`
    }
</section>
<section class="card" aria-labelledby="members">
<h2 id="members">Members</h2>
<div class="tablewrap"><table><caption class="sr-only">Members</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Admin</th><th scope="col">Joined</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${
      input.members.map((member) =>
        html`<tr data-user-id="${member.user_id}"><td>${member.email}</td><td>${roleSelect(member, input.user.csrf)}</td><td>${member.admin ? "yes" : ""}</td><td>${day(member.joined_at)}</td>
<td>${
          member.user_id === input.user.user_id
            ? html`<span class="muted">you</span>`
            : html`<form method="post" action="/admin/members/remove" class="inline" data-confirm="Remove ${member.email}? Their keys and sessions stop working.">
${csrfField(input.user.csrf)}<input type="hidden" name="user_id" value="${member.user_id}"><button type="submit" class="danger" aria-label="Remove ${member.email}">Remove</button></form>`
        }</td></tr>`
      )
    }</tbody></table></div>
</section>
<section class="card" aria-labelledby="invitations">
<h2 id="invitations">Invitations</h2>
${
      input.invitations.length === 0
        ? html`<p class="muted">None yet.</p>`
        : html`<div class="tablewrap"><table><caption class="sr-only">Invitations</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Created</th><th scope="col">Status</th></tr></thead>
<tbody>${
          input.invitations.map((invitation) =>
            html`<tr><td>${invitation.email}</td><td>${invitation.role}</td><td>${day(invitation.created_at)}</td><td>${
              invitation.accepted_at !== null ? `accepted ${day(invitation.accepted_at)}` : invitation.expires_at <= new Date() ? "expired" : `open until ${day(invitation.expires_at)}`
            }</td></tr>`
          )
        }</tbody></table></div>`
    }
</section>`
  })

const figure = (label: string, path: string, value: number | string | null | undefined, hint?: string): Raw =>
  html`<div class="stat"${hint ? html` title="${hint}"` : ""}><div class="v" data-figure="${path}">${
    value === null || value === undefined ? "–" : typeof value === "number" ? value.toLocaleString("en-US", { maximumFractionDigits: 2 }) : value
  }</div><div class="l">${label}</div></div>`

export const pipelinePage = (user: FrameUser, report: PipelineReport) =>
  page({
    title: "Pipeline",
    section: "Pipeline",
    user,
    scripts: ["/app/app.js"],
    body: html`<section class="card" data-live="/admin/pipeline.json" data-every="2000" aria-labelledby="figures">
<h2 id="figures">Capture stream and builders</h2>
<div class="stats">
${figure("stream length", "stream.length", report.stream?.length)}
${figure("group lag", "stream.lag", report.stream?.lag, "captures not yet delivered to a builder")}
${figure("pending", "stream.pending", report.stream?.pending, "delivered, not yet committed")}
${figure("oldest pending (ms)", "stream.oldest_pending_ms", report.stream?.oldest_pending_ms)}
${figure("behind (ms)", "stream.oldest_waiting_ms", report.stream?.oldest_waiting_ms, "since the oldest capture not yet committed arrived")}
${figure("dead letters", "stream.dead_letters", report.stream?.dead_letters)}
${figure("spooled captures", "spool.entries", report.spool?.entries)}
${figure("spool bytes", "spool.bytes", report.spool?.bytes)}
${figure("decisions/s", "builders.decisions_per_second", report.builders?.decisions_per_second)}
${figure("build latency (ms, mean)", "build_latency_ms", report.build_latency_ms, "model call end → decision committed, since start")}
</div>
<p class="muted" aria-live="polite" id="live-status">Updated ${report.at.slice(11, 19)}Z</p>
${report.problems.length > 0 ? html`<ul>${report.problems.map((problem) => html`<li class="muted">${problem}</li>`)}</ul>` : ""}
</section>`
  })
