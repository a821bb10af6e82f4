import { run } from "./sql.ts"

/** The loop detector reads a session's repeats of one call signature (Detectors.sessionRules), not the whole session. */
export const loopIndex = run([`CREATE INDEX decision_search_session_signature ON decision_search (session_id, call_signature, created_at)`])
