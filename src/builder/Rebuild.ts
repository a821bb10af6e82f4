/**
 * `ledger rebuild` (docs/ARCHITECTURE.md, "The promises": raw stays replayable): re-derives every stored decision
 * from its raw call after the derivation logic improved, workspace by workspace as the builder role.
 *
 * Decisions are read in pages (keyset on the session index) and only those whose derivation, subjects or title
 * changed are updated, so a second run changes nothing. Then each workspace's session and agent rollups are
 * recomputed from its decisions under the agents' locks, so builders running meanwhile never see half a recount.
 * Sessions are kept as assigned: a rebuild changes what a decision says, not when it happened.
 */
import { Context, Effect, Layer, Result } from "effect"
import { isDeepStrictEqual } from "node:util"
import type { LogicStep } from "../domain/decision.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { continueTrace } from "../derive/trace.ts"
import { captureOfStored, reconstruct, type StoredCall } from "./reconstruct.ts"
import { pgJson, pgText } from "../store/pgValues.ts"
import { floats, texts, uuids } from "../store/arrays.ts"
import { agentLockKey, lockAgents } from "../store/agentRollups.ts"
import { writeSessions } from "./sessionRows.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import type { Progress } from "../supervision/progress.ts"


export interface RebuildResult {
  readonly workspaces: number
  readonly decisions: number
  /** decisions whose derivation changed and were updated */
  readonly changed: number
  /** decisions whose stored call could not be read back (left as they were, logged) */
  readonly unreadable: number
}

const DEFAULT_BATCH = 500

interface StoredRow extends StoredCall {
  readonly previous_ledger_id: string | null
  readonly session_id: string
  readonly cursor_at: string
  readonly title: string
  readonly derivation: unknown
  readonly subjects: unknown
}

const COLUMNS = `api, previous_ledger_id, ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, execution_id, provider, provider_type, model,
  stream, status, aborted, usage, error, raw_request, raw_context, raw_response, source, created_at, created_at::text AS cursor_at, latency_ms,
  first_token_ms, upstream_ms, capture_version, session_id, title, derivation, subjects`

/** Decisions whose exchange is kept: an erased one, or one stored under the `metadata` policy, has nothing to re-derive. */
const KEPT = `erasure_id IS NULL AND raw_request <> ''`

/** One page of a workspace's decisions after the cursor (session, time as text for full precision, id). */
const readPage = Effect.fnUntraced(function*(after: StoredRow | undefined, size: number) {
  const sql = yield* ScopedSql
  return after === undefined
    ? yield* sql<StoredRow>`SELECT ${sql.literal(COLUMNS)} FROM decisions WHERE ${sql.literal(KEPT)}
        ORDER BY session_id, created_at, ledger_id LIMIT ${size}`
    : yield* sql<StoredRow>`SELECT ${sql.literal(COLUMNS)} FROM decisions
        WHERE (session_id, created_at, ledger_id) > (${after.session_id}::uuid, ${after.cursor_at}::timestamptz, ${after.ledger_id}::uuid)
          AND ${sql.literal(KEPT)}
        ORDER BY session_id, created_at, ledger_id LIMIT ${size}`
})

/** A stored decision's trace (what the decisions continuing it open with). */
const storedTrace = Effect.fnUntraced(function*(ledgerId: string) {
  const sql = yield* ScopedSql
  const [row] = yield* sql<{ trace: ReadonlyArray<LogicStep> | null }>`
    SELECT derivation->'logic_trace' AS trace FROM decisions WHERE ledger_id = ${ledgerId}::uuid`
  return row?.trace ?? []
})

