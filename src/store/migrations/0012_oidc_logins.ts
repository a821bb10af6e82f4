import { run } from "./sql.ts"

/**
 * Sign-in through an external OpenID Connect provider (LEDGER_OIDC_*). Between sending the user to the provider and
 * its callback, a login holds what finishing it needs: the PKCE verifier and nonce for the provider, and the MCP
 * client's authorization request, already checked. It is found by the hash of the state, used once, within ten
 * minutes, and only from the browser that started it (the hash of a cookie set then).
 *
 * An account at the provider (issuer, subject) is linked to the ledger user its verified email named at its first
 * sign-in; later sign-ins follow the link, and a user linked to one account of a provider cannot be taken over by
 * another account that comes to carry the same email.
 */
export const oidcLogins = run([
  `CREATE TABLE oauth_oidc_logins (
    state_hash bytea PRIMARY KEY,
    browser_hash bytea NOT NULL,
    nonce text NOT NULL,
    code_verifier text NOT NULL,
    request jsonb NOT NULL,
    expires_at timestamptz NOT NULL
  )`,
  `ALTER TABLE oauth_oidc_logins ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE oauth_oidc_logins FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY oauth_oidc_logins_control ON oauth_oidc_logins TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT SELECT, INSERT, DELETE ON oauth_oidc_logins TO ledger_control`,
  `CREATE TABLE oidc_identities (
    issuer text NOT NULL,
    subject text NOT NULL,
    tenant_id uuid NOT NULL REFERENCES tenants,
    user_id uuid NOT NULL REFERENCES users,
    linked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject),
    UNIQUE (user_id, issuer)
  )`,
  `ALTER TABLE oidc_identities ENABLE ROW LEVEL SECURITY`,
  `ALTER TABLE oidc_identities FORCE ROW LEVEL SECURITY`,
  `CREATE POLICY oidc_identities_control ON oidc_identities TO ledger_control USING (true) WITH CHECK (true)`,
  `GRANT SELECT, INSERT ON oidc_identities TO ledger_control`,
  // the provider's verified email names the user, in whichever tenant it is (OAuthStore.usersByEmail)
  `CREATE INDEX users_email ON users (lower(email))`
])
