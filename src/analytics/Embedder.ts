/**
 * The background embedder: when an embeddings model is configured (LEDGER_EMBEDDINGS_MODEL), a supervised fiber gives
 * every search row a model embedding, so similarity by meaning uses it. Nothing waits for it: the materialiser writes
 * the lexical document and the local vector, and a decision is found by its words before (and without) its embedding.
 *
 * Per workspace it follows the search rows in materialisation order (`decision_search.seq`) from its own cursor
 * (`analytics_progress.embedded_seq`, kept with the model it embedded for: another model starts over). While the model
 * is away the fiber waits with backoff and resumes where it stopped; a decision the model refuses (a 4xx answer to
 * it alone) keeps its local vector and is passed.
 */
import { Context, Effect, Layer, Metric, Option } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { backoff, every } from "../supervision/supervise.ts"
import { analyseDecision } from "./analyse.ts"
import { allWorkspaces, claimWorkspace } from "./lease.ts"
import { readDecisions } from "./materialize/cursor.ts"
import { type ModelCallFailed, ModelCalls } from "./ModelCalls.ts"
import { yieldingToIngest } from "./yieldToIngest.ts"

/** Decisions per embeddings call. */
const BATCH = 64
/** Batches per workspace per round. */
const BATCHES_PER_ROUND = 10

const decisionsEmbedded = Metric.counter("ledger_analytics_decisions_embedded_total", {
  description: "Search rows given a model embedding by the background embedder",
  incremental: true
})
const decisionsNotEmbedded = Metric.counter("ledger_analytics_embeddings_refused_total", {
  description: "Decisions the embeddings model refused (a 4xx to them alone); they keep their local vectors",
  incremental: true
})

