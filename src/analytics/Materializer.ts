/**
 * The materialiser: a supervised fiber that turns decisions the builder committed into analytics — search documents
 * and vectors, subjects and evidence sources, graph edges, hourly rollups, features, session summaries — so the
 * builder never needs to know about analytics.
 *
 * Per workspace it reads the decisions after its keyset cursor (`built_at`, `ledger_id`) — and, every few rounds, the
 * moments just before it, for builder transactions that committed late — and writes everything for a batch in one
 * transaction as the builder role (RLS-bound) under a per-workspace advisory lock. Idempotent by construction: a decision counts once —
 * the `decision_search` row it inserts (`ON CONFLICT DO NOTHING RETURNING`) gates every increment — and per-session
 * data (features, summaries) is recomputed from decision-level rows by a deferred session pass, which also absorbs
 * the builder merging two sessions into one.
 *
 * This file holds the service (batches, rounds, the session pass's cadence); the statements it writes with are in
 * `materialize/`, one module per thing written.
 */
import { Clock, Context, Effect, Layer, Metric, Option } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { analyseDecision, type DecisionAnalysis } from "./analyse.ts"
import { allWorkspaces, analyticsLockKey, claimWorkspace } from "./lease.ts"
import { advanceCursor, type BuildCursor, changedSinceRead, type ReadDecision, readBatch, readLateBatch } from "./materialize/cursor.ts"
import { writeHandoffs } from "./materialize/handoffs.ts"
import { repairMergedSessions } from "./materialize/merges.ts"
import { writeRollups } from "./materialize/rollups.ts"
import { insertSearchRows } from "./materialize/search.ts"
import { markDirty, sessionPass, writeSharedExecutions } from "./materialize/sessions.ts"
import { writeCitations } from "./materialize/sources.ts"
import { addSessionSubjects, writeMentions } from "./materialize/subjects.ts"
import { ModelCalls } from "./ModelCalls.ts"
import { modelSummaries, writeModelSummaries } from "./Summaries.ts"
import { every } from "../supervision/supervise.ts"
import { yieldEvery } from "../supervision/yielding.ts"
import { yieldingToIngest } from "./yieldToIngest.ts"
import type { WorkspaceScope } from "../domain/principal.ts"

/** Batches per workspace per round (5,000 decisions), so one busy workspace does not starve the others. */
const BATCHES_PER_ROUND = 10
/**
 * Workspaces materialised at once in a process: each batch's statements run in PostgreSQL while the process analyses
 * another batch, so a catch-up uses two cores instead of one (bench/notes/analytics.md, "Analytics catch-up").
 */
const WORKSPACES_AT_ONCE = 2
/** How often sessions the builder merged away are looked for. */
const REPAIR_EVERY_ROUNDS = 15
/** While a backlog drains, features and summaries are recomputed at most this often per workspace. */
const SESSION_PASS_EVERY_MS = 10_000

const decisionsMaterialized = Metric.counter("ledger_analytics_decisions_materialized_total", {
  description: "Decisions the analytics materialiser has processed",
  incremental: true
})

export interface RoundOutcome {
  /** decisions materialised */
  readonly materialized: number
  /** a workspace still has decisions to materialise: its batches this round were all full */
  readonly behind: boolean
}

const IDLE: RoundOutcome = { materialized: 0, behind: false }

/** A batch's decisions as read, and their analyses. */
interface Analysed {
  readonly rows: ReadonlyArray<ReadDecision>
  readonly analyses: ReadonlyArray<DecisionAnalysis>
}

