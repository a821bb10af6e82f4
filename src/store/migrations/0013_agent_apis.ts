import { run } from "./sql.ts"

/**
 * The agents' own APIs (Responses, Messages, embeddings). A decision names the API it was made on (its raw request
 * and response are in that format), the provider's id of its answer (`resp_…`, `msg_…`, `chatcmpl-…`), the
 * `previous_response_id` it continues and the decision that is (found by that id when both are built, whichever
 * first). Existing decisions are chat completions. The indexes are built as the migration runs, holding writes to
 * `decisions` meanwhile (see CHANGELOG.md).
 */
export const agentApis = run([
  `ALTER TABLE decisions ADD COLUMN api text NOT NULL DEFAULT 'chat'`,
  `ALTER TABLE decisions ADD COLUMN response_id text`,
  `ALTER TABLE decisions ADD COLUMN previous_response_id text`,
  `ALTER TABLE decisions ADD COLUMN previous_ledger_id uuid`,
  // the earlier turns of a chain the gateway kept itself, as it joined them to the call (Capture.context)
  `ALTER TABLE decisions ADD COLUMN raw_context text`,
  `CREATE INDEX decisions_response ON decisions (tenant_id, workspace_id, response_id) WHERE response_id IS NOT NULL`,
  // calls built before the call they continue, waiting to be linked to it
  `CREATE INDEX decisions_unlinked ON decisions (tenant_id, workspace_id, previous_response_id)
    WHERE previous_response_id IS NOT NULL AND previous_ledger_id IS NULL`
])
