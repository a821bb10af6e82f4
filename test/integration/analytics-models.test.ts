/**
 * Analytics with models configured (LEDGER_EMBEDDINGS_MODEL, LEDGER_SUMMARY_MODEL), called through the gateway's
 * provider routes against the fake providers: decisions get real (fake-model) embeddings — from the background
 * embedder — and similarity search uses them; sessions get model-written summaries; a decision the embeddings model
 * refuses keeps its local vector, and while the model is away decisions are still found by their words.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { type WorkloadPipeline, workloadPipeline, type WorkloadTenant } from "../../bench/workload/pipeline.ts"
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

    it.effect("a decision the model refuses keeps its local vector and the rest are embedded; while the model is away nothing waits", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        // the fake embeddings endpoint fails with status N on an input carrying [[embeddings-error:N]]
        const poison = (key: string, status: number): WorkloadCall => ({
          ...planWorkload("planted").calls.find((c) => c.pattern === "paraphrase")!,
          key,
          messages: [{ role: "user", content: `Summarize the release notes of the mobile app. [[embeddings-error:${status}]]` }]
        })
        const state = (tenant: WorkloadTenant) =>
          tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
            sql<{ n: number; local: number; poison_local: boolean }>`SELECT count(*)::int AS n,
              count(*) FILTER (WHERE embedding IS NULL)::int AS local,
              bool_and(embedding IS NULL) FILTER (WHERE ledger_id = ${tenant.ledgerIds("poison")[0]!}::uuid) AS poison_local
              FROM decision_search`
          )).pipe(Effect.map((rows) => rows[0]!))

        // refused (400): passed, with its local vector; every other decision is embedded
        const refused = yield* pipeline.run(smallWorkload([poison("poison", 400)]), "refused")
        assert.deepStrictEqual(yield* state(refused), { n: refused.results.length, local: 1, poison_local: true })

        // away (503): the embedder waits (its cursor stays); every decision is materialised and found by its words
        const away = yield* pipeline.run(smallWorkload([poison("poison", 503)]), "away")
        const waiting = yield* state(away)
        assert.strictEqual(waiting.n, away.results.length)
        assert.isTrue(waiting.poison_local)
        const found = yield* pipeline.query.searchSimilarDecisions(away.principal, { text: "release notes of the mobile app" })
        assert.strictEqual(found.data[0]?.ledger_id, away.ledgerIds("poison")[0]!)
        assert.strictEqual(found.data[0]?.match, "exact")
      }))
  })
})
