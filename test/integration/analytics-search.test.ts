/**
 * search_similar_decisions finds what is literally there first, then by meaning (src/analytics/Similarity.ts):
 * - a decision holding the query as written ranks first with default settings, wherever it holds it (the ask or the
 *   answer), whatever the words (stopwords too), above one holding an inflected form of it (a phrase match), above
 *   one holding every word out of order, above decisions related by meaning only;
 * - scores fall in their documented tiers, and the default min_score drops unrelated decisions;
 * - when every word of the query is common, the candidates by meaning are the newest decisions holding any of them;
 * - a decision built but not analysed yet is found by its words;
 * - a restricted member finds a phrase among its own decisions only.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { type WorkloadPipeline, workloadPipeline } from "../../bench/workload/pipeline.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { capture, completion, request } from "../fixtures/captures/index.ts"
import { insertDecisions, seedDecision } from "../support/seed.ts"

const START = Date.UTC(2026, 10, 2, 8)
const FILLER_ASK = "The nightly export job failed again with a timeout while writing to the warehouse. Please look into it."
const FILLER_ANSWER = "The failure comes from the connection pool running out of connections. I would raise the pool size and retry."

class Fixture extends Context.Service<Fixture, {
  readonly pipeline: WorkloadPipeline
  /** seeds decisions (ask, answer) for a member; materialised unless told not to; yields their ledger ids */
  seed(
    tenant: string,
    calls: ReadonlyArray<{ readonly ask: string; readonly answer: string; readonly user?: "member" | "restricted" }>,
    options?: { readonly analyse?: boolean }
  ): Effect.Effect<{ readonly ids: ReadonlyArray<string>; readonly member: Principal; readonly restricted: Principal }, unknown>
}>()("test/AnalyticsSearchFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const pipeline = yield* workloadPipeline()
    const credentials = Context.get(pipeline.stack.context, Credentials)
    const authenticator = Context.get(pipeline.stack.context, Authenticator)
    const tenantSql = Context.get(pipeline.stack.context, TenantSql)
    const materializer = Context.get(pipeline.stack.context, Materializer)
    let at = START
    const seed: Fixture["Service"]["seed"] = (tenant, calls, options) =>
      Effect.gen(function*() {
        const owner = yield* credentials.bootstrap({ tenant, workspace: "main", email: `owner@${tenant}.test`, role: "member" })
        const reader = yield* credentials.bootstrap({ tenant, workspace: "main", email: `reader@${tenant}.test`, role: "restricted" })
        const member = yield* authenticator.authenticate(owner.pat, "pat")
        const restricted = yield* authenticator.authenticate(reader.pat, "pat")
        const rows = calls.map((call) => {
          at += 60_000
          const who = call.user === "restricted" ? restricted : member
          return seedDecision(
            capture({
              tenant_id: who.tenant_id,
              workspace_id: who.workspace_id,
              user_id: who.user_id,
              key_id: Crypto.randomUUID(),
              ledger_id: uuidv7(at),
              agent_id: "searcher",
              agent_name: null,
              request: request([{ role: "system", content: "You are a careful engineer." }, { role: "user", content: call.ask }]),
              response: completion({ content: call.answer }),
              usage: { prompt_tokens: 200, completion_tokens: 80, total_tokens: 280 },
              started_at: at,
              first_token_at: at + 300,
              ended_at: at + 1_200
            }),
            uuidv7(at)
          )
        })
        yield* insertDecisions(rows).pipe(Effect.provideService(TenantSql, tenantSql))
        if (options?.analyse ?? true) yield* materializer.catchUp
        return { ids: rows.map((row) => row.capture.ledger_id), member, restricted }
      })
    return { pipeline, seed }
  })
)

