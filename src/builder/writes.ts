/**
 * The builder's writes (docs/ARCHITECTURE.md, "The promises": no duplicate, tenants isolated): decisions, sessions
 * and rollups for one workspace's share of a batch, inside one `TenantSql.write` transaction as the builder role.
 *
 * - Every agent of the share is locked first (`pg_advisory_xact_lock`, in ascending key order, so builders never
 *   deadlock): session assignment reads, plans and writes an agent's sessions with nothing else changing them.
 * - Then the ledger ids already stored are probed under those locks (a capture's ledger id belongs to one agent, so
 *   no other builder can insert it meanwhile) and only the new calls go on — a redelivered capture inserts nothing
 *   and so changes nothing. One statement per table for the whole share, its rows `zipped` from parallel arrays:
 *   sessions and agents, then the decisions, last, because they take the workspace's chain (chaining.ts) whose lock
 *   serialises every builder writing to the workspace until commit.
 * - A batch spanning several workspaces commits each in a transaction of its own (`byWorkspace`), so builders whose
 *   batches share workspaces write different ones at the same time instead of waiting for each other's whole batch
 *   (bench/notes/ingest.md, "One transaction per workspace").
 */
import { Clock, Effect, Metric } from "effect"
import type { SqlError } from "effect/sql"
import * as Crypto from "node:crypto"
import { captureApi } from "../domain/capture.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import type { SessionRollup } from "../domain/sessionSummary.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { bools, byteas, floats, ints, texts, times, uuids, zipped } from "../store/arrays.ts"
import { type AgentDelta, agentLockKey, agentsUpsert, lockAgents, noAgentDelta } from "../store/agentRollups.ts"
import { type ChainLink, chainLinks } from "./chaining.ts"
import { type ChainHead, headUpdate, lockChain } from "../chain/heads.ts"
import { linkChains, linkSuccessors } from "./continuations.ts"
import { lockWait } from "./metrics.ts"
import { derivationJson, type HeldReconstruction, type Prepared, type StorableDecision } from "./prepared.ts"
import { callFacts } from "./reconstruct.ts"
import { pgJson, pgText } from "../store/pgValues.ts"
import { addToRollup, callEnd, foldRollups, loadSessions, writeSessions } from "./sessionRows.ts"
import { planSessions } from "./sessions.ts"

export interface StoredBatch {
  /** ledger ids inserted by this batch (the rest already existed) */
  readonly inserted: ReadonlySet<string>
}

const groupKey = (scope: WorkspaceScope) => `${scope.tenant_id}/${scope.workspace_id}`

/**
 * A batch's items by workspace, in ascending workspace order: each workspace's share is stored in a transaction of its
 * own. Builders take shares in the same order, so two whose batches hold the same workspaces settle into writing
 * different ones rather than queueing for one.
 */
export const byWorkspace = <A>(items: ReadonlyArray<A>, scopeOf: (item: A) => WorkspaceScope) => {
  const groups = new Map<string, { scope: WorkspaceScope; items: Array<A> }>()
  for (const item of items) {
    const scope = scopeOf(item)
    const key = groupKey(scope)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, { scope: { tenant_id: scope.tenant_id, workspace_id: scope.workspace_id }, items: [item] })
    else group.items.push(item)
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, group]) => group)
}

/** A workspace's calls, deduplicated by ledger id (a capture published twice can land in one batch). */
const distinctCalls = (items: ReadonlyArray<HeldReconstruction>) => {
  const calls = new Map<string, HeldReconstruction>()
  for (const item of items) if (!calls.has(item.capture.ledger_id)) calls.set(item.capture.ledger_id, item)
  return [...calls.values()]
}

/** Where a group's new decisions go: their sessions, predecessors and chain links, and who built them. */
interface Placement {
  readonly preparedOf: (ledgerId: string) => Prepared
  readonly sessionOf: (ledgerId: string) => string
  readonly previousOf: (ledgerId: string) => string | null
  readonly linkOf: (ledgerId: string) => ChainLink
  /** the chain's head after them */
  readonly head: ChainHead
  /** the consumer loop's throughput record (`ledger status`), which counts them */
  readonly consumer: string
}

/**
 * Inserts the new decisions with their chain links, moves the chain's head past them and counts them in the
 * throughput record, in one statement: each statement is a round trip with the locks held. Every decision is new
 * (probed under the agents' locks), so an insert that returns fewer rows fails the batch: a skipped row would break
 * the chain it was numbered into.
 */
