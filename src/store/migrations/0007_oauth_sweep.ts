import { run } from "./sql.ts"

/** The OAuth sweeper deletes tokens and authorizations a day after they expired (OAuthStore.sweep); the control policy of 0004 covers DELETE. */
export const oauthSweep = run([`GRANT DELETE ON oauth_tokens, oauth_authorizations TO ledger_control`])
