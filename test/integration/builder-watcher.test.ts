/**
 * Transcript turns in the builder, on real PostgreSQL: a turn is a decision like a call through the gateway, with
 * its source and the directory and branch it was worked on as subjects, which `ledger rebuild` keeps; a turn whose
 * answer is already a decision's (the call went through the gateway too) is left out, whether that decision is
 * stored or in the same batch; rollups count each call once.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Rebuilder } from "../../src/builder/Rebuild.ts"
import type { Capture } from "../../src/domain/capture.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { captureOfTurn } from "../../src/gateway/watcher/captureOfTurn.ts"
import { ClaudeCodeTranscript } from "../../src/watcher/claudeCode.ts"
import { claudeSession, type Exchange } from "../support/transcripts.ts"
import { builderStack, newWorkspace, publishAndBuild, recount, T0 } from "./builder-harness.ts"

const EXCHANGES: ReadonlyArray<Exchange> = [
  { prompt: "Why does PAY-231 fail?", command: { run: "grep -n timeout src/pay.ts", output: "12: timeout = 5" }, answer: "The timeout is 5 s." },
  { prompt: "Raise it", answer: "Done: 30 s." }
]

/** The captures `ledger watch` makes of a Claude Code session, as the gateway makes them. */
const watchedCaptures = (principal: Principal): Array<Capture> => {
  const session = claudeSession({ cwd: "/home/dana/payments", start: T0, exchanges: EXCHANGES })
  const reader = new ClaudeCodeTranscript()
  return [...session.lines.flatMap((line) => reader.line(line, 0)), ...reader.idle(0)].map(({ turn }) =>
    captureOfTurn(principal, { ...turn, agent_id: "claude-code", agent_name: "Claude Code" }, 4 * 1024 * 1024))
}

/** The same call as the gateway captured it: its own ledger id, no source. */
const throughGateway = (capture: Capture): Capture => {
  const { source: _source, ...rest } = capture
  return { ...rest, ledger_id: crypto.randomUUID() }
}

describe("transcript turns in the builder", () => {
  layer(Rebuilder.layer.pipe(Layer.provideMerge(builderStack("postgres"))), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a turn is a decision with its source and subjects, kept by a rebuild; a call recorded both ways is one decision", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const identity = yield* newWorkspace("watch")
        const principal: Principal = { ...identity, token_id: identity.key_id, kind: "gateway", role: "member" }
        const [first, second, third] = watchedCaptures(principal)

        // the gateway's capture of the first call is stored; in the next batch, the gateway's and the transcript's
        // capture of the second call arrive together, with the transcript's of the first
        yield* publishAndBuild([JSON.stringify(throughGateway(first!))])
        yield* publishAndBuild([first!, throughGateway(second!), second!, third!].map((capture) => JSON.stringify(capture)))
        const rows = yield* sql<{ ledger_id: string; response_id: string; source: { client: string } | null; subjects: ReadonlyArray<{ kind: string; key: string }> }>`
          SELECT ledger_id::text, response_id, source, subjects FROM decisions ORDER BY created_at`
        assert.deepStrictEqual(rows.map((row) => row.response_id), [first!, second!, third!].map((capture) => JSON.parse(capture.response!).id), "one decision per call")
        assert.deepStrictEqual(rows.map((row) => row.source?.client ?? "gateway"), ["gateway", "gateway", "claude-code"])
        const subjects = rows[2]!.subjects.map((subject) => `${subject.kind}:${subject.key}`)
        assert.includeMembers(subjects, ["directory:/home/dana/payments", "branch:/home/dana/payments@main", "ticket:PAY-231"])
        assert.deepStrictEqual(yield* recount, [])
        const [{ decisions }] = yield* sql<{ decisions: number }>`SELECT decision_count::int AS decisions FROM agents`
        assert.strictEqual(decisions, 3)

        // sent again later, nothing changes
        yield* publishAndBuild([first!, second!, third!].map((capture) => JSON.stringify(capture)))
        assert.strictEqual((yield* sql`SELECT 1 FROM decisions`).length, 3)

        const rebuilder = yield* Rebuilder
        yield* sql`UPDATE decisions SET subjects = '[]'::jsonb`
        yield* rebuilder.run({ batchSize: 10 })
        const rebuilt = yield* sql<{ source: { kind: string; cwd: string } | null; subjects: ReadonlyArray<{ kind: string }> }>`
          SELECT source, subjects FROM decisions WHERE source IS NOT NULL`
        assert.deepInclude(rebuilt[0]!.source!, { kind: "watcher", cwd: "/home/dana/payments" })
        assert.include(rebuilt[0]!.subjects.map((subject) => subject.kind), "directory")
      }))
  })
})
