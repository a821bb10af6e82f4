import { run } from "./sql.ts"

/**
 * Transcript turns (`ledger watch`): a decision made from a coding assistant's transcript names where it came from
 * (`{kind, client, client_version, cwd, git_branch}`; NULL for a call through the gateway), so `ledger rebuild` keeps it.
 */
export const transcriptSource = run([`ALTER TABLE decisions ADD COLUMN source jsonb`])