export class Materializer extends Context.Service<Materializer, {
  /**
   * One pass over every workspace whose analytics lease this process holds, a bounded number of batches each (what
   * the fiber runs); a workspace's batches stop early once `stopEarly` says so (asked between them), leaving it behind.
   */
  readonly round: (stopEarly?: Effect.Effect<boolean>) => Effect.Effect<RoundOutcome, DatabaseUnavailable>
  /** Materialises every decision built so far in every workspace (tests, tools); yields how many were new. */
  readonly catchUp: Effect.Effect<number, DatabaseUnavailable>
}>()("ledger/analytics/Materializer") {
  static readonly layer = Layer.effect(
    Materializer,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const models = yield* ModelCalls
      const keepModelSummaries = Option.isSome(models.summaryModel)
      let rounds = 0

      const workspaces = allWorkspaces(tenantSql)

      const write = <A, E>(scope: WorkspaceScope, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.write(
          scope,
          Effect.andThen(
            // one materialiser per workspace at a time, across processes. Commits need not wait for the WAL flush:
            // a crash loses the last batches whole, cursor included, and they are materialised again
            ScopedSql.use((sql) =>
              sql`SELECT pg_advisory_xact_lock(hashtext(${analyticsLockKey(scope)})),
                set_config('synchronous_commit', 'off', true)`
            ),
            effect
          )
        )

      /**
       * A batch's decisions analysed, handing the event loop back every few: the builder's consumers share it, and a
       * batch of 500 is ~25 ms of analysis, which they would otherwise wait out holding their locks.
       */
      const analysed = Effect.fnUntraced(function*(rows: ReadonlyArray<ReadDecision>) {
        const analyses: Array<DecisionAnalysis> = []
        for (const [index, row] of rows.entries()) {
          analyses.push(analyseDecision(row))
          yield* yieldEvery(index)
        }
        return { rows, analyses } satisfies Analysed
      })

      /**
       * Writes one batch's analytics in one transaction; `advance` also moves the workspace's cursor to it. Yields how
       * many of its decisions were new.
       */
      const store = Effect.fnUntraced(function*(scope: WorkspaceScope, { analyses, rows }: Analysed, advance?: BuildCursor) {
        const fresh = yield* write(scope, Effect.gen(function*() {
          // a decision erased since it was read comes again with its tombstone: left to that read
          const changed = yield* changedSinceRead(rows)
          const fresh = yield* insertSearchRows(scope, analyses.filter((a) => !changed.has(a.decision.ledger_id)))
          if (fresh.length > 0) {
            yield* writeRollups(scope, fresh)
            yield* writeMentions(scope, fresh)
            yield* writeCitations(scope, fresh)
            yield* writeHandoffs(scope, fresh)
            yield* writeSharedExecutions(scope, fresh)
            yield* addSessionSubjects(scope, fresh, [])
            yield* markDirty([...new Set(fresh.map((a) => a.decision.session_id))])
          }
          if (advance !== undefined) yield* advanceCursor(scope, advance)
          return fresh
        }))
        yield* Metric.update(decisionsMaterialized, fresh.length)
        return fresh.length
      })

      /** The batch after `after` (by default the stored cursor), read and analysed. */
      const nextBatch = (scope: WorkspaceScope, after?: BuildCursor) =>
        tenantSql.write(scope, readBatch(after)).pipe(
          Effect.flatMap((batch) => Effect.map(analysed(batch.rows), (analysis) => ({ ...batch, ...analysis })))
        )

      /**
       * Batches from the workspace's cursor on, until it is caught up, `limit` batches are written or `stopEarly` says
       * so before the next one. Each batch is read and analysed while the one before it is written — the cursor of a
       * read batch is known before its write commits —, so the process's analysis and PostgreSQL's writes overlap even
       * in a workspace alone. The writes stay one after another: a batch's hand-offs look for the prints of the batches
       * before it.
       */
      const forward = Effect.fnUntraced(function*(scope: WorkspaceScope, limit = Infinity, stopEarly: Effect.Effect<boolean> = Effect.succeed(false)) {
        let total = 0
        let batches = 0
        let batch = yield* nextBatch(scope)
        for (;;) {
          if (batch.last === undefined) return { total, caughtUp: true }
          batches++
          const ahead = batch.more && batches < limit && !(yield* stopEarly) ? nextBatch(scope, batch.last) : Effect.succeed(undefined)
          const [fresh, next] = yield* Effect.all([store(scope, batch, batch.last), ahead], { concurrency: 2 })
          total += fresh
          if (!batch.more) return { total, caughtUp: true }
          if (next === undefined) return { total, caughtUp: false }
          batch = next
        }
      })

      /** One session pass, then the model summaries it made due (the model is called outside any transaction). */
      const passSessions = Effect.fnUntraced(function*(scope: WorkspaceScope) {
        const { sessions, states } = yield* write(scope, sessionPass(scope, keepModelSummaries))
        yield* Option.match(models.summaryModel, {
          onNone: () => Effect.void,
          onSome: (model) =>
            modelSummaries(states).pipe(
              Effect.provideService(ModelCalls, models),
              Effect.flatMap((written) => write(scope, writeModelSummaries(model, written)))
            )
        })
        return sessions
      })

      const lastPass = new Map<string, number>()
      /** Late commits and merged sessions: the two things the cursor alone does not see. */
      const sweep = Effect.fnUntraced(function*(scope: WorkspaceScope) {
        let total = 0
        for (;;) {
          const { more, rows } = yield* tenantSql.write(scope, readLateBatch)
          if (rows.length > 0) total += yield* store(scope, yield* analysed(rows))
          if (!more) break
        }
        yield* write(scope, repairMergedSessions(scope))
        return total
      })

      const workspaceRound = Effect.fnUntraced(function*(scope: WorkspaceScope, repair: boolean, stopEarly: Effect.Effect<boolean>) {
        const swept = repair ? yield* sweep(scope) : 0
        const { caughtUp, total } = yield* forward(scope, BATCHES_PER_ROUND, stopEarly)
        // while a backlog drains, sessions are recomputed at most every SESSION_PASS_EVERY_MS
        const key = `${scope.tenant_id}/${scope.workspace_id}`
        const now = yield* Clock.currentTimeMillis
        const last = lastPass.get(key)
        // a workspace's first pass is never held back (under a test clock, `now` can be below the interval)
        if (caughtUp || last === undefined || now - last >= SESSION_PASS_EVERY_MS) {
          lastPass.set(key, now)
          yield* passSessions(scope)
        }
        return { materialized: swept + total, behind: !caughtUp }
      })

      /** Runs `each` over every workspace, WORKSPACES_AT_ONCE at a time. */
      const acrossWorkspaces = <A, E>(each: (scope: WorkspaceScope) => Effect.Effect<A, E>) =>
        Effect.flatMap(workspaces, (scopes) => Effect.forEach(scopes, each, { concurrency: WORKSPACES_AT_ONCE }))

      const round = (stopEarly: Effect.Effect<boolean> = Effect.succeed(false)) => Effect.suspend(() => {
        const repair = rounds++ % REPAIR_EVERY_ROUNDS === 0
        return acrossWorkspaces((scope) =>
          Effect.flatMap(claimWorkspace(tenantSql, scope), (held) => held ? workspaceRound(scope, repair, stopEarly) : Effect.succeed(IDLE))
        ).pipe(Effect.map((outcomes): RoundOutcome => ({
          materialized: outcomes.reduce((sum, outcome) => sum + outcome.materialized, 0),
          behind: outcomes.some((outcome) => outcome.behind)
        })))
      })

      const catchUp = acrossWorkspaces((scope) =>
        Effect.gen(function*() {
          let { total } = yield* forward(scope)
          total += yield* sweep(scope)
          let passed: number
          do passed = yield* passSessions(scope)
          while (passed > 0)
          return total
        })
      ).pipe(
        Effect.map((totals) => totals.reduce((sum, n) => sum + n, 0)),
        Effect.withSpan("Materializer.catchUp")
      )

      return Materializer.of({ round: (stopEarly) => round(stopEarly).pipe(Effect.withSpan("Materializer.round")), catchUp })
    })
  )

  /**
   * The supervised fiber: a round every LEDGER_ANALYTICS_INTERVAL_MS for the life of the layer, yielding to ingest —
   * and while a round leaves a workspace behind, the next one at once (a backlog is not drained in steps of
   * BATCHES_PER_ROUND with the interval between them).
   */
  static readonly fiber = Layer.effectDiscard(Effect.gen(function*() {
    const materializer = yield* Materializer
    const { analytics } = yield* LedgerConfig
    const round = yield* yieldingToIngest("analytics-materializer", materializer.round)
    yield* every("analytics-materializer", round.pipe(Effect.repeat({ while: (outcome) => outcome?.behind === true })), analytics.intervalMs)
  }))
}
