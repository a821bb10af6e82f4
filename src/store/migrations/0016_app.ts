import { run } from "./sql.ts"

/**
 * The app (docs/ARCHITECTURE.md, "Surfaces"): passwords, browser sessions, invitations and one-time sign-in links.
 *
 * - `users.password_hash`: scrypt, `scrypt$N$r$p$salt$hash` (auth/passwords.ts); null for a user who signs in by SSO
 *   or has not chosen one yet.
 * - `memberships.admin`: who may manage the workspace's keys and members (the person who signed up, the first run's
 *   bootstrapped user); `role` stays what row-level security reads (member or restricted).
 * - `app_sessions`: a signed-in browser, found by the sha256 of its cookie; the CSRF token of its forms is derived
 *   from the cookie (auth/AppSessions.ts), so nothing secret is stored in plain text.
 * - `app_invitations`: a link an admin sends; it makes the invitee a member with the role chosen when they accept.
 * - `app_signin_links`: one-time sign-in links (the first run prints one for the bootstrapped admin).
 * Everything is read and written by the control role only, like the other identity tables.
 */
const controlOnly = (table: string, grants: string) => [
  `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY ${table}_control ON ${table} TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT ${grants} ON ${table} TO ledger_control`
]

export const app = run([
  `ALTER TABLE users ADD COLUMN password_hash text`,
  `ALTER TABLE memberships ADD COLUMN admin boolean NOT NULL DEFAULT false`,
  // an admin removes members
  `GRANT DELETE ON memberships TO ledger_control`,
  `CREATE TABLE app_sessions (
    session_hash bytea PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
  )`,
  `CREATE INDEX app_sessions_user ON app_sessions (user_id)`,
  ...controlOnly("app_sessions", "SELECT, INSERT, UPDATE, DELETE"),
  `CREATE TABLE app_invitations (
    invitation_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('member', 'restricted')),
    token_hash bytea NOT NULL UNIQUE,
    invited_by uuid NOT NULL REFERENCES users,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    accepted_at timestamptz
  )`,
  `CREATE INDEX app_invitations_workspace ON app_invitations (workspace_id, created_at DESC)`,
  ...controlOnly("app_invitations", "SELECT, INSERT, UPDATE, DELETE"),
  `CREATE TABLE app_signin_links (
    token_hash bytea PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  )`,
  ...controlOnly("app_signin_links", "SELECT, INSERT, UPDATE")
])
