import { run } from "./sql.ts"

/**
 * MCP OAuth 2.1 authorization server (src/oauth): registered clients, authorizations (sign-in ticket, then the
 * authorization code) and issued tokens. Control plane like `credentials`: only hashes of secrets are stored, and only
 * the control role reads them (tokens are resolved before any tenant is known).
 */
const OAUTH_TABLES = ["oauth_clients", "oauth_authorizations", "oauth_tokens"] as const

export const oauth = run([
  `CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY,
    -- sha256 of the client secret; NULL for public clients (token_endpoint_auth_method 'none')
    client_secret_hash bytea,
    token_endpoint_auth_method text NOT NULL CHECK (token_endpoint_auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    redirect_uris text[] NOT NULL,
    -- the registered client metadata (RFC 7591), as answered to the client
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE oauth_authorizations (
    authorization_id uuid PRIMARY KEY,
    client_id text NOT NULL REFERENCES oauth_clients,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    -- the client's state, echoed on the redirect
    state text,
    scope text NOT NULL,
    resource text NOT NULL,
    tenant_id uuid NOT NULL REFERENCES tenants,
    user_id uuid NOT NULL REFERENCES users,
    -- chosen on the consent page among the user's memberships
    workspace_id uuid REFERENCES workspaces,
    -- sha256 of the sign-in ticket that carries the signed-in user to the consent step
    ticket_hash bytea NOT NULL UNIQUE,
    -- sha256 of the authorization code, once consent is given
    code_hash bytea UNIQUE,
    -- expiry of the ticket, then of the code
    expires_at timestamptz NOT NULL,
    consented_at timestamptz,
    code_used_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE oauth_tokens (
    token_id uuid PRIMARY KEY,
    token_hash bytea NOT NULL UNIQUE,
    kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
    -- the grant: every token descending from one consent (refresh rotation family)
    authorization_id uuid NOT NULL REFERENCES oauth_authorizations,
    client_id text NOT NULL REFERENCES oauth_clients,
    tenant_id uuid NOT NULL REFERENCES tenants,
    workspace_id uuid NOT NULL REFERENCES workspaces,
    user_id uuid NOT NULL REFERENCES users,
    scope text NOT NULL,
    -- the resource (RFC 8707) the token is bound to: {public url}/mcp
    audience text NOT NULL,
    display_prefix text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    -- refresh tokens: when exchanged for a new pair; presenting it again revokes the whole grant
    rotated_at timestamptz,
    last_used_at timestamptz
  )`,
  `CREATE INDEX oauth_tokens_authorization ON oauth_tokens (authorization_id)`,
  ...OAUTH_TABLES.flatMap((table) => [
    `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
    `ALTER TABLE ${table} FORCE ROW LEVEL SECURITY`,
    `CREATE POLICY ${table}_control ON ${table} TO ledger_control USING (true) WITH CHECK (true)`,
    `GRANT SELECT, INSERT, UPDATE ON ${table} TO ledger_control`
  ])
])
