import { run } from "./sql.ts"

/** The app's sweeper deletes sign-in links a day after they expired or were used (AppSessions.sweep). */
export const appSweep = run([`GRANT DELETE ON app_signin_links TO ledger_control`])
