/**
 * Decisions kept by whole monthly partitions (docs/ARCHITECTURE.md, "Integrity"), in the builder role:
 *
 * - Upkeep: `decisions` is partitioned by `recorded_at`. The legacy partition (migration 0019) reaches to the first
 *   of the month after the migration; upkeep creates `decisions_YYYY_MM` (UTC months) for this month and the next two
 *   wherever no partition covers them yet — once before the builders start, then hourly. The builder needs that
 *   margin: a row no partition takes is refused as data, and the builder would dead-letter its capture. Partition DDL
 *   runs under one advisory lock, with the catalog read after it, so processes doing it at once create each
 *   partition once. A partition gets the parent's indexes and no grants: the runtime roles reach its rows only
 *   through `decisions` and its policies.
 * - Pruning (LEDGER_RETENTION_DAYS): partitions whose upper bound is that old are dropped, oldest first. recorded_at
 *   never goes back within a workspace, so each holds a prefix of every chain. First each workspace's chain gets the
 *   signed marker "pruned up to seq N, whose hash was H" (under its chain lock, only forward), which `ledger verify`
 *   starts after; then the search rows, postings (and term counts), prints and hand-offs of those decisions are
 *   deleted; then the partition is dropped. Every step can be repeated, so the next round finishes one cut short. A
 *   partition still holding unchained decisions waits for the chain backfill (they may yet join a chain's tail).
 * - Pruned decisions still count in the session and agent rollups, hourly rollups, subjects, sources, graph edges,
 *   features and insights (whose ledger ids then name nothing): aggregates over history, kept as such.
 *
 * Markers and derived rows are written through `TenantSql`, a transaction per workspace (so builders wait on one chain
 * lock for one short statement); the owner's pool reads the catalog and runs the DDL. Creating or dropping a partition
 * holds an ACCESS EXCLUSIVE lock on `decisions` for a moment; queries queue behind it while it waits, so it waits at
 * most LOCK_TIMEOUT and a round that times out is retried the next hour.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ENTRIES, forgetPostings } from "../analytics/postings.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { RESTART, sweepEvery } from "../supervision/supervise.ts"
import { GENESIS } from "../chain/chain.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { pruneMacText } from "./markers.ts"

/** Months kept created ahead: this one and the next two. */
const MONTHS_AHEAD = 3
const ROUND_EVERY = Duration.hours(1)
const LOCK_TIMEOUT = "3s"
/** Key of the advisory lock around partition DDL (an arbitrary constant of this project). */
const PARTITION_LOCK = 7_316_402
const DAY_MS = 86_400_000

const prunedDecisions = Metric.counter("ledger_retention_pruned_decisions_total", {
  description: "decisions removed with the partitions that retention dropped",
  incremental: true
})

export interface DecisionPartition {
  readonly name: string
  /** null: MINVALUE (the legacy partition) */
  readonly from: Date | null
  /** null: MAXVALUE */
  readonly to: Date | null
}

export interface PrunedPartition {
  readonly partition: string
  readonly decisions: number
  /** the markers this round moved */
  readonly markers: ReadonlyArray<{ readonly tenant_id: string; readonly workspace_id: string; readonly pruned_seq: number }>
}

/** A workspace's decisions recorded before a bound: how many, and the marker written for them (null: already there). */
interface Cut {
  readonly scope: WorkspaceScope
  readonly decisions: number
  readonly pruned_seq: number | null
}

const moved = (cuts: ReadonlyArray<Cut>) =>
  cuts.flatMap(({ scope, pruned_seq }) => (pruned_seq === null ? [] : [{ ...scope, pruned_seq }]))

const monthStart = (now: number, offset: number) => {
  const date = new Date(now)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + offset, 1)
}

const partitionName = (month: number) => {
  const date = new Date(month)
  return `decisions_${date.getUTCFullYear()}_${String(date.getUTCMonth() + 1).padStart(2, "0")}`
}

/**
 * The part of [from, to) no partition holds, from where those before it end (null: all of it is held). The legacy
 * bound may be off the month's start: the migration added its month in the session's time zone.
 */
const uncovered = (from: number, to: number, partitions: ReadonlyArray<DecisionPartition>) => {
  let start = from
  let end = to
  const byLower = [...partitions].sort((a, b) => (a.from?.getTime() ?? -Infinity) - (b.from?.getTime() ?? -Infinity))
  for (const partition of byLower) {
    const lower = partition.from?.getTime() ?? -Infinity
    const upper = partition.to?.getTime() ?? Infinity
    if (lower <= start && upper > start) start = upper
    else if (lower > start && lower < end) end = lower
  }
  return start < end ? { from: start, to: end } : null
}

