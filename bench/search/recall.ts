/**
 * Exact-phrase recall of `search_similar_decisions`: plants `--decisions` decisions, each holding its own random
 * two-to-four-word phrase (words of bench/search/words.txt) inside a realistic prompt or answer — a system prompt,
 * an engineering ask of a few sentences, an answer of several — then searches each phrase with default settings and
 * counts how often its decision ranks first. Also reports the search's latency and what the default `min_score`
 * (0.3) means for decisions that do not hold the query: the share of them whose similarity by meaning (the local
 * vectors) clears it.
 *
 *   npx node bench/search/recall.ts [--decisions 1000] [--searches 1000] [--seed 1]
 *
 * The corpus is the same for a given seed (a seeded generator): run it on two checkouts to compare them. Decisions
 * are seeded straight into a fresh local PostgreSQL database as the builder writes them, then materialised by the
 * real materialiser, and the tables analysed as the builders do; searches go through the analytics read model as a
 * workspace member.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Context, Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { AnalyticsQuery } from "../../src/analytics/AnalyticsQuery.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { localVector, similarity } from "../../src/analytics/text.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import { PlannerStatistics } from "../../src/store/PlannerStatistics.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { capture, completion, request } from "../../test/fixtures/captures/index.ts"
import { insertDecisions, seedDecision } from "../../test/support/seed.ts"
import { workloadPipeline } from "../workload/pipeline.ts"

const { values } = parseArgs({
  options: { decisions: { type: "string", default: "1000" }, searches: { type: "string", default: "1000" }, seed: { type: "string", default: "1" } }
})
const DECISIONS = Number(values.decisions)
/** Phrases searched: the first this many (every decision's, at the default size). */
const SEARCHES = Number(values.searches)

/** mulberry32: a small seeded generator, so two checkouts get the same corpus. */
const generator = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const random = generator(Number(values.seed))
const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!

const WORDS = Fs.readFileSync(Path.join(import.meta.dirname, "words.txt"), "utf8").split("\n").filter((w) => w !== "")

const SYSTEMS = [
  "You are a careful senior engineer on the platform team. Answer precisely, cite the files you rely on, and say when you are unsure.",
  "You are the support triage assistant. Classify the ticket, summarise the customer's problem, and propose the next step.",
  "You are a code reviewer. Point out bugs, risky changes and missing tests; be brief and concrete."
]
const ASKS = [
  "The nightly export job failed again at 02:14 UTC with a timeout while writing to the warehouse.",
  "Customers on the enterprise plan report that invoices show the wrong currency after the last release.",
  "Please review the retry policy in src/payments/retry.ts before we merge it.",
  "The checkout service started returning 502 errors for about ten minutes this morning.",
  "We need a migration plan for moving the session store from Redis to PostgreSQL.",
  "Summarise what changed in the billing webhook handler over the last two sprints.",
  "The mobile app crashes on startup for some Android users after the update.",
  "Draft a short incident summary for the status page, no more than five sentences.",
  "Why does the integration test for the search endpoint fail only on CI?",
  "Compare the two caching strategies we discussed and recommend one."
]
const ANSWERS = [
  "The failure comes from the connection pool running out of connections under the nightly load.",
  "I would start by checking the deployment logs around the time the errors began.",
  "The retry loop has no upper bound, so a permanent error keeps the worker busy forever.",
  "Here is a plan in three steps: measure, change one thing, and measure again.",
  "The handler parses the payload twice, which explains the extra latency you saw.",
  "Tests pass locally because the local database has data the CI database does not.",
  "A feature flag would let us roll the change back without a deploy.",
  "The root cause is most likely the configuration change merged on Tuesday.",
  "I recommend the write-through cache: it keeps reads fast and avoids stale prices.",
  "Let me know if you want me to open a ticket for the follow-up work."
]

const sentences = (pool: ReadonlyArray<string>, n: number) => Array.from({ length: n }, () => pick(pool))

/** The phrase set inside a text: as a sentence of its own, or inside one. */
const plant = (parts: Array<string>, phrase: string) => {
  const at = Math.floor(random() * (parts.length + 1))
  const forms = [`Note: ${phrase}.`, `The customer wrote "${phrase}" in the ticket.`, `${phrase[0]!.toUpperCase()}${phrase.slice(1)} is what we saw.`]
  parts.splice(at, 0, pick(forms))
  return parts.join(" ")
}

