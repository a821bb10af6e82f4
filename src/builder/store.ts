/**
 * The builder's writes (docs/ARCHITECTURE.md, "The promises": no duplicate, tenants isolated): decisions, sessions
 * and rollups for a batch of reconstructions, inside one `TenantSql.write` transaction as the builder role.
 *
 * - Every agent of the batch is locked first (`pg_advisory_xact_lock`, in ascending key order, so builders never
 *   deadlock): session assignment reads, plans and writes an agent's sessions with nothing else changing them.
 * - Then per tenant/workspace group (`rescope`): the ledger ids already stored are probed under those locks (a
 *   capture's ledger id belongs to one agent, so no other builder can insert it meanwhile) and only the new calls
 *   go on — a redelivered capture inserts nothing and so changes nothing. One statement per table for the whole
 *   group, its rows `zipped` from parallel arrays: sessions and agents, then the decisions, last, because they take
 *   the workspace's chain (chaining.ts) whose lock serialises every builder writing to the workspace until commit.
 */
import { Clock, Effect, Metric } from "effect"
import type { SqlError } from "effect/sql"
import * as Crypto from "node:crypto"
import { captureApi } from "../domain/capture.ts"
import type { LogicStep } from "../domain/decision.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { type SessionRollup, sessionSummary } from "../domain/sessionSummary.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { bools, byteas, floats, ints, texts, times, uuids, zipped } from "../store/arrays.ts"
import { IntegrityKeys } from "../integrity/IntegrityKeys.ts"
import { type ChainDraft, chainDraft, type ChainHead, type ChainLink, chainLinks, headUpdate, lockChain } from "./chaining.ts"
import { continueTrace } from "./derive/trace.ts"
import { lockWait } from "./metrics.ts"
import { callFacts, pgJson, pgText, type Reconstruction } from "./reconstruct.ts"
import type { Derivation } from "../domain/decision.ts"
import { earlierFirst, type KnownSession, type PlannedCall, planSessions } from "./sessions.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

// --- agent locks

/** Class id of the ledger's advisory locks (the first key of the two-key form). */
const AGENT_LOCK_CLASS = 0x1ed9e7

/** The advisory lock key of an agent: 32 bits of a hash (a collision only serialises two agents more). */
export const agentLockKey = (scope: WorkspaceScope, agentId: string): number =>
  Crypto.hash("sha1", `${scope.tenant_id}\u0000${scope.workspace_id}\u0000${agentId}`, "buffer").readInt32BE(0)

/** Takes the agents' transaction-level locks in ascending key order (the one order every builder uses). */
export const lockAgents = (keys: Iterable<number>) =>
  Effect.gen(function*() {
    const sorted = [...new Set(keys)].sort((a, b) => a - b)
    if (sorted.length === 0) return
    const sql = yield* ScopedSql
    // unnest yields the array in order, so the locks are taken in that order
    yield* sql`SELECT pg_advisory_xact_lock(${AGENT_LOCK_CLASS}, key) FROM unnest(${ints(sorted)}) AS key`
  })

// --- one batch

export interface StoredBatch {
  /** ledger ids inserted by this batch (the rest already existed) */
  readonly inserted: ReadonlySet<string>
}

interface LoadedSession extends KnownSession {
  readonly rollup: SessionRollup | undefined
}

const groupKey = (scope: WorkspaceScope) => `${scope.tenant_id}/${scope.workspace_id}`

/** Calls of one group, deduplicated by ledger id (a capture published twice can land in one batch). */
const groupByWorkspace = (batch: ReadonlyArray<HeldReconstruction>) => {
  const groups = new Map<string, { scope: WorkspaceScope; items: Map<string, HeldReconstruction> }>()
  for (const item of batch) {
    const key = groupKey(item.capture)
    const group = groups.get(key) ?? { scope: item.capture, items: new Map() }
    if (!group.items.has(item.capture.ledger_id)) group.items.set(item.capture.ledger_id, item)
    groups.set(key, group)
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, group]) => ({
    scope: { tenant_id: group.scope.tenant_id, workspace_id: group.scope.workspace_id },
    items: [...group.items.values()]
  }))
}