/** Recomputes a workspace's session and agent rollups from its decisions (inside its write transaction). */
const recomputeRollups = Effect.fnUntraced(function*(scope: WorkspaceScope) {
  const sql = yield* ScopedSql
  const agents = yield* sql<{ agent_id: string }>`SELECT DISTINCT agent_id FROM decisions`
  yield* lockAgents(agents.map((agent) => agentLockKey(scope, agent.agent_id)))
  yield* sql`DELETE FROM sessions s WHERE NOT EXISTS (SELECT 1 FROM decisions d WHERE d.session_id = s.session_id)`
  const sessions = yield* sql<{
    session_id: string
    agent_id: string
    execution_id: string | null
    decision_count: number
    error_count: number
    total_cost_usd: number
    total_tokens: number
    started_at: Date
    ended_at: Date
    first_ledger_id: string
    first_title: string
  }>`
    SELECT session_id, min(agent_id) AS agent_id, min(execution_id) AS execution_id, count(*)::float8 AS decision_count,
      (count(*) FILTER (WHERE outcome = 'error'))::float8 AS error_count, COALESCE(sum(cost_usd), 0) AS total_cost_usd,
      COALESCE(sum((usage->>'total_tokens')::float8), 0) AS total_tokens, min(created_at) AS started_at,
      max(created_at + latency_ms * interval '1 millisecond') AS ended_at,
      (array_agg(ledger_id ORDER BY created_at, ledger_id))[1] AS first_ledger_id,
      (array_agg(title ORDER BY created_at, ledger_id))[1] AS first_title
    FROM decisions GROUP BY session_id`
  yield* writeSessions(scope, sessions.map((s) => ({
    session_id: s.session_id,
    agent_id: s.agent_id,
    execution_id: s.execution_id,
    rollup: {
      decision_count: s.decision_count,
      error_count: s.error_count,
      total_cost_usd: s.total_cost_usd,
      total_tokens: s.total_tokens,
      started_at: s.started_at.getTime(),
      ended_at: s.ended_at.getTime(),
      first: { at: s.started_at.getTime(), ledger_id: s.first_ledger_id, title: s.first_title }
    }
  })))
  yield* sql`
    UPDATE agents a SET decision_count = v.decision_count, session_count = v.session_count, error_count = v.error_count,
      total_cost_usd = v.total_cost_usd, total_tokens = v.total_tokens, confidence_sum = v.confidence_sum,
      first_seen_at = v.first_seen_at, last_seen_at = v.last_seen_at
    FROM (
      SELECT agent_id, count(*) AS decision_count, count(DISTINCT session_id) AS session_count,
        count(*) FILTER (WHERE outcome = 'error') AS error_count, COALESCE(sum(cost_usd), 0) AS total_cost_usd,
        COALESCE(sum((usage->>'total_tokens')::float8), 0)::bigint AS total_tokens, sum(confidence) AS confidence_sum,
        min(created_at) AS first_seen_at, max(created_at + latency_ms * interval '1 millisecond') AS last_seen_at
      FROM decisions GROUP BY agent_id
    ) v
    WHERE a.agent_id = v.agent_id`
})

