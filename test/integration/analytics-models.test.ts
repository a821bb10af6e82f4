/**
 * Analytics with models configured (LEDGER_EMBEDDINGS_MODEL, LEDGER_SUMMARY_MODEL), called through the gateway's
 * provider routes against the fake providers: decisions get real (fake-model) embeddings and similarity search uses
 * them; sessions get model-written summaries; when the embeddings call fails, decisions keep their local vectors.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { type WorkloadPipeline, workloadPipeline } from "../../bench/workload/pipeline.ts"
import { planWorkload, type Workload, type WorkloadCall } from "../../bench/workload/scenario.ts"
import { defaultAnalyticsSettings } from "../../src/config/LedgerConfig.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"

const EMBEDDINGS_MODEL = "openai/text-embedding-3-small"
const SUMMARY_MODEL = "openai/gpt-4o-mini"

class Fixture extends Context.Service<Fixture, { readonly pipeline: WorkloadPipeline }>()("test/AnalyticsModelsFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.map(
    workloadPipeline({
      settings: {
        analytics: {
          ...defaultAnalyticsSettings,
          embeddingsModel: Option.some(EMBEDDINGS_MODEL),
          summaryModel: Option.some(SUMMARY_MODEL),
          modelApiKey: Option.some(Redacted.make("sk-analytics-test"))
        }
      }
    }),
    (pipeline) => ({ pipeline })
  )
)

/** The paraphrases and the reviewer's everyday sessions of the planted workload (plus `extra` calls). */
const smallWorkload = (extra: ReadonlyArray<WorkloadCall> = []): Workload => {
  const full = planWorkload("planted")
  return { ...full, calls: [...full.calls.filter((c) => c.pattern === "paraphrase" || c.key.startsWith("base/reviewer/")), ...extra] }
}

describe("analytics with an embeddings model and a summary model", () => {
  layer(FixtureLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("embeddings are requested through the provider route and drive similarity search", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const tenant = yield* pipeline.run(smallWorkload(), "embeddings")
        const requests = pipeline.stack.fake.requests.filter((r) => r.path === "/v1/embeddings")
        assert.isAbove(requests.length, 0)
        for (const request of requests) {
          assert.strictEqual(request.body.model, "text-embedding-3-small")
          assert.strictEqual(request.body.dimensions, 256)
          assert.strictEqual(request.headers.authorization, "Bearer sk-analytics-test")
        }
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const [row] = yield* tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ n: number; embedded: number }>`SELECT count(*)::int AS n,
            count(*) FILTER (WHERE embedding_model = ${EMBEDDINGS_MODEL} AND cardinality(embedding) = 256)::int AS embedded
            FROM decision_search`
        ))
        assert.deepStrictEqual(row, { n: tenant.results.length, embedded: tenant.results.length })

        const paraphrases = [...tenant.ledgerIds("paraphrase")].sort()
        const byText = yield* pipeline.query.searchSimilarDecisions(tenant.principal, {
          text: "How can the webhook-gateway signing keys be rotated with no downtime?",
          min_score: 0
        })
        assert.strictEqual(byText.representation, `embeddings:${EMBEDDINGS_MODEL}`)
        assert.deepStrictEqual(byText.data.slice(0, 3).map((d) => d.ledger_id).sort(), paraphrases)
        const byId = yield* pipeline.query.searchSimilarDecisions(tenant.principal, { ledger_id: paraphrases[0]!, min_score: 0 })
        assert.strictEqual(byId.representation, `embeddings:${EMBEDDINGS_MODEL}`)
        assert.deepStrictEqual(byId.data.slice(0, 2).map((d) => d.ledger_id).sort(), paraphrases.slice(1))
      }))

    it.effect("sessions get summaries written by the summary model", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const tenant = yield* pipeline.run(smallWorkload(), "summaries")
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const rows = yield* tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ summary: string; source: string }>`SELECT s.summary, a.summary_source AS source
            FROM sessions s JOIN analytics_sessions a ON a.session_id = s.session_id`
        ))
        assert.isAbove(rows.length, 0)
        for (const row of rows) {
          assert.strictEqual(row.source, `model:${SUMMARY_MODEL}`)
          // the fake model answers "Fake answer to: <the start of its input>"
          assert.match(row.summary, /^Fake answer to: Opened with: /)
        }
        const chat = pipeline.stack.fake.requests.filter((r) =>
          r.path === "/v1/chat/completions" && r.body.model === "gpt-4o-mini" && r.body.messages?.[0]?.content?.includes("audit log")
        )
        assert.isAtLeast(chat.length, rows.length)
      }))

    it.effect("a failed embeddings call leaves local vectors; nothing is lost", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        // the fake embeddings endpoint fails on an input carrying [[embeddings-error:503]]
        const poison: WorkloadCall = {
          ...planWorkload("planted").calls.find((c) => c.pattern === "paraphrase")!,
          key: "embeddings-error",
          messages: [{ role: "user", content: "Summarize the release notes of the mobile app. [[embeddings-error:503]]" }]
        }
        const tenant = yield* pipeline.run(smallWorkload([poison]), "fallback")
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const [row] = yield* tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ n: number; local: number }>`SELECT count(*)::int AS n, count(*) FILTER (WHERE embedding IS NULL)::int AS local
            FROM decision_search`
        ))
        // every decision stays searchable; the batch whose embeddings call failed keeps its local vectors (how the
        // builder splits decisions into batches depends on timing, so other batches may have real embeddings)
        assert.strictEqual(row!.n, tenant.results.length)
        assert.isAtLeast(row!.local, 1)
        const found = yield* pipeline.query.searchSimilarDecisions(tenant.principal, { ledger_id: tenant.ledgerIds("paraphrase")[0]! })
        assert.isAbove(found.data.length, 0)
      }))
  })
})