const program = Effect.gen(function*() {
  const pipeline = yield* workloadPipeline()
  const credentials = Context.get(pipeline.stack.context, Credentials)
  const authenticator = Context.get(pipeline.stack.context, Authenticator)
  const tenantSql = Context.get(pipeline.stack.context, TenantSql)
  const materializer = Context.get(pipeline.stack.context, Materializer)
  const query = Context.get(pipeline.stack.context, AnalyticsQuery)
  const owner = yield* credentials.bootstrap({ tenant: "recall", workspace: "main", email: "owner@recall.bench", role: "member" })
  const principal = yield* authenticator.authenticate(owner.pat, "pat")
  const scope = { tenant_id: principal.tenant_id, workspace_id: principal.workspace_id, user_id: principal.user_id, key_id: Crypto.randomUUID() }

  // the corpus: unique phrases, each held by its own decision only (a phrase that another decision's text also holds,
  // say in its filler, is replaced)
  type Planted = { phrase: string; ledger_id: string; text: string; capture: ReturnType<typeof capture> }
  const start = Date.UTC(2026, 10, 2, 8)
  const phrases = new Set<string>()
  const entry = (index: number): Planted => {
    let phrase: string
    do phrase = Array.from({ length: 2 + Math.floor(random() * 3) }, () => pick(WORDS)).join(" ")
    while (phrases.has(phrase))
    phrases.add(phrase)
    const inAnswer = random() < 0.5
    const ask = sentences(ASKS, 2 + Math.floor(random() * 3))
    const answer = sentences(ANSWERS, 3 + Math.floor(random() * 4))
    const askText = inAnswer ? ask.join(" ") : plant(ask, phrase)
    const answerText = inAnswer ? plant(answer, phrase) : answer.join(" ")
    const at = start + index * 60_000
    const ledger_id = uuidv7(at)
    return {
      phrase,
      ledger_id,
      text: `${askText}\n${answerText}`.toLowerCase(),
      capture: capture({
        ...scope,
        ledger_id,
        agent_id: `agent-${index % 7}`,
        agent_name: null,
        request: request([{ role: "system", content: pick(SYSTEMS) }, { role: "user", content: askText }]),
        response: completion({ content: answerText }),
        usage: { prompt_tokens: 300, completion_tokens: 120, total_tokens: 420 },
        started_at: at,
        first_token_at: at + 400,
        ended_at: at + 1_800
      })
    }
  }
  const generated = Array.from({ length: DECISIONS }, (_, i) => entry(i))
  const planted = generated.filter((p, i) => generated.every((other, j) => j === i || !other.text.includes(p.phrase)))
  const replaced = DECISIONS - planted.length
  for (let i = DECISIONS; planted.length < DECISIONS; i++) {
    const candidate = entry(i)
    if (planted.every((p) => !p.text.includes(candidate.phrase) && !candidate.text.includes(p.phrase))) planted.push(candidate)
  }


  // sessions of 20 decisions, as an agent's working sessions are
  const sessions = Array.from({ length: Math.ceil(planted.length / 20) }, (_, n) => uuidv7(start + n * 20 * 60_000))
  const rows = planted.map((p, i) => seedDecision(p.capture, sessions[Math.floor(i / 20)]!))
  for (let i = 0; i < rows.length; i += 500) yield* insertDecisions(rows.slice(i, i + 500)).pipe(Effect.provideService(TenantSql, tenantSql))
  const materialiseStarted = performance.now()
  yield* materializer.catchUp
  const materialiseMs = performance.now() - materialiseStarted
  // planner statistics, as the builders keep them in a deployment (src/store/PlannerStatistics.ts)
  yield* Context.get(pipeline.stack.context, PlannerStatistics).refresh
  const [stored] = yield* tenantSql.read(principal, ScopedSql.use((sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM decision_search`))

  let first = 0
  let cleared = 0
  const latencies: Array<number> = []
  const misses: Array<string> = []
  const searched = planted.slice(0, SEARCHES)
  for (const p of searched) {
    const started = performance.now()
    const result = yield* query.searchSimilarDecisions(principal, { text: p.phrase })
    latencies.push(performance.now() - started)
    if (result.data.some((d) => d.ledger_id === p.ledger_id)) cleared++
    if (result.data[0]?.ledger_id === p.ledger_id) first++
    else if (misses.length < 5) misses.push(`"${p.phrase}" → ${result.data.length === 0 ? "nothing" : `${result.data[0]!.ledger_id} first`}`)
  }
  latencies.sort((a, b) => a - b)

  // what 0.3 means by meaning: the similarity of a query's local vector to decisions that do not hold it
  const vectors = yield* tenantSql.read(principal, ScopedSql.use((sql) => sql<{ ledger_id: string; v: Array<number> }>`
    SELECT ledger_id::text AS ledger_id, local_vector AS v FROM decision_search`))
  const unrelated: Array<number> = []
  for (const p of planted.slice(0, 200)) {
    const q = localVector(p.phrase)
    for (const row of vectors) if (row.ledger_id !== p.ledger_id) unrelated.push(similarity(q, row.v))
  }
  unrelated.sort((a, b) => a - b)
  const share = (threshold: number) => unrelated.filter((s) => s >= threshold).length / unrelated.length
  const pct = (x: number) => `${(x * 100).toFixed(2)} %`
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!.toFixed(1)

  console.log([
    "",
    `decisions planted: ${planted.length}, each phrase held by its decision only (${replaced} replaced for that); materialised: ${stored!.n}, in ${(materialiseMs / 1000).toFixed(1)} s`,
    `ranked first with default settings: ${first} / ${searched.length} = ${pct(first / searched.length)}; returned at all: ${pct(cleared / searched.length)}`,
    `search latency ms: p50 ${at(0.5)}, p95 ${at(0.95)}, p99 ${at(0.99)}`,
    `similarity of unrelated decisions (local vectors, ${unrelated.length} pairs): p50 ${unrelated[Math.floor(unrelated.length / 2)]!.toFixed(3)}, ` +
    `p99 ${unrelated[Math.floor(unrelated.length * 0.99)]!.toFixed(3)}; share ≥ 0.3: ${pct(share(0.3))}, ≥ 0.2: ${pct(share(0.2))}`,
    ...(misses.length === 0 ? [] : ["first misses:", ...misses.map((m) => `  ${m}`)])
  ].join("\n"))
})

NodeRuntime.runMain(Effect.scoped(program))
