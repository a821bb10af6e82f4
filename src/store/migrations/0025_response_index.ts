import { run } from "./sql.ts"

/**
 * The index of answers' ids leaves chat completions out. The builder looks an answer's id up for two things: the call
 * a Responses API call continues (`previous_response_id`: only a Responses answer can be continued), and a transcript
 * turn the gateway recorded already (`ledger watch` reads Claude Code's Messages and Codex's Responses turns). Neither
 * ever asks for a `chatcmpl-…` id, yet every chat completion, the gateway's commonest call, was inserted into this
 * index at a random place: ~7.6 µs of PostgreSQL's CPU a decision on the benchmarks' machine (bench/notes/builder.md, "The
 * index of answers' ids without chat completions"). Both lookups say `api <> 'chat'` or imply it, so the planner
 * still takes the index.
 *
 * The index is built again on every partition as the migration runs, holding writes to `decisions` meanwhile (see
 * CHANGELOG.md).
 */
export const responseIndex = run([
  `DROP INDEX decisions_response`,
  `CREATE INDEX decisions_response ON decisions (tenant_id, workspace_id, response_id)
    WHERE response_id IS NOT NULL AND api <> 'chat'`
])
