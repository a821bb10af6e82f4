/**
 * What a caller-chosen identifier (agent id and name, execution id) may be: the gateway refuses others, so the read
 * surfaces refuse them too — no such identifier exists, and NUL cannot even reach PostgreSQL.
 */
import { Schema } from "effect"

/** Longest `agent_id`, `agent_name` or `execution_id` accepted. */
export const MAX_ID_LENGTH = 256

/** ASCII control characters, NUL included. */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

/** No ASCII control characters: identifiers the gateway accepts never have them. */
const withoutControlCharacters = Schema.makeFilter((value: string) => !CONTROL_CHARACTERS.test(value), {
  expected: "text without control characters",
  toJsonSchema: () => ({ pattern: "^[^\\u0000-\\u001f\\u007f]*$" })
})

/** An identifier a caller chooses (agent, execution, model): 1 to MAX_ID_LENGTH characters, none a control character. */
export const CallerIdentifier = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_ID_LENGTH), withoutControlCharacters)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A uuid as the ledger's own ids are written (any case): text that is not one names nothing the ledger stores. */
export const isUuid = (text: string): boolean => UUID.test(text)