export class Rebuilder extends Context.Service<Rebuilder, {
  /** Re-derives every decision; `onProgress` is called after each page. */
  run(options?: {
    readonly batchSize?: number | undefined
    readonly onProgress?: ((progress: Progress) => Effect.Effect<void>) | undefined
  }): Effect.Effect<RebuildResult, DatabaseUnavailable>
}>()("ledger/builder/Rebuilder") {
  static readonly layer = Layer.effect(
    Rebuilder,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql

      const run = Effect.fn("Rebuilder.run")(function*(options?: {
        readonly batchSize?: number | undefined
        readonly onProgress?: ((progress: Progress) => Effect.Effect<void>) | undefined
      }) {
        const batchSize = options?.batchSize ?? DEFAULT_BATCH
        const report = options?.onProgress ?? (() => Effect.void)
        const workspaces = yield* tenantSql.control(
          ScopedSql.use((sql) => sql<WorkspaceScope>`SELECT tenant_id, workspace_id FROM workspaces ORDER BY tenant_id, workspace_id`)
        )
        let total = 0
        for (const scope of workspaces) {
          const [row] = yield* tenantSql.write(scope, ScopedSql.use((sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions`))
          total += row!.n
        }
        let done = 0
        let changed = 0
        let unreadable = 0
        yield* report({ done, total })
        for (const scope of workspaces) {
          let cursor: StoredRow | undefined
          while (true) {
            const page = yield* tenantSql.write(scope, Effect.gen(function*() {
              const rows = yield* readPage(cursor, batchSize)
              const updates: Array<{ ledger_id: string; title: string; intent: string; outcome: string; cost: number | null; quality: number; confidence: number; derivation: string; subjects: string }> = []
              /** traces rebuilt on this page, for the calls that continue them (pages before it are stored) */
              const traces = new Map<string, ReadonlyArray<LogicStep>>()
              for (const row of rows) {
                const rebuilt = yield* Effect.result(Effect.flatMap(captureOfStored(row), reconstruct))
                if (Result.isFailure(rebuilt)) {
                  unreadable++
                  yield* Effect.logWarning("decision not rebuilt", { ledger_id: row.ledger_id, reason: rebuilt.failure.message })
                  continue
                }
                const { subjects } = rebuilt.success
                let { derivation } = rebuilt.success
                if (row.previous_ledger_id !== null && !rebuilt.success.joined) {
                  const earlier = traces.get(row.previous_ledger_id) ?? (yield* storedTrace(row.previous_ledger_id))
                  derivation = { ...derivation, logic_trace: continueTrace(earlier, derivation.logic_trace) }
                }
                traces.set(row.ledger_id, derivation.logic_trace)
                const derivationJson = pgJson(derivation)
                const subjectsJson = pgJson(subjects)
                const title = pgText(derivation.title)
                const same = title === row.title && isDeepStrictEqual(JSON.parse(derivationJson), row.derivation) &&
                  isDeepStrictEqual(JSON.parse(subjectsJson), row.subjects)
                if (same) continue
                updates.push({
                  ledger_id: row.ledger_id,
                  title,
                  intent: derivation.intent,
                  outcome: derivation.outcome,
                  cost: derivation.cost.total_usd,
                  quality: derivation.quality.value,
                  confidence: derivation.confidence.value,
                  derivation: derivationJson,
                  subjects: subjectsJson
                })
              }
              if (updates.length > 0) {
                const sql = yield* ScopedSql
                // built_at moves so that consumers following it (analytics) see the new derivation
                yield* sql`
                  UPDATE decisions d SET title = v.title, intent = v.intent, outcome = v.outcome, cost_usd = v.cost_usd,
                    quality = v.quality, confidence = v.confidence, derivation = v.derivation::json,
                    subjects = v.subjects::jsonb, built_at = clock_timestamp()
                  FROM UNNEST(${uuids(updates.map((u) => u.ledger_id))}, ${texts(updates.map((u) => u.title))},
                    ${texts(updates.map((u) => u.intent))}, ${texts(updates.map((u) => u.outcome))},
                    ${floats(updates.map((u) => u.cost))}, ${floats(updates.map((u) => u.quality))},
                    ${floats(updates.map((u) => u.confidence))}, ${texts(updates.map((u) => u.derivation))},
                    ${texts(updates.map((u) => u.subjects))}
                  ) AS v(ledger_id, title, intent, outcome, cost_usd, quality, confidence, derivation, subjects)
                  WHERE d.ledger_id = v.ledger_id`
              }
              changed += updates.length
              return rows
            }))
            if (page.length === 0) break
            done += page.length
            cursor = page.at(-1)
            yield* report({ done, total: Math.max(total, done) })
            if (page.length < batchSize) break
          }
          yield* tenantSql.write(scope, recomputeRollups(scope))
        }
        return { workspaces: workspaces.length, decisions: done, changed, unreadable }
      })

      return Rebuilder.of({ run })
    })
  )
}
