/**
 * What a caller-chosen identifier (agent id and name, execution id) may be: the gateway refuses others, so the read
 * surfaces refuse them too — no such identifier exists, and NUL cannot even reach PostgreSQL.
 */

/** Longest `agent_id`, `agent_name` or `execution_id` accepted. */
export const MAX_ID_LENGTH = 256

/** ASCII control characters, NUL included. */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/
