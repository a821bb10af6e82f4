/**
 * Content policies on PostgreSQL: a workspace keeps the full exchange, a redacted one (secrets and personal data masked
 * before anything is derived or stored), or metadata only (no prompt or answer text anywhere in the decision); the
 * chain covers what is kept, so `ledger verify` holds under each.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { realisticCapture } from "../../bench/ingest/captures.ts"
import { ContentPolicies } from "../../src/builder/ContentPolicies.ts"
import type { ContentPolicy } from "../../src/domain/contentPolicy.ts"
import { NO_CONTENT_TITLE } from "../../src/domain/contentPolicy.ts"
import { Verifier } from "../../src/integrity/Verifier.ts"
import { builderStack, MINUTE, newWorkspace, publishAndBuild, T0 } from "./builder-harness.ts"

const EMAIL = "jane.doe@example.com"
const SECRET = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789"
const ASK = `Please email the report to ${EMAIL}; the key is ${SECRET}.`

/** A workspace under `policy` with three calls whose last ask carries an email address and an API key. */
const workspaceUnder = (policy: ContentPolicy) =>
  Effect.gen(function*() {
    const identity = yield* newWorkspace(policy)
    yield* (yield* ContentPolicies).set(identity, policy)
    const payloads = Array.from({ length: 3 }, (_, i) => {
      const capture = realisticCapture(identity, { agent_id: "mailer", started_at: T0 + i * MINUTE, variant: 0 })
      const request = JSON.parse(capture.request)
      request.messages.push({ role: "user", content: ASK })
      return JSON.stringify({ ...capture, request: JSON.stringify(request) })
    })
    yield* publishAndBuild(payloads)
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ raw_request: string; raw_response: string | null; title: string; derivation: unknown; subjects: unknown; usage: unknown; cost_usd: number | null }>`
      SELECT raw_request, raw_response, title, derivation, subjects, usage, cost_usd FROM decisions WHERE workspace_id = ${identity.workspace_id}`
    const verified = yield* (yield* Verifier).run({ workspace: identity.workspace_id })
    return { rows, verified }
  })

describe("content policy", () => {
  layer(Layer.mergeAll(Verifier.layer, ContentPolicies.layer).pipe(Layer.provideMerge(builderStack("postgres"))), {
    timeout: 120_000,
    excludeTestServices: true
  })("policies", (it) => {
    it.effect("full keeps the exchange as captured", () =>
      Effect.gen(function*() {
        const { rows, verified } = yield* workspaceUnder("full")
        assert.strictEqual(rows.length, 3)
        assert.isTrue(rows.every((row) => row.raw_request.includes(EMAIL) && row.raw_request.includes(SECRET)))
        assert.isTrue(verified.ok)
      }))

    it.effect("redacted masks secrets and personal data before derivation: neither the raw call nor the decision holds them", () =>
      Effect.gen(function*() {
        const { rows, verified } = yield* workspaceUnder("redacted")
        assert.strictEqual(rows.length, 3)
        for (const row of rows) {
          const stored = JSON.stringify(row)
          assert.notInclude(stored, EMAIL)
          assert.notInclude(stored, SECRET)
          assert.include(row.raw_request, "[REDACTED:email]")
          // still the JSON it was
          assert.doesNotThrow(() => JSON.parse(row.raw_request))
        }
        assert.isTrue(verified.ok)
      }))

    it.effect("metadata keeps no prompt or answer text, and keeps usage, cost and the chain", () =>
      Effect.gen(function*() {
        const { rows, verified } = yield* workspaceUnder("metadata")
        assert.strictEqual(rows.length, 3)
        for (const row of rows) {
          assert.strictEqual(row.raw_request, "")
          assert.isNull(row.raw_response)
          assert.strictEqual(row.title, NO_CONTENT_TITLE)
          assert.deepStrictEqual(row.subjects, [])
          assert.notInclude(JSON.stringify(row.derivation), "report")
          assert.isNotNull(row.usage)
          assert.isNotNull(row.cost_usd)
        }
        assert.isTrue(verified.ok)
      }))
  })
})
