/**
 * Calls that continue another (a Responses API `previous_response_id`), linked to the decision they continue inside
 * its workspace's transaction — both ways: a new call to a stored or batched predecessor, and stored calls built before
 * their predecessor to the one just inserted.
 */
import { Effect } from "effect"
import type { LogicStep } from "../domain/decision.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { texts, uuids } from "../store/arrays.ts"
import { continueTrace } from "../derive/trace.ts"
import type { HeldReconstruction } from "./prepared.ts"
import { pgJson } from "../store/pgValues.ts"
import type { PlannedCall } from "./sessions.ts"

/** How a call continues another: the decision it links to, and the session it joins (the same agent's only). */
interface Link {
  readonly previous: string
  readonly follows: PlannedCall["follows"]
}

/**
 * Joins the calls that continue another (`previous_response_id`) to the decision they continue, found by the
 * provider's id of its answer in the batch or among the stored decisions: the call links to it, joins its session
 * when it is the same agent's and names no execution of its own, and its trace opens with the turns it continues.
 * A predecessor not built yet leaves the call unlinked (sessions by execution or gap, its own turns only).
 */
export const linkChains = Effect.fnUntraced(function*(items: ReadonlyArray<HeldReconstruction>) {
  const links = new Map<string, Link>()
  // only Responses API calls continue another, and only a Responses API answer can be continued (`whole` is theirs)
  const continued = items.filter((item) => item.continues !== null && item.whole !== undefined)
  if (continued.length === 0) return { items, links }
  const byResponse = new Map(items.flatMap((item) =>
    item.responseId === null || item.whole === undefined ? [] : [[item.responseId, item] as const]
  ))
  const missing = [...new Set(continued.flatMap((item) => (byResponse.has(item.continues!) ? [] : [item.continues!])))]
  const sql = yield* ScopedSql
  const stored = missing.length === 0 ? [] : yield* sql<{
    response_id: string
    ledger_id: string
    session_id: string
    agent_id: string
    trace: ReadonlyArray<LogicStep> | null
  }>`
    SELECT q.id AS response_id, x.ledger_id, x.session_id, x.agent_id, x.trace FROM unnest(${texts(missing)}) AS q(id)
    CROSS JOIN LATERAL (SELECT d.ledger_id, d.session_id, d.agent_id, d.derivation->'logic_trace' AS trace
      FROM decisions d WHERE d.response_id = q.id AND d.api = 'responses' ORDER BY d.created_at DESC LIMIT 1) x`
  const storedBy = new Map(stored.map((row) => [row.response_id, row]))
  // in time order, so a predecessor in the batch has its own earlier turns joined before its successor reads them
  const joined = new Map<string, HeldReconstruction>()
  for (const item of [...items].sort((a, b) => a.capture.started_at - b.capture.started_at)) {
    const { continues, whole } = item
    const inBatch = continues === null ? undefined : byResponse.get(continues)
    const fromBatch = inBatch === undefined || inBatch === item ? undefined : joined.get(inBatch.capture.ledger_id) ?? inBatch
    const fromStore = continues === null ? undefined : storedBy.get(continues)
    const predecessor = fromBatch?.whole !== undefined
      ? { ledger_id: fromBatch.capture.ledger_id, agent_id: fromBatch.capture.agent_id, trace: fromBatch.whole.logic_trace, follows: { ledger_id: fromBatch.capture.ledger_id } }
      : fromStore !== undefined
      ? { ledger_id: fromStore.ledger_id, agent_id: fromStore.agent_id, trace: fromStore.trace ?? [], follows: { session_id: fromStore.session_id } }
      : undefined
    if (predecessor === undefined || whole === undefined) {
      joined.set(item.capture.ledger_id, item)
      continue
    }
    const sameAgent = predecessor.agent_id === item.capture.agent_id && item.capture.execution_id === null
    links.set(item.capture.ledger_id, { previous: predecessor.ledger_id, follows: sameAgent ? predecessor.follows : undefined })
    joined.set(
      item.capture.ledger_id,
      item.joined ? item : { ...item, whole: { ...whole, logic_trace: continueTrace(predecessor.trace, whole.logic_trace) } }
    )
  }
  return { items: items.map((item) => joined.get(item.capture.ledger_id)!), links }
})

/**
 * Links the stored calls that continue the ones just inserted and were built before them (a successor's capture can
 * reach another builder first): they get their predecessor, and those whose request did not carry the turns they
 * continue open their trace with it. Their sessions need no change: a chain's calls follow each other closely, and a
 * predecessor built later joins its successor's session by the inactivity gap, or the execution they share.
 */
export const linkSuccessors = Effect.fnUntraced(function*(inserted: ReadonlyArray<HeldReconstruction>) {
  // only a Responses API answer can be continued (`previous_response_id`): chat and Messages batches skip the probe
  const predecessors = new Map(inserted.flatMap(({ capture, responseId, whole }) =>
    responseId === null || whole === undefined ? [] : [[responseId, { capture, trace: whole.logic_trace }] as const]
  ))
  if (predecessors.size === 0) return
  const sql = yield* ScopedSql
  const waiting = yield* sql<{ ledger_id: string; response_id: string; joined: boolean; trace: ReadonlyArray<LogicStep> | null }>`
    SELECT w.ledger_id, q.id AS response_id, w.joined, w.trace FROM unnest(${texts([...predecessors.keys()])}) AS q(id)
    CROSS JOIN LATERAL (SELECT d.ledger_id, d.raw_context IS NOT NULL AS joined, d.derivation->'logic_trace' AS trace
      FROM decisions d WHERE d.previous_response_id = q.id AND d.previous_ledger_id IS NULL AND d.erasure_id IS NULL LIMIT 100) w`
  if (waiting.length === 0) return
  const links = waiting.map((row) => {
    const predecessor = predecessors.get(row.response_id)!
    return {
      ledger_id: row.ledger_id,
      previous: predecessor.capture.ledger_id,
      trace: row.joined ? null : pgJson(continueTrace(predecessor.trace, row.trace ?? []))
    }
  })
  // built_at moves, so consumers following it (analytics) see the decision changed
  yield* sql`
    UPDATE decisions d SET previous_ledger_id = v.previous,
      derivation = CASE WHEN v.trace IS NULL THEN d.derivation ELSE jsonb_set(d.derivation::jsonb, '{logic_trace}', v.trace::jsonb)::json END,
      built_at = clock_timestamp()
    FROM UNNEST(${uuids(links.map((link) => link.ledger_id))}, ${uuids(links.map((link) => link.previous))},
      ${texts(links.map((link) => link.trace))}) AS v(ledger_id, previous, trace)
    WHERE d.ledger_id = v.ledger_id`
})