const callEnd = (item: HeldReconstruction) => item.capture.started_at + callFacts(item).latencyMs

/** What the builder reads of a session `s`: its identity, span and rollup, with its first decision (migration 0023). */
const SESSION_COLUMNS = `s.session_id, s.agent_id, s.execution_id, s.started_at, s.ended_at,
  s.decision_count::float8 AS decision_count, s.error_count::float8 AS error_count,
  s.total_cost_usd, s.total_tokens::float8 AS total_tokens,
  s.first_ledger_id, s.first_at, s.first_title`

/** The sessions the items may touch: their executions', those within the gap, and the ones they continue (`followed`). */
const loadSessions = (items: ReadonlyArray<HeldReconstruction>, gapMs: number, followed: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    // one probe per execution, and one window per agent for its gap-grouped calls
    const probes = new Map<string, { agent: string; execution: string | null; lo: number | null; hi: number | null }>()
    for (const item of items) {
      const { agent_id, execution_id, started_at } = item.capture
      // execution ids are never empty: "" stands for the agent's gap-grouped calls
      const key = `${agent_id}\u0000${execution_id ?? ""}`
      const probe = probes.get(key) ?? { agent: agent_id, execution: execution_id, lo: null, hi: null }
      if (execution_id === null) {
        probe.lo = Math.min(probe.lo ?? Infinity, started_at - gapMs)
        probe.hi = Math.max(probe.hi ?? -Infinity, callEnd(item) + gapMs)
      }
      probes.set(key, probe)
    }
    const list = [...probes.values()]
    type Row = {
      session_id: string
      agent_id: string
      execution_id: string | null
      started_at: Date
      ended_at: Date
      decision_count: number
      error_count: number
      total_cost_usd: number
      total_tokens: number
      first_ledger_id: string | null
      first_at: Date | null
      first_title: string | null
    }
    const found = yield* sql<Row>`
      SELECT ${sql.literal(SESSION_COLUMNS)}
      FROM UNNEST(${texts(list.map((p) => p.agent))}, ${texts(list.map((p) => p.execution))},
                  ${times(list.map((p) => p.lo))}, ${times(list.map((p) => p.hi))}) AS q(agent_id, execution_id, lo, hi)
      JOIN sessions s ON s.agent_id = q.agent_id AND (
        (q.execution_id IS NOT NULL AND s.execution_id = q.execution_id)
        OR (q.execution_id IS NULL AND s.execution_id IS NULL AND s.ended_at >= q.lo AND s.started_at <= q.hi))`
    const seen = new Set(found.map((row) => row.session_id))
    const more = followed.filter((id) => !seen.has(id))
    const rows = more.length === 0 ? found : [
      ...found,
      ...yield* sql<Row>`SELECT ${sql.literal(SESSION_COLUMNS)} FROM unnest(${uuids(more)}) AS q(id)
        CROSS JOIN LATERAL (SELECT * FROM sessions s WHERE s.session_id = q.id LIMIT 1) s`
    ]
    // a session written without its first decision (by a builder of an earlier version, during an upgrade): its first
    // decision is looked up, so that its rollup goes on from where it was
    const unknown = rows.filter((row) => row.first_ledger_id === null && row.decision_count > 0).map((row) => row.session_id)
    const looked = unknown.length === 0 ? [] : yield* sql<{ session_id: string; ledger_id: string; created_at: Date; title: string }>`
      SELECT q.id AS session_id, f.ledger_id, f.created_at, f.title FROM unnest(${uuids(unknown)}) AS q(id)
      CROSS JOIN LATERAL (SELECT d.ledger_id, d.created_at, d.title FROM decisions d WHERE d.session_id = q.id
        ORDER BY d.created_at, d.ledger_id LIMIT 1) f`
    const firsts = new Map(looked.map((f) => [f.session_id, { at: f.created_at.getTime(), ledger_id: f.ledger_id, title: f.title }]))
    return rows.map((row): LoadedSession => {
      const first = row.first_ledger_id !== null && row.first_at !== null
        ? { at: row.first_at.getTime(), ledger_id: row.first_ledger_id, title: row.first_title ?? "" }
        : firsts.get(row.session_id)
      return {
        session_id: row.session_id,
        agent_id: row.agent_id,
        execution_id: row.execution_id,
        start: row.started_at.getTime(),
        end: row.ended_at.getTime(),
        rollup: first === undefined ? undefined : {
          decision_count: row.decision_count,
          error_count: row.error_count,
          total_cost_usd: row.total_cost_usd,
          total_tokens: row.total_tokens,
          started_at: row.started_at.getTime(),
          ended_at: row.ended_at.getTime(),
          first
        }
      }
    })
  })

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
const linkChains = (items: ReadonlyArray<HeldReconstruction>) =>
  Effect.gen(function*() {
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
const linkSuccessors = (inserted: ReadonlyArray<HeldReconstruction>) =>
  Effect.gen(function*() {
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

/** What the transaction reads of a derivation: the row's columns and the rollups' figures. */
export interface HeldDerivation {
  readonly title: string
  readonly intent: Derivation["intent"]
  readonly outcome: Derivation["outcome"]
  readonly cost: { readonly total_usd: number | null }
  readonly quality: { readonly value: number }
  readonly confidence: { readonly value: number }
}

/**
 * A reconstruction as its batch holds it until commit. A batch of thousands outlives several young-generation
 * collections, and each copies what it still holds: whole derivations (trace, evidence, scores' reasons) were about a
 * third of a short decision's copied bytes and most of its objects (bench/RESULTS.md, "What a batch holds").
 */
export interface HeldReconstruction extends Omit<Reconstruction, "derivation" | "subjects"> {
  readonly derivation: HeldDerivation
  /**
   * The whole derivation of a Responses API call, the one kind a call continues (`previous_response_id`): the
   * transaction may open its trace with the turns it continues (linkChains) or read its trace for a successor built
   * before it (linkSuccessors). Undefined for the others.
   */
  readonly whole: Derivation | undefined
}

/**
 * What a decision's row holds that no lock decides: what its chain hash covers apart from its place, and its JSON
 * texts. Computed before the batch's transaction (by a consumer while its previous batch commits), so none of it
 * runs while the batch holds its locks. The texts are kept as UTF-8 bytes, outside the JavaScript heap, which
 * collections do not copy (a text with one character beyond Latin-1, such as an intent reason's arrow, takes two
 * bytes a character there); they are what the driver would have encoded anyway.
 */
interface Prepared {
  readonly draft: ChainDraft
  /** the derivation the JSON text is of: a call that continues another gets a new one, its trace joined (linkChains) */
  readonly derivationOf: Derivation | undefined
  readonly derivation: Buffer
  readonly subjects: Buffer
}

/** A reconstruction and its row's prepared parts: what `storeBatch` stores. */
export interface StorableDecision {
  readonly reconstruction: HeldReconstruction
  readonly prepared: Prepared
}

/** JSON text for a json or jsonb column as UTF-8 bytes, sent as bytea (`convert_from(…, 'UTF8')` in SQL). */
const jsonBytes = (value: unknown) => Buffer.from(pgJson(value))

/** Prepares a reconstruction's row (see Prepared) and what its batch holds of it until commit (HeldReconstruction). */
export const storable = (reconstruction: Reconstruction): StorableDecision => {
  const { derivation, subjects, ...call } = reconstruction
  const whole = captureApi(call.capture) === "responses" ? derivation : undefined
  return {
    reconstruction: {
      ...call,
      whole,
      derivation: whole ?? {
        title: derivation.title,
        intent: derivation.intent,
        outcome: derivation.outcome,
        cost: { total_usd: derivation.cost.total_usd },
        quality: { value: derivation.quality.value },
        confidence: { value: derivation.confidence.value }
      }
    },
    prepared: {
      draft: chainDraft(call.capture, reconstruction),
      derivationOf: whole,
      derivation: jsonBytes(derivation),
      subjects: jsonBytes(subjects)
    }
  }
}

/** The derivation's JSON text: the one prepared, unless the derivation changed since. */
const derivationJson = (prepared: Prepared, item: HeldReconstruction) =>
  item.whole === prepared.derivationOf ? prepared.derivation : jsonBytes(item.whole)

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
const insertDecisions = (scope: WorkspaceScope, items: ReadonlyArray<HeldReconstruction>, placement: Placement) =>
  Effect.gen(function*() {
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
 * Absolute session rollups (the agent lock makes read-modify-write safe); new sessions are inserted. The builder's
 * summary is written until analytics has written one of its own (migration 0011).
 */
export const writeSessions = (
  scope: WorkspaceScope,
  sessions: ReadonlyArray<{ readonly session_id: string; readonly agent_id: string; readonly execution_id: string | null; readonly rollup: SessionRollup }>
) =>
  Effect.gen(function*() {
    if (sessions.length === 0) return
    const sql = yield* ScopedSql
    yield* sql`
      INSERT INTO sessions (session_id, tenant_id, workspace_id, agent_id, execution_id, started_at, ended_at,
        decision_count, error_count, total_cost_usd, total_tokens, summary, first_ledger_id, first_at, first_title)
      SELECT session_id, ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, agent_id, execution_id, started_at,
        ended_at, decision_count, error_count, total_cost_usd, total_tokens, summary, first_ledger_id, first_at, first_title
      FROM ${zipped(sql, {
        session_id: uuids(sessions.map((s) => s.session_id)),
        agent_id: texts(sessions.map((s) => pgText(s.agent_id))),
        execution_id: texts(sessions.map((s) => s.execution_id === null ? null : pgText(s.execution_id))),
        started_at: times(sessions.map((s) => s.rollup.started_at)),
        ended_at: times(sessions.map((s) => s.rollup.ended_at)),
        decision_count: floats(sessions.map((s) => s.rollup.decision_count)),
        error_count: floats(sessions.map((s) => s.rollup.error_count)),
        total_cost_usd: floats(sessions.map((s) => s.rollup.total_cost_usd)),
        total_tokens: floats(sessions.map((s) => s.rollup.total_tokens)),
        summary: texts(sessions.map((s) => pgText(sessionSummary(s.rollup)))),
        first_ledger_id: uuids(sessions.map((s) => s.rollup.first.ledger_id)),
        first_at: times(sessions.map((s) => s.rollup.first.at)),
        first_title: texts(sessions.map((s) => pgText(s.rollup.first.title)))
      })} AS v
      ON CONFLICT (session_id) DO UPDATE SET started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
        decision_count = EXCLUDED.decision_count, error_count = EXCLUDED.error_count,
        total_cost_usd = EXCLUDED.total_cost_usd, total_tokens = EXCLUDED.total_tokens,
        summary = CASE WHEN sessions.summary_by_analytics THEN sessions.summary ELSE EXCLUDED.summary END,
        first_ledger_id = EXCLUDED.first_ledger_id, first_at = EXCLUDED.first_at, first_title = EXCLUDED.first_title`
  })

interface AgentDelta {
  agent_name: string | null
  named_at: number
  decision_count: number
  session_count: number
  error_count: number
  total_cost_usd: number
  total_tokens: number
  confidence_sum: number
  first_seen_at: number
  last_seen_at: number
}

/** The agents' rollups added in one upsert (none when nothing changed); sent with the chain's lock (lockChain). */
const agentsUpsert = (sql: ScopedSql["Service"], scope: WorkspaceScope, deltas: ReadonlyMap<string, AgentDelta>) => {
  if (deltas.size === 0) return undefined
  const ids = [...deltas.keys()]
  const list = [...deltas.values()]
  // The name follows the most recent call that carried one; a late capture does not rename the agent back.
  return sql`
    INSERT INTO agents (tenant_id, workspace_id, agent_id, agent_name, decision_count, session_count, error_count,
      total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, agent_id, agent_name, decision_count, session_count,
      error_count, total_cost_usd, total_tokens, confidence_sum, first_seen_at, last_seen_at
    FROM ${zipped(sql, {
      agent_id: texts(ids.map(pgText)),
      agent_name: texts(list.map((d) => d.agent_name === null ? null : pgText(d.agent_name))),
      decision_count: floats(list.map((d) => d.decision_count)),
      session_count: floats(list.map((d) => d.session_count)),
      error_count: floats(list.map((d) => d.error_count)),
      total_cost_usd: floats(list.map((d) => d.total_cost_usd)),
      total_tokens: floats(list.map((d) => d.total_tokens)),
      confidence_sum: floats(list.map((d) => d.confidence_sum)),
      first_seen_at: times(list.map((d) => d.first_seen_at)),
      last_seen_at: times(list.map((d) => d.last_seen_at))
    })} AS v
    ON CONFLICT (tenant_id, workspace_id, agent_id) DO UPDATE SET
      agent_name = CASE WHEN EXCLUDED.last_seen_at >= agents.last_seen_at
        THEN COALESCE(EXCLUDED.agent_name, agents.agent_name) ELSE COALESCE(agents.agent_name, EXCLUDED.agent_name) END,
      decision_count = agents.decision_count + EXCLUDED.decision_count,
      session_count = agents.session_count + EXCLUDED.session_count,
      error_count = agents.error_count + EXCLUDED.error_count,
      total_cost_usd = agents.total_cost_usd + EXCLUDED.total_cost_usd,
      total_tokens = agents.total_tokens + EXCLUDED.total_tokens,
      confidence_sum = agents.confidence_sum + EXCLUDED.confidence_sum,
      first_seen_at = LEAST(agents.first_seen_at, EXCLUDED.first_seen_at),
      last_seen_at = GREATEST(agents.last_seen_at, EXCLUDED.last_seen_at)`
}

const addToRollup = (rollup: SessionRollup | undefined, item: HeldReconstruction): SessionRollup => {
  const facts = callFacts(item)
  const start = item.capture.started_at
  const first = { at: start, ledger_id: item.capture.ledger_id, title: item.derivation.title }
  return {
    decision_count: (rollup?.decision_count ?? 0) + 1,
    error_count: (rollup?.error_count ?? 0) + (facts.isError ? 1 : 0),
    total_cost_usd: (rollup?.total_cost_usd ?? 0) + (facts.costUsd ?? 0),
    total_tokens: (rollup?.total_tokens ?? 0) + facts.tokens,
    started_at: Math.min(rollup?.started_at ?? start, start),
    ended_at: Math.max(rollup?.ended_at ?? -Infinity, start + facts.latencyMs),
    first: rollup === undefined ? first : earlierFirst(rollup.first, first)
  }
}

const foldRollups = (into: SessionRollup | undefined, from: SessionRollup | undefined): SessionRollup | undefined =>
  into === undefined ? from : from === undefined ? into : {
    decision_count: into.decision_count + from.decision_count,
    error_count: into.error_count + from.error_count,
    total_cost_usd: into.total_cost_usd + from.total_cost_usd,
    total_tokens: into.total_tokens + from.total_tokens,
    started_at: Math.min(into.started_at, from.started_at),
    ended_at: Math.max(into.ended_at, from.ended_at),
    first: earlierFirst(into.first, from.first)
  }

/**
 * One model call is one decision whichever way it came (docs/ARCHITECTURE.md, "The promises"): a transcript turn
 * (`ledger watch`) whose answer's id is already a decision's, or is the answer of a call through the gateway in the
 * same group, is left out, and so is a second turn with one answer's id. (A turn sent twice has one ledger_id anyway;
 * this is for a call that went through the gateway and is also in the client's transcript, which usually comes
 * second.)
 */
const withoutTurnsRecorded = (items: ReadonlyArray<HeldReconstruction>) =>
  Effect.gen(function*() {
    const isTurn = (item: HeldReconstruction) => item.capture.source !== undefined && item.responseId !== null
    if (!items.some(isTurn)) return items
    const sql = yield* ScopedSql
    const recorded = new Set(items.flatMap((item) => (isTurn(item) || item.responseId === null ? [] : [item.responseId])))
    const asked = [...new Set(items.flatMap((item) => (isTurn(item) && !recorded.has(item.responseId!) ? [item.responseId!] : [])))]
    // probed key by key, like the ledger ids above
    const stored = asked.length === 0 ? [] : yield* sql<{ response_id: string }>`
      SELECT x.response_id FROM unnest(${texts(asked.map(pgText))}) AS q(id)
      CROSS JOIN LATERAL (SELECT d.response_id FROM decisions d WHERE d.response_id = q.id LIMIT 1) x`
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

/** Builds one group (one tenant/workspace) inside the batch's transaction, after `rescope`. */
const storeGroup = (
  scope: WorkspaceScope,
  group: ReadonlyArray<HeldReconstruction>,
  options: { readonly gapMs: number; readonly consumer: string; readonly prepared: ReadonlyMap<string, Prepared> }
) =>
  Effect.gen(function*() {
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
      const delta = agents.get(agentId) ?? {
        agent_name: null,
        named_at: -Infinity,
        decision_count: 0,
        session_count: 0,
        error_count: 0,
        total_cost_usd: 0,
        total_tokens: 0,
        confidence_sum: 0,
        first_seen_at: Infinity,
        last_seen_at: -Infinity
      }
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
 * Stores a batch in one transaction. `consumer` names the throughput record it is counted under (one per consumer
 * loop: two open transactions upserting one row would commit one after the other); the batch may span tenants and
 * workspaces.
 */
export const storeBatch = (
  batch: ReadonlyArray<StorableDecision>,
  options: { readonly gapMs: number; readonly consumer: string }
): Effect.Effect<StoredBatch, DatabaseUnavailable | SqlError.SqlError, TenantSql | IntegrityKeys> =>
  Effect.gen(function*() {
    const groups = groupByWorkspace(batch.map((decision) => decision.reconstruction))
    if (groups.length === 0) return { inserted: new Set<string>() }
    const prepared = new Map(batch.map((decision) => [decision.reconstruction.capture.ledger_id, decision.prepared]))
    // one key per agent, not per decision: a batch of thousands holds a few hundred agents
    const locks = groups.flatMap(({ items, scope }) =>
      [...new Set(items.map((item) => item.capture.agent_id))].map((agent) => agentLockKey(scope, agent))
    )
    const tenantSql = yield* TenantSql
    return yield* tenantSql.write(
      groups[0]!.scope,
      Effect.gen(function*() {
        const asked = yield* Clock.currentTimeNanos
        yield* lockAgents(locks)
        yield* Metric.update(lockWait, Number((yield* Clock.currentTimeNanos) - asked) / 1e9)
        const inserted = new Set<string>()
        for (const [index, { items, scope }] of groups.entries()) {
          if (index > 0) yield* tenantSql.rescope(scope)
          for (const id of yield* storeGroup(scope, items, { ...options, prepared })) inserted.add(id)
        }
        return { inserted: inserted as ReadonlySet<string> }
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