export class DecisionRetention extends Context.Service<DecisionRetention, {
  /** The partitions of `decisions`, by upper bound. */
  readonly partitions: Effect.Effect<ReadonlyArray<DecisionPartition>, SqlError.SqlError>
  /** Creates the partitions this month and the next two still lack; returns their names. */
  readonly upkeep: Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /** Drops the partitions wholly older than `retentionDays`, each chain marked where it now starts. */
  prune(retentionDays: number): Effect.Effect<ReadonlyArray<PrunedPartition>, SqlError.SqlError | DatabaseUnavailable>
}>()("ledger/integrity/DecisionRetention") {
  static readonly layer = Layer.effect(
    DecisionRetention,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenantSql = yield* TenantSql
      const keys = yield* IntegrityKeys

      // the bounds as Postgres prints them, read back in the same session (MINVALUE/MAXVALUE match nothing: null)
      const partitions = sql<DecisionPartition>`
        SELECT c.relname::text AS name,
          (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM [(]''([^'']+)''[)]'))[1]::timestamptz AS "from",
          (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO [(]''([^'']+)''[)]'))[1]::timestamptz AS "to"
        FROM pg_partition_tree('decisions') t JOIN pg_class c ON c.oid = t.relid
        WHERE t.isleaf AND t.level > 0 AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
        ORDER BY "to" NULLS LAST`.pipe(Effect.withSpan("DecisionRetention.partitions"))

      const upkeep = Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const created = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(${PARTITION_LOCK})`
          const existing = yield* partitions
          const missing = Array.from({ length: MONTHS_AHEAD }, (_, i) => monthStart(now, i)).flatMap((month) => {
            const range = uncovered(month, monthStart(month, 1), existing)
            return range === null ? [] : [{ name: partitionName(month), ...range }]
          })
          if (missing.length > 0) yield* sql`SELECT set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`
          for (const { name, from, to } of missing) {
            yield* sql.unsafe(`CREATE TABLE ${name} PARTITION OF decisions
              FOR VALUES FROM ('${new Date(from).toISOString()}') TO ('${new Date(to).toISOString()}')`)
          }
          return missing.map((partition) => partition.name)
        }))
        if (created.length > 0) yield* Effect.logInfo("decision partitions created", { partitions: created })
        return created
      }).pipe(Effect.withSpan("DecisionRetention.upkeep"))

      /** Marks where the workspace's chain starts once the decisions recorded before `upper` are gone. */
      const cutChain = Effect.fn("DecisionRetention.cutChain")(function*(scope: WorkspaceScope, upper: Date) {
        return yield* tenantSql.write(scope, Effect.gen(function*() {
          const tx = yield* ScopedSql
          const [chain] = yield* tx<{ pruned_seq: number }>`SELECT pruned_seq::float8 AS pruned_seq FROM ledger_chains
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid FOR UPDATE`
          const unchained = yield* tx`SELECT 1 FROM decisions
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND seq IS NULL
              AND recorded_at < ${upper} LIMIT 1`
          if (unchained.length > 0) return "unchained" as const
          if (chain === undefined) return null
          const [range] = yield* tx<{ first: number; last: number; hash: Uint8Array | null }>`
            SELECT lo.seq::float8 AS first, hi.seq::float8 AS last, hi.hash FROM
              (SELECT seq FROM decisions WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid
                AND seq IS NOT NULL AND recorded_at < ${upper} ORDER BY seq LIMIT 1) lo,
              (SELECT seq, hash FROM decisions WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid
                AND seq IS NOT NULL AND recorded_at < ${upper} ORDER BY seq DESC LIMIT 1) hi`
          if (range === undefined) return null
          // seq is gapless: the first and last numbers count the rows
          const decisions = range.last - range.first + 1
          if (range.last <= chain.pruned_seq) return { scope, decisions, pruned_seq: null } satisfies Cut
          const at = yield* Clock.currentTimeMillis
          // a chained decision without its hash was tampered with: the next one's link then fails in `ledger verify`
          const hash = range.hash === null ? GENESIS : Buffer.from(range.hash)
          // the current key is always held
          const mac = keys.mac(keys.current.id, pruneMacText(scope, range.last, hash, at))!
          yield* tx`UPDATE ledger_chains SET pruned_seq = ${range.last}, pruned_hash = decode(${hash.toString("hex")}, 'hex'),
              pruned_at = ${new Date(at)}, pruned_key = ${keys.current.id}, pruned_mac = decode(${mac.toString("hex")}, 'hex')
            WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
          return { scope, decisions, pruned_seq: range.last } satisfies Cut
        }))
      })

      /** Deletes what analytics derived from the workspace's decisions recorded before `upper` (no foreign keys). */
      const forgetDerived = Effect.fn("DecisionRetention.forgetDerived")(function*(scope: WorkspaceScope, upper: Date) {
        yield* tenantSql.write(scope, Effect.gen(function*() {
          const tx = yield* ScopedSql
          const { tenant_id, workspace_id } = scope
          // postings and document frequencies lose the decisions (the blocks holding them: one pass over the workspace's)
          yield* forgetPostings(
            scope,
            tx`SELECT d.ledger_id FROM decisions d
              WHERE d.tenant_id = ${tenant_id}::uuid AND d.workspace_id = ${workspace_id}::uuid AND d.recorded_at < ${upper}`,
            tx`SELECT DISTINCT b.lexeme, b.newest, b.head FROM search_posting_blocks b, ${tx.literal(ENTRIES)}
              WHERE b.tenant_id = ${tenant_id}::uuid AND b.workspace_id = ${workspace_id}::uuid
                AND u.ledger_id IN (SELECT ledger_id FROM gone)`
          )
          yield* tx`DELETE FROM decision_search s USING decisions d
            WHERE s.tenant_id = ${tenant_id}::uuid AND s.workspace_id = ${workspace_id}::uuid AND s.ledger_id = d.ledger_id
              AND d.tenant_id = ${tenant_id}::uuid AND d.workspace_id = ${workspace_id}::uuid AND d.recorded_at < ${upper}`
          yield* tx`DELETE FROM decision_prints p USING decisions d
            WHERE p.tenant_id = ${tenant_id}::uuid AND p.workspace_id = ${workspace_id}::uuid AND p.ledger_id = d.ledger_id
              AND d.tenant_id = ${tenant_id}::uuid AND d.workspace_id = ${workspace_id}::uuid AND d.recorded_at < ${upper}`
          yield* tx`DELETE FROM handoffs h WHERE h.tenant_id = ${tenant_id}::uuid AND h.workspace_id = ${workspace_id}::uuid
            AND EXISTS (SELECT 1 FROM decisions d WHERE d.ledger_id IN (h.producer_ledger_id, h.consumer_ledger_id)
              AND d.tenant_id = ${tenant_id}::uuid AND d.workspace_id = ${workspace_id}::uuid AND d.recorded_at < ${upper})`
        }))
      })

      /** Drops the partition; false when another process dropped it first. */
      const drop = Effect.fn("DecisionRetention.drop")(function*(name: string) {
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(${PARTITION_LOCK})`
          const [row] = yield* sql<{ present: boolean }>`SELECT to_regclass(${name}) IS NOT NULL AS present`
          if (row?.present !== true) return false
          yield* sql`SELECT set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`
          yield* sql`DROP TABLE ${sql(name)}`
          return true
        }))
      })

      const prune = Effect.fn("DecisionRetention.prune")(function*(retentionDays: number) {
        const cutoff = (yield* Clock.currentTimeMillis) - retentionDays * DAY_MS
        const expired = (yield* partitions).flatMap(({ name, to }) => (to !== null && to.getTime() <= cutoff ? [{ name, to }] : []))
        if (expired.length === 0) return []
        const workspaces = yield* tenantSql.control(ScopedSql.use((tx) =>
          tx<WorkspaceScope>`SELECT tenant_id, workspace_id FROM workspaces ORDER BY tenant_id, workspace_id`
        ))
        const pruned: Array<PrunedPartition> = []
        // oldest first: what is gone stays a prefix of every chain
        for (const { name, to } of expired) {
          const cuts: Array<Cut> = []
          for (const scope of workspaces) {
            const cut = yield* cutChain(scope, to)
            if (cut === "unchained") {
              yield* Effect.logWarning("decision partition kept until the chain backfill has chained its decisions", {
                partition: name,
                ...scope,
                markers: moved(cuts)
              })
              return pruned
            }
            if (cut !== null) cuts.push(cut)
          }
          for (const { scope } of cuts) yield* forgetDerived(scope, to)
          if (!(yield* drop(name))) continue
          const decisions = cuts.reduce((sum, cut) => sum + cut.decisions, 0)
          const markers = moved(cuts)
          yield* Metric.update(prunedDecisions, decisions)
          yield* Effect.logInfo("decision partition dropped", { partition: name, decisions, markers })
          pruned.push({ partition: name, decisions, markers })
        }
        return pruned
      })

      return DecisionRetention.of({ partitions, upkeep, prune })
    })
  )

  /**
   * Upkeep done before this layer is built (retried until it is: the builders it is provided to start after it), then
   * upkeep and pruning every hour, supervised; a failed round is logged and retried the next hour.
   */
  static readonly maintained = Layer.effectDiscard(Effect.gen(function*() {
    const retention = yield* DecisionRetention
    const { retentionDays } = yield* LedgerConfig
    yield* retention.upkeep.pipe(
      Effect.tapError((error) => Effect.logWarning("decision partitions not created yet; retrying", { error: error.message })),
      Effect.retry(RESTART),
      // the schedule never ends
      Effect.orDie
    )
    const round = Effect.gen(function*() {
      yield* retention.upkeep
      const pruned = Option.isSome(retentionDays) ? yield* retention.prune(retentionDays.value) : []
      return { partitions: pruned.length, decisions: pruned.reduce((sum, partition) => sum + partition.decisions, 0) }
    })
    yield* sweepEvery("decision retention", round, ROUND_EVERY)
  }))
}
