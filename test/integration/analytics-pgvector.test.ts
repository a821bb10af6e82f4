/**
 * Similarity search with pgvector: PGlite with its pgvector extension (the local PostgreSQL has none), served over a
 * socket to the same SQL client. The migration finds the extension and creates the HNSW indexes; search then takes
 * its candidates from the nearest neighbours instead of full text, and finds the same paraphrases.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { vector } from "@electric-sql/pglite-pgvector"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { type WorkloadPipeline, workloadPipeline } from "../../bench/workload/pipeline.ts"
import { PARAPHRASE_QUERY, planWorkload } from "../../bench/workload/scenario.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"

/** PGlite with pgvector on a loopback port, for the life of the scope. */
const pgliteWithVector = Effect.acquireRelease(
  Effect.promise(async () => {
    const db = await PGlite.create({ extensions: { vector } })
    // one connection (and a pool of one below): PGlite is a single backend, and its socket server interleaves the
    // extended-protocol messages of concurrent connections
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 })
    await server.start()
    return { db, server, url: `postgres://postgres@${server.getServerConn()}/postgres` }
  }),
  ({ db, server }) => Effect.promise(async () => {
    await server.stop()
    await db.close()
  })
)

class Fixture extends Context.Service<Fixture, { readonly pipeline: WorkloadPipeline }>()("test/AnalyticsPgvectorFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const pglite = yield* pgliteWithVector
    // one builder consumer: PGlite serves one statement at a time, and its socket server does not keep concurrent
    // extended-protocol exchanges of several connections apart
    const pipeline = yield* workloadPipeline({
      backend: "pglite",
      settings: { databaseUrl: Option.some(Redacted.make(pglite.url)), databasePoolSize: 1, builderConsumers: 1 }
    })
    return { pipeline }
  })
)

describe("similarity search with pgvector (PGlite)", () => {
  layer(FixtureLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("the HNSW indexes exist and nearest neighbours find the paraphrases", () =>
      Effect.gen(function*() {
        const { pipeline } = yield* Fixture
        const full = planWorkload("planted")
        const tenant = yield* pipeline.run(
          { ...full, calls: full.calls.filter((c) => c.pattern === "paraphrase" || c.key.startsWith("base/reporter/")) },
          "pgvector"
        )
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        const indexes = yield* tenantSql.read(tenant.principal, ScopedSql.use((sql) =>
          sql<{ indexname: string }>`SELECT indexname FROM pg_indexes WHERE indexname LIKE 'decision_search_%hnsw' ORDER BY 1`
        ))
        assert.deepStrictEqual(indexes.map((i) => i.indexname), ["decision_search_embedding_hnsw", "decision_search_local_hnsw"])

        const paraphrases = [...tenant.ledgerIds("paraphrase")].sort()
        const byText = yield* pipeline.query.searchSimilarDecisions(tenant.principal, { text: PARAPHRASE_QUERY })
        assert.strictEqual(byText.candidates, "pgvector")
        assert.deepStrictEqual(byText.data.filter((d) => d.score >= 0.6).map((d) => d.ledger_id).sort(), paraphrases)
        const byId = yield* pipeline.query.searchSimilarDecisions(tenant.principal, { ledger_id: paraphrases[0]!, min_score: 0.6 })
        assert.deepStrictEqual(byId.data.map((d) => d.ledger_id).sort(), paraphrases.slice(1))
        // filters still apply to nearest neighbours
        const filtered = yield* pipeline.query.searchSimilarDecisions(tenant.principal, { text: PARAPHRASE_QUERY, agent_id: "reviewer" })
        assert.deepStrictEqual([...new Set(filtered.data.map((d) => d.agent_id))], ["reviewer"])
      }))
  })
})