describe("similar decisions: exact phrases first, then meaning", () => {
  layer(FixtureLive, { timeout: 180_000, excludeTestServices: true })((it) => {
    it.effect("the decision holding the query ranks first, in tiers: as written, stemmed, every word, by meaning", () =>
      Effect.gen(function*() {
        const { pipeline, seed } = yield* Fixture
        const { ids, member } = yield* seed("tiers", [
          { ask: `${FILLER_ASK} Note: the provider depends on the ledger cache.`, answer: FILLER_ANSWER },
          { ask: FILLER_ASK, answer: `${FILLER_ANSWER} Our providers depend on the ledger cache too.` },
          { ask: FILLER_ASK, answer: `${FILLER_ANSWER} It depends on which provider holds the cache.` },
          { ask: "How do I rotate the webhook signing keys?", answer: "Rotate them one at a time with an overlap window." },
          // stopwords only, in the answer
          { ask: FILLER_ASK, answer: `${FILLER_ANSWER} We will do it each until the queue drains.` },
          ...Array.from({ length: 20 }, (_, i) => ({ ask: `${FILLER_ASK} Ticket OPS-${100 + i}.`, answer: FILLER_ANSWER }))
        ])
        const search = (text: string) => pipeline.query.searchSimilarDecisions(member, { text })

        const found = yield* search("provider depends")
        assert.deepStrictEqual(found.data.slice(0, 3).map((d) => [d.ledger_id, d.match]), [
          [ids[0]!, "exact"],
          [ids[1]!, "phrase"],
          [ids[2]!, "all_terms"]
        ])
        const [exact, phrase, allTerms] = found.data
        assert.isAtLeast(exact!.score, 0.95)
        assert.isTrue(phrase!.score >= 0.9 && phrase!.score < 0.95, `${phrase!.score}`)
        assert.isTrue(allTerms!.score >= 0.5 && allTerms!.score < 0.9, `${allTerms!.score}`)
        // the rest hold neither word: by meaning only, below the default cut
        assert.isTrue(found.data.slice(3).every((d) => d.match === "meaning" && d.score >= 0.3 && d.score < 0.9))
        assert.notInclude(found.data.map((d) => d.ledger_id), ids[3]!)

        const stopwords = yield* search("each until")
        assert.strictEqual(stopwords.data[0]?.ledger_id, ids[4]!)
        assert.strictEqual(stopwords.data[0]?.match, "exact")

        // case and spacing aside
        const spaced = yield* search("  The  PROVIDER depends ")
        assert.strictEqual(spaced.data[0]?.ledger_id, ids[0]!)
        assert.strictEqual(spaced.data[0]?.match, "exact")

        // min_score keeps its meaning: 0.95 keeps only the decision holding the text as written
        const strict = yield* pipeline.query.searchSimilarDecisions(member, { text: "provider depends", min_score: 0.95 })
        assert.deepStrictEqual(strict.data.map((d) => d.ledger_id), [ids[0]!])

        // a search by id scores by similarity alone
        const byId = yield* pipeline.query.searchSimilarDecisions(member, { ledger_id: ids[0]!, min_score: 0 })
        assert.isTrue(byId.data.every((d) => d.match === "meaning" && d.score === d.similarity))
      }))

    it.effect("when every word of the query is common, the candidates by meaning are the newest decisions holding any", () =>
      Effect.gen(function*() {
        const { pipeline, seed } = yield* Fixture
        const { ids, member } = yield* seed("common", [
          ...Array.from({ length: 6 }, (_, i) => ({ ask: `${FILLER_ASK} Ticket OPS-${200 + i}.`, answer: FILLER_ANSWER })),
          { ask: "How do I rotate the webhook signing keys?", answer: "Rotate them one at a time with an overlap window." }
        ])
        // every term of the workspace as common as if thousands of decisions held it: no rare term to start from
        const tenantSql = Context.get(pipeline.stack.context, TenantSql)
        yield* tenantSql.write(member, ScopedSql.use((sql) => sql`UPDATE search_terms SET doc_count = 5000`))
        // no decision holds both words: every candidate comes by meaning, from each word's newest postings
        const found = yield* pipeline.query.searchSimilarDecisions(member, { text: "nightly rotate", min_score: 0, limit: 20 })
        assert.strictEqual(found.candidates, "recent")
        assert.sameMembers(found.data.map((d) => d.ledger_id), [...ids])
        assert.isTrue(found.data.every((d) => d.match === "meaning"))
      }))

    it.effect("a decision built but not analysed yet is found by its words", () =>
      Effect.gen(function*() {
        const { pipeline, seed } = yield* Fixture
        const { ids, member } = yield* seed("unanalysed", [
          { ask: FILLER_ASK, answer: `${FILLER_ANSWER} The error was ECONNRESET from the billing gateway.` },
          { ask: FILLER_ASK, answer: FILLER_ANSWER }
        ], { analyse: false })
        const found = yield* pipeline.query.searchSimilarDecisions(member, { text: "ECONNRESET from the billing gateway" })
        assert.strictEqual(found.data[0]?.ledger_id, ids[0]!)
        assert.strictEqual(found.data[0]?.match, "exact")
      }))

    it.effect("a restricted member finds a phrase among its own decisions, never another member's", () =>
      Effect.gen(function*() {
        const { pipeline, seed } = yield* Fixture
        const { ids, restricted } = yield* seed("restricted", [
          { ask: `${FILLER_ASK} The quarterly amber audit is due.`, answer: FILLER_ANSWER, user: "restricted" },
          { ask: `${FILLER_ASK} The quarterly amber audit slipped.`, answer: FILLER_ANSWER },
          ...Array.from({ length: 5 }, () => ({ ask: FILLER_ASK, answer: FILLER_ANSWER, user: "restricted" as const }))
        ])
        const found = yield* pipeline.query.searchSimilarDecisions(restricted, { text: "quarterly amber audit" })
        assert.strictEqual(found.data[0]?.ledger_id, ids[0]!)
        assert.strictEqual(found.data[0]?.match, "exact")
        assert.notInclude(found.data.map((d) => d.ledger_id), ids[1]!)
      }))
  })
})
