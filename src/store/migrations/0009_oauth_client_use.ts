import { run } from "./sql.ts"

/**
 * Registration is open (RFC 7591), so clients would pile up: the sweeper forgets a client never used a day after it
 * registered, and one idle for OAUTH_CLIENT_IDLE_DAYS once no grant of it is left (OAuthStore.sweep). Clients that
 * exist at this migration count as used now.
 */
export const oauthClientUse = run([
  `ALTER TABLE oauth_clients ADD COLUMN last_used_at timestamptz`,
  `UPDATE oauth_clients SET last_used_at = now()`,
  `GRANT DELETE ON oauth_clients TO ledger_control`,
  // the sweep's checks, and the foreign keys a client's deletion checks, look clients up in both
  `CREATE INDEX oauth_authorizations_client ON oauth_authorizations (client_id)`,
  `CREATE INDEX oauth_tokens_client ON oauth_tokens (client_id)`
])