export class Embedder extends Context.Service<Embedder, {
  /** One round over the workspaces whose analytics lease this process holds; yields rows embedded. */
  readonly round: Effect.Effect<number, DatabaseUnavailable | ModelCallFailed>
  /** Embeds every search row so far, once (tests, tools): the model's failures are logged, not retried. */
  readonly catchUp: Effect.Effect<number, DatabaseUnavailable>
}>()("ledger/analytics/Embedder") {
  static readonly layer = Layer.effect(
    Embedder,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const models = yield* ModelCalls
      const workspaces = allWorkspaces(tenantSql)

      /** The rows after the cursor, with their decisions' texts. */
      const pending = Effect.fnUntraced(function*(model: string) {
        const sql = yield* ScopedSql
        const [progress] = yield* sql<{ seq: number; model: string | null }>`
          SELECT embedded_seq::float8 AS seq, embedded_model AS model FROM analytics_progress`
        const from = progress?.model === model ? progress.seq : 0
        const rows = yield* sql<{ seq: number; ledger_id: string }>`
          SELECT seq::float8 AS seq, ledger_id::text AS ledger_id FROM decision_search WHERE seq > ${from} ORDER BY seq LIMIT ${BATCH}`
        const decisions = yield* readDecisions(rows.map((row) => row.ledger_id))
        const texts = new Map(decisions.map((d) => [d.ledger_id, analyseDecision(d).searchText]))
        return rows.map((row) => ({ ...row, text: texts.get(row.ledger_id) ?? "" }))
      })

      /**
       * Embeds a batch; when the call fails, each row alone: a row the model refuses (a 4xx) is passed, any other
       * failure means the model is away and the batch waits.
       */
      const embedBatch = (texts: ReadonlyArray<string>) =>
        models.embed(texts).pipe(
          Effect.map((vectors): Array<Array<number> | null> => vectors),
          Effect.catch((error) =>
            texts.length === 1 && error.refused !== true
              ? Effect.fail(error)
              : Effect.forEach(texts, (text) =>
                models.embed([text]).pipe(
                  Effect.map(([vector]) => vector ?? null),
                  Effect.catch((single) => (single.refused === true ? Effect.succeed(null) : Effect.fail(single)))
                ))
          )
        )

      /** One batch of a workspace; yields rows read (0: caught up). */
      const batch = Effect.fnUntraced(function*(scope: WorkspaceScope, model: string) {
        const rows = yield* tenantSql.write(scope, pending(model))
        if (rows.length === 0) return 0
        const vectors = yield* embedBatch(rows.map((row) => row.text))
        const embedded = rows.flatMap((row, i) => (vectors[i] === null ? [] : [{ ledger_id: row.ledger_id, embedding: vectors[i] }]))
        yield* tenantSql.write(scope, Effect.gen(function*() {
          const sql = yield* ScopedSql
          if (embedded.length > 0) {
            yield* sql`UPDATE decision_search s SET embedding = t.embedding, embedding_model = ${model}
              FROM jsonb_to_recordset(${JSON.stringify(embedded)}::jsonb) AS t(ledger_id uuid, embedding real[])
              WHERE s.ledger_id = t.ledger_id`
          }
          yield* sql`INSERT INTO analytics_progress (tenant_id, workspace_id, embedded_seq, embedded_model)
            VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, ${rows.at(-1)!.seq}, ${model})
            ON CONFLICT (tenant_id, workspace_id) DO UPDATE
            SET embedded_seq = EXCLUDED.embedded_seq, embedded_model = EXCLUDED.embedded_model, updated_at = now()`
        }))
        yield* Metric.update(decisionsEmbedded, embedded.length)
        yield* Metric.update(decisionsNotEmbedded, rows.length - embedded.length)
        return rows.length
      })

      /**
       * Batches of each workspace until caught up (at most `batches` each); a workspace whose model call fails is left
       * for later and the others go on; the first failure is returned after them.
       */
      const pass = Effect.fnUntraced(function*(batches: number) {
        if (Option.isNone(models.embeddingsModel)) return 0
        const model = models.embeddingsModel.value
        let total = 0
        let failed: ModelCallFailed | undefined
        for (const scope of yield* workspaces) {
          if (!(yield* claimWorkspace(tenantSql, scope))) continue
          const drained = Effect.gen(function*() {
            for (let i = 0; i < batches; i++) {
              const read = yield* batch(scope, model)
              total += read
              if (read < BATCH) return
            }
          })
          yield* drained.pipe(Effect.catchTag("ModelCallFailed", (error) => Effect.sync(() => void (failed ??= error))))
        }
        if (failed !== undefined) return yield* failed
        return total
      })

      const round = pass(BATCHES_PER_ROUND)
      const catchUp = pass(Number.MAX_SAFE_INTEGER).pipe(
        Effect.catchTag("ModelCallFailed", (error) =>
          Effect.logWarning("embeddings model unavailable; decisions keep their local vectors for now", { error: error.message }).pipe(Effect.as(0))
        )
      )

      return Embedder.of({ round: round.pipe(Effect.withSpan("Embedder.round")), catchUp: catchUp.pipe(Effect.withSpan("Embedder.catchUp")) })
    })
  )

  /**
   * The supervised fiber (only with an embeddings model): a round every LEDGER_ANALYTICS_INTERVAL_MS, yielding to
   * ingest; while the model is away, the round waits with backoff and resumes where it stopped.
   */
  static readonly fiber = Layer.effectDiscard(Effect.gen(function*() {
    const embedder = yield* Embedder
    const models = yield* ModelCalls
    const { analytics } = yield* LedgerConfig
    if (Option.isNone(models.embeddingsModel)) return
    const patient = embedder.round.pipe(
      Effect.tapError((error) =>
        error._tag === "ModelCallFailed"
          ? Effect.logWarning("embeddings model unavailable; retrying with backoff", { error: error.message })
          : Effect.void
      ),
      Effect.retry({ while: (error) => error._tag === "ModelCallFailed", schedule: backoff("1 second", "1 minute") })
    )
    yield* every("analytics-embedder", yield* yieldingToIngest("analytics-embedder", () => patient), analytics.intervalMs)
  }))
}
