/**
 * Property-based fuzzing of the REST read API against real PostgreSQL: every endpoint's path parameters and query
 * strings made of any bytes. A client's mistake is never a 5xx: the answer is a success or a 4xx with the JSON error
 * body, and the service stays healthy after it all.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import { ApiStack, type ApiStackInfo } from "../support/api-stack.ts"
import { type Member, seedTwoTenantLedger } from "../support/ledger-fixture.ts"
import { anyComponent, anyHeaderValue, anyQuery, jsonOf, nearly, type RawAnswer, checkOptions, rawRequest } from "./arbitraries.ts"

class Fixture extends Context.Service<Fixture, {
  readonly stack: ApiStackInfo
  readonly ann: Member
  readonly agents: ReadonlyArray<string>
  readonly sessions: ReadonlyArray<string>
  readonly ledgerIds: ReadonlyArray<string>
}>()("test/fuzz/RestFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const stack = yield* ApiStack
    const { ann, sessions, rows } = yield* seedTwoTenantLedger(stack)
    return {
      stack,
      ann,
      agents: [...new Set(sessions.map((session) => session.agent))],
      sessions: sessions.map((session) => session.id),
      ledgerIds: rows.map((row) => row.capture.ledger_id)
    }
  })
).pipe(Layer.provideMerge(ApiStack.layer({ settings: { apiRateLimit: 1_000_000 } })))

const DECISION_QUERY = [
  "limit", "cursor", "order", "since", "until", "outcomes", "intents", "min_cost_usd", "max_cost_usd", "min_quality",
  "max_quality", "agent_id", "session_id", "model"
]
const AGENT_QUERY = ["limit", "cursor", "order", "active_since", "active_until", "since", "until"]

/** A success, or a 4xx with `{"error":{"code","message"}}`; never a 5xx. */
const assertClientAnswer = (path: string, answer: RawAnswer) => {
  assert.isBelow(answer.status, 500, `${path} → ${answer.status} ${answer.text.slice(0, 300)}`)
  const body = jsonOf(answer)
  assert.isDefined(body, `${path} → not JSON: ${answer.text.slice(0, 200)}`)
  if (answer.status >= 400) {
    assert.isString(body.error?.code, `${path} → ${answer.text.slice(0, 200)}`)
    assert.isString(body.error?.message, path)
  }
}

const fuzz = <A>(arbitrary: fc.Arbitrary<A>, check: (value: A) => Promise<void>) =>
  Effect.promise(() => fc.assert(fc.asyncProperty(arbitrary, check), checkOptions()))

describe("fuzzing the REST API", () => {
  layer(FixtureLive, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("path parameters and query strings of any bytes: a 2xx or a 4xx in the API's shape, never a 5xx", () =>
      Effect.gen(function*() {
        const { stack, ann, agents, sessions, ledgerIds } = yield* Fixture
        const get = async (path: string) => {
          const answer = await rawRequest(stack.baseUrl, { path, headers: { authorization: `Bearer ${ann.pat}` } })
          assertClientAnswer(path, answer)
          return answer
        }
        const agent = nearly(agents)
        const session = nearly(sessions)
        const ledgerId = nearly(ledgerIds)
        const paths = fc.oneof(
          anyQuery(AGENT_QUERY).map((query) => `/v1/agents?${query}`),
          fc.tuple(agent, anyQuery(AGENT_QUERY)).map(([id, query]) => `/v1/agents/${id}/sessions?${query}`),
          session.map((id) => `/v1/sessions/${id}`),
          fc.tuple(session, anyQuery(DECISION_QUERY)).map(([id, query]) => `/v1/sessions/${id}/decisions?${query}`),
          fc.tuple(session, ledgerId).map(([id, decision]) => `/v1/sessions/${id}/decisions/${decision}`),
          anyQuery(DECISION_QUERY, fc.oneof(anyComponent, nearly([...agents, ...sessions]))).map((query) => `/v1/decisions?${query}`),
          fc.array(anyComponent, { minLength: 1, maxLength: 4 }).map((segments) => `/v1/${segments.join("/")}`)
        )
        yield* fuzz(paths, async (path) => void (await get(path)))
        // the known NUL case, and what the fuzzing keeps finding first
        for (const path of ["/v1/agents/%00/sessions", `/v1/decisions?model=%00`, `/v1/decisions?agent_id=a%00b`]) {
          assert.strictEqual((yield* Effect.promise(() => get(path))).status, 400, path)
        }
      }))

    it.effect("any Authorization and other header values: 401 or an answer, never a 5xx", () =>
      Effect.gen(function*() {
        const { stack } = yield* Fixture
        yield* fuzz(fc.tuple(anyHeaderValue, anyHeaderValue), async ([authorization, accept]) => {
          const answer = await rawRequest(stack.baseUrl, { path: "/v1/agents", headers: { authorization, accept, "x-request-id": accept } })
          assertClientAnswer("/v1/agents", answer)
        })
      }))

    it.effect("after the fuzzing the service is healthy and answers as before", () =>
      Effect.gen(function*() {
        const { stack, ann } = yield* Fixture
        const ready = yield* Effect.promise(() => rawRequest(stack.baseUrl, { path: "/readyz" }))
        assert.strictEqual(ready.status, 200, ready.text)
        const agents = yield* Effect.promise(() => rawRequest(stack.baseUrl, { path: "/v1/agents", headers: { authorization: `Bearer ${ann.pat}` } }))
        assert.strictEqual(agents.status, 200)
        assert.isAbove(jsonOf(agents).data.length, 0)
      }))
  })
})