const insertDecisions = Effect.fnUntraced(function*(scope: WorkspaceScope, items: ReadonlyArray<HeldReconstruction>, placement: Placement) {
  const sql = yield* ScopedSql
  const { head, linkOf, preparedOf, previousOf, sessionOf } = placement
  const facts = items.map(callFacts)
  const column = <A>(f: (item: HeldReconstruction, i: number) => A) => items.map(f)
  const links = items.map((item) => linkOf(item.capture.ledger_id))
  const digests = (pick: (link: ChainLink) => Buffer) => byteas(links.map(pick))
  // every column but tenant, workspace, built_at and chain_key (the same for the whole group), in the table's order
  const values = {
    ledger_id: uuids(column(({ capture }) => capture.ledger_id)),
    user_id: uuids(column(({ capture }) => capture.user_id)),
    key_id: uuids(column(({ capture }) => capture.key_id)),
    agent_id: texts(column(({ capture }) => pgText(capture.agent_id))),
    session_id: uuids(column(({ capture }) => sessionOf(capture.ledger_id))),
    execution_id: texts(column(({ capture }) => capture.execution_id === null ? null : pgText(capture.execution_id))),
    created_at: times(column(({ capture }) => capture.started_at)),
    provider: texts(column(({ capture }) => pgText(capture.provider))),
    provider_type: texts(column(({ capture }) => capture.provider_type)),
    model: texts(column(({ capture }) => pgText(capture.model))),
    stream: bools(column(({ capture }) => capture.stream)),
    status: ints(column(({ capture }) => capture.status)),
    title: texts(column(({ derivation }) => pgText(derivation.title))),
    intent: texts(column(({ derivation }) => derivation.intent)),
    outcome: texts(column(({ derivation }) => derivation.outcome)),
    cost_usd: floats(facts.map((fact) => fact.costUsd)),
    quality: floats(column(({ derivation }) => derivation.quality.value)),
    confidence: floats(column(({ derivation }) => derivation.confidence.value)),
    latency_ms: ints(facts.map((fact) => fact.latencyMs)),
    first_token_ms: ints(facts.map((fact) => fact.firstTokenMs)),
    usage: texts(column(({ capture }) => capture.usage === null ? null : pgJson(capture.usage))),
    derivation: byteas(column((item) => derivationJson(preparedOf(item.capture.ledger_id), item))),
    subjects: byteas(column(({ capture }) => preparedOf(capture.ledger_id).subjects)),
    raw_request: texts(column(({ capture }) => pgText(capture.request))),
    raw_response: texts(column(({ capture }) => capture.response === null ? null : pgText(capture.response))),
    error: texts(column(({ capture }) => capture.error === null ? null : pgJson(capture.error))),
    aborted: bools(column(({ capture }) => capture.aborted)),
    upstream_ms: ints(column(({ capture }) => capture.upstream_ms)),
    capture_version: ints(column(({ capture }) => capture.v)),
    captured_at: times(column(({ capture }) => capture.ended_at)),
    api: texts(column(({ capture }) => captureApi(capture))),
    response_id: texts(column(({ responseId }) => responseId === null ? null : pgText(responseId))),
    previous_response_id: texts(column(({ continues }) => continues === null ? null : pgText(continues))),
    previous_ledger_id: uuids(column(({ capture }) => previousOf(capture.ledger_id))),
    raw_context: texts(column(({ capture }) => capture.context == null ? null : pgText(capture.context))),
    source: texts(column(({ capture }) => capture.source === undefined ? null : pgJson(capture.source))),
    recorded_at: times(links.map((link) => link.recorded_at)),
    seq: floats(links.map((link) => link.seq)),
    prev_hash: digests((link) => link.prev_hash),
    hash: digests((link) => link.hash),
    raw_hash: digests((link) => link.raw_hash)
  }
  // a generic plan: a custom one folds the parameters into the plan as constants, copying megabytes of column
  // arrays while planning (bench/notes/builder.md, "A generic plan for the decisions' insert")
  yield* sql`SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
  const [counted] = yield* sql<{ inserted: number }>`
    WITH inserted AS (INSERT INTO decisions (ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, execution_id,
      created_at, provider, provider_type, model, stream, status, title, intent, outcome, cost_usd, quality, confidence,
      latency_ms, first_token_ms, usage, derivation, subjects, raw_request, raw_response, error, aborted, upstream_ms,
      capture_version, captured_at, api, response_id, previous_response_id, previous_ledger_id, raw_context, source,
      built_at, recorded_at, seq, prev_hash, hash, raw_hash, chain_key)
    SELECT ledger_id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, user_id, key_id, agent_id, session_id,
      execution_id, created_at, provider, provider_type, model, stream, status, title, intent, outcome, cost_usd,
      quality, confidence, latency_ms, first_token_ms, usage::jsonb, convert_from(derivation, 'UTF8')::json,
      convert_from(subjects, 'UTF8')::jsonb, raw_request,
      raw_response, error::jsonb, aborted, upstream_ms, capture_version, captured_at, api, response_id,
      previous_response_id, previous_ledger_id, raw_context, source::jsonb, clock_timestamp(), recorded_at, seq,
      prev_hash, hash, raw_hash, ${links[0]?.chain_key ?? 0}
    FROM ${zipped(sql, values)} AS v
    RETURNING 1),
    head AS (${headUpdate(sql, scope, head)}),
    counted AS (INSERT INTO pipeline_throughput (second, consumer, decisions)
      VALUES (date_trunc('second', clock_timestamp()), ${placement.consumer}, ${items.length})
      ON CONFLICT (second, consumer) DO UPDATE SET decisions = pipeline_throughput.decisions + EXCLUDED.decisions)
    SELECT count(*)::int AS inserted FROM inserted`
  // a count, not the ids: thousands of rows back would be read while the locks are held
  if (counted?.inserted !== items.length) {
    return yield* Effect.die(new Error(`chained ${items.length} decisions but inserted ${counted?.inserted}; the batch is retried`))
  }
})

/**
 * One model call is one decision whichever way it came (docs/ARCHITECTURE.md, "The promises"): a transcript turn
 * (`ledger watch`) whose answer's id is already a decision's, or is the answer of a call through the gateway in the
 * same group, is left out, and so is a second turn with one answer's id. (A turn sent twice has one ledger_id anyway;
 * this is for a call that went through the gateway and is also in the client's transcript, which usually comes
 * second.)
 */
const withoutTurnsRecorded = Effect.fnUntraced(function*(items: ReadonlyArray<HeldReconstruction>) {
  const isTurn = (item: HeldReconstruction) => item.capture.source !== undefined && item.responseId !== null
  if (!items.some(isTurn)) return items
  const sql = yield* ScopedSql
  const recorded = new Set(items.flatMap((item) => (isTurn(item) || item.responseId === null ? [] : [item.responseId])))
  const asked = [...new Set(items.flatMap((item) => (isTurn(item) && !recorded.has(item.responseId!) ? [item.responseId!] : [])))]
  // probed key by key, like the ledger ids above; a turn is never a chat completion (migration 0025)
  const stored = asked.length === 0 ? [] : yield* sql<{ response_id: string }>`
    SELECT x.response_id FROM unnest(${texts(asked.map(pgText))}) AS q(id)
    CROSS JOIN LATERAL (SELECT d.response_id FROM decisions d WHERE d.response_id = q.id AND d.api <> 'chat' LIMIT 1) x`
  for (const row of stored) recorded.add(row.response_id)
  return items.filter((item) => {
    if (!isTurn(item)) return true
    if (recorded.has(item.responseId!)) return false
    recorded.add(item.responseId!)
    return true
  })
})

/** How far the gateways' and builders' clocks may disagree without a redelivered capture being stored twice. */
const CLOCK_MARGIN_MS = 7 * 24 * 60 * 60 * 1000

/** Builds one workspace's calls inside their transaction, under their agents' locks. */
const storeGroup = Effect.fnUntraced(function*(
  scope: WorkspaceScope,
  group: ReadonlyArray<HeldReconstruction>,
  options: { readonly gapMs: number; readonly consumer: string; readonly prepared: ReadonlyMap<string, Prepared> }
) {
  const { consumer, gapMs, prepared } = options
  const sql = yield* ScopedSql
  // the ids already stored, by the primary key (tenant, workspace, ledger id, …): all three are index conditions, so
  // each partition is searched once for the whole array. That holds once a partition has statistics: before its
  // first ANALYZE the planner takes the workspace's smaller seq index and walks it (100 ms a batch seven seconds
  // into a new ledger at 2,500 decisions/s), which is why PlannerStatistics checks every second. Only the
  // partitions a stored copy can be in are searched: it was recorded after its call started and, at the latest,
  // now — a week either way for clocks that disagree — so the probe costs the same with two months of partitions
  // as with two years.
  const earliest = group.reduce((min, item) => Math.min(min, item.capture.started_at), Infinity)
  const now = yield* Clock.currentTimeMillis
  const existing = yield* sql<{ ledger_id: string }>`
    SELECT d.ledger_id FROM decisions d WHERE d.tenant_id = ${scope.tenant_id}::uuid AND d.workspace_id = ${scope.workspace_id}::uuid
      AND d.ledger_id = ANY(${uuids(group.map((item) => item.capture.ledger_id))})
      AND d.recorded_at >= ${new Date(earliest - CLOCK_MARGIN_MS)} AND d.recorded_at <= ${new Date(now + CLOCK_MARGIN_MS)}`
  const known = new Set(existing.map((row) => row.ledger_id))
  const fresh = yield* withoutTurnsRecorded(group.filter((item) => !known.has(item.capture.ledger_id)))
  if (fresh.length === 0) return new Set<string>()

  const { items, links } = yield* linkChains(fresh)
  const followed = [...links.values()].flatMap(({ follows }) => (follows !== undefined && "session_id" in follows ? [follows.session_id] : []))
  const loaded = yield* loadSessions(items, gapMs, followed)
  const plan = planSessions(
    items.map((item) => ({
      ledger_id: item.capture.ledger_id,
      agent_id: item.capture.agent_id,
      execution_id: item.capture.execution_id,
      start: item.capture.started_at,
      end: callEnd(item),
      follows: links.get(item.capture.ledger_id)?.follows
    })),
    loaded,
    { gapMs, newId: () => Crypto.randomUUID() }
  )
  const sessionOf = (ledgerId: string) => plan.assignment.get(ledgerId)!
  // every item is new (probed under the agents' locks); the decisions are inserted at the end of the transaction
  const inserted = new Set(items.map((item) => item.capture.ledger_id))
  yield* linkSuccessors(items)

  if (plan.merged.size > 0) {
    const drops = [...plan.merged.keys()]
    // built_at moves with the session, so consumers following it (analytics) see the decision changed
    yield* sql`UPDATE decisions d SET session_id = m.keep, built_at = clock_timestamp()
      FROM UNNEST(${uuids(drops)}, ${uuids(drops.map((id) => plan.merged.get(id)!))}) AS m(dropped, keep)
      WHERE d.session_id = m.dropped`
    yield* sql`DELETE FROM sessions WHERE session_id = ANY(${uuids(drops)})`
    // stored ids stay aliases of their survivor (0010); aliases of a folded session move to its survivor
    const stored = drops.filter((id) => loaded.some((session) => session.session_id === id))
    if (stored.length > 0) {
      const [dropped, keeps] = [uuids(stored), uuids(stored.map((id) => plan.merged.get(id)!))]
      yield* sql`UPDATE session_aliases SET merged_into = (${keeps})[array_position(${dropped}, merged_into)]
        WHERE merged_into = ANY(${dropped})`
      yield* sql`INSERT INTO session_aliases (session_id, tenant_id, workspace_id, merged_into)
        SELECT m.dropped, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, m.keep FROM UNNEST(${dropped}, ${keeps}) AS m(dropped, keep)
        ON CONFLICT (tenant_id, workspace_id, session_id) DO UPDATE SET merged_into = EXCLUDED.merged_into, merged_at = now()`
    }
  }

  // rollups from stored values, folded sessions and the decisions actually inserted
  const byId = new Map(loaded.map((session) => [session.session_id, session]))
  const rollups = new Map<string, SessionRollup | undefined>()
  for (const [dropped, keep] of plan.merged) {
    rollups.set(keep, foldRollups(rollups.has(keep) ? rollups.get(keep) : byId.get(keep)?.rollup, byId.get(dropped)?.rollup))
  }
  const agents = new Map<string, AgentDelta>()
  const agentDelta = (agentId: string): AgentDelta => {
    const delta = agents.get(agentId) ?? noAgentDelta()
    agents.set(agentId, delta)
    return delta
  }
  for (const item of items) {
    if (!inserted.has(item.capture.ledger_id)) continue
    const id = sessionOf(item.capture.ledger_id)
    rollups.set(id, addToRollup(rollups.has(id) ? rollups.get(id) : byId.get(id)?.rollup, item))
    const facts = callFacts(item)
    const delta = agentDelta(item.capture.agent_id)
    delta.decision_count++
    delta.error_count += facts.isError ? 1 : 0
    delta.total_cost_usd += facts.costUsd ?? 0
    delta.total_tokens += facts.tokens
    delta.confidence_sum += item.derivation.confidence.value
    delta.first_seen_at = Math.min(delta.first_seen_at, item.capture.started_at)
    delta.last_seen_at = Math.max(delta.last_seen_at, callEnd(item))
    if (item.capture.agent_name !== null && item.capture.started_at >= delta.named_at) {
      delta.agent_name = item.capture.agent_name
      delta.named_at = item.capture.started_at
    }
  }
  for (const [id, { agent_id }] of plan.created) {
    if (rollups.get(id) !== undefined) agentDelta(agent_id).session_count++
  }
  for (const dropped of plan.merged.keys()) {
    const session = byId.get(dropped)
    if (session !== undefined) agentDelta(session.agent_id).session_count--
  }

  yield* writeSessions(
    scope,
    [...rollups].flatMap(([session_id, rollup]) => {
      const identity = plan.created.get(session_id) ?? byId.get(session_id)
      return rollup === undefined || identity === undefined
        ? []
        : [{ session_id, agent_id: identity.agent_id, execution_id: identity.execution_id, rollup }]
    })
  )
  const ordered = [...items].sort((a, b) =>
    a.capture.started_at - b.capture.started_at || (a.capture.ledger_id < b.capture.ledger_id ? -1 : 1)
  )
  // the agents' rollups (only agents whose rollups changed; one seen for the first time always has a decision) and
  // the chain's lock in one round trip: from here to commit the workspace's chain is held
  const changed = new Map([...agents].filter(([, delta]) => delta.decision_count > 0 || delta.session_count !== 0))
  const head = yield* lockChain(scope, agentsUpsert(sql, scope, changed))
  const chain = yield* chainLinks(ordered.map((item) => prepared.get(item.capture.ledger_id)!.draft), head, (yield* IntegrityKeys).current)
  yield* insertDecisions(scope, ordered, {
    preparedOf: (ledgerId) => prepared.get(ledgerId)!,
    sessionOf,
    previousOf: (ledgerId) => links.get(ledgerId)?.previous ?? null,
    linkOf: (ledgerId) => chain.links.get(ledgerId)!,
    head: chain.head,
    consumer
  })
  return inserted
})

/**
 * Stores one workspace's decisions in one transaction. `consumer` names the throughput record it is counted under (one
 * per consumer loop: two open transactions upserting one row would commit one after the other).
 */
export const storeBatch = Effect.fnUntraced(function*(
  scope: WorkspaceScope,
  batch: ReadonlyArray<StorableDecision>,
  options: { readonly gapMs: number; readonly consumer: string }
): Effect.fn.Return<StoredBatch, DatabaseUnavailable | SqlError.SqlError, TenantSql | IntegrityKeys> {
  const items = distinctCalls(batch.map((decision) => decision.reconstruction))
  if (items.length === 0) return { inserted: new Set<string>() }
  const prepared = new Map(batch.map((decision) => [decision.reconstruction.capture.ledger_id, decision.prepared]))
  // one key per agent, not per decision: a batch of thousands holds a few hundred agents
  const locks = [...new Set(items.map((item) => item.capture.agent_id))].map((agent) => agentLockKey(scope, agent))
  const tenantSql = yield* TenantSql
  return yield* tenantSql.write(
    scope,
    Effect.gen(function*() {
      const asked = yield* Clock.currentTimeNanos
      yield* lockAgents(locks)
      yield* Metric.update(lockWait, Number((yield* Clock.currentTimeNanos) - asked) / 1e9)
      return { inserted: yield* storeGroup(scope, items, { ...options, prepared }) }
    })
  )
})

/** Drops throughput records older than an hour (`ledger status` reads the last minute). */
export const pruneThroughput = Effect.gen(function*() {
  const tenantSql = yield* TenantSql
  yield* tenantSql.write(
    { tenant_id: "", workspace_id: "" },
    Effect.gen(function*() {
      const sql = yield* ScopedSql
      yield* sql`DELETE FROM pipeline_throughput WHERE second < now() - interval '1 hour'`
    })
  )
})
