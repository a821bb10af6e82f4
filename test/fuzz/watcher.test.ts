/**
 * Property-based fuzzing of the watcher's transcript readers: transcripts as the clients write them, with entries
 * replaced by anything (control characters, great lengths), lines cut or not JSON at all. Reading never throws, and
 * a turn read is either one the gateway takes or one the watcher's own check (the same schema) keeps back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import fc from "fast-check"
import { ReadTurn, TranscriptTurn } from "../../src/domain/transcript.ts"
import { ClaudeCodeTranscript } from "../../src/watcher/claudeCode.ts"
import { CodexRollout } from "../../src/watcher/codex.ts"
import type { TranscriptReader } from "../../src/watcher/transcript.ts"
import { claudeSession, codexSession, type Exchange } from "../support/transcripts.ts"
import { anyJson, checkOptions, mutated } from "./arbitraries.ts"

const EXCHANGES: ReadonlyArray<Exchange> = [
  { prompt: "Why does PAY-231 fail?", command: { run: "grep -n timeout src/pay.ts", output: "12: timeout = 5" }, answer: "The timeout is 5 s." },
  { prompt: "Raise it", answer: "Done: 30 s." }
]

const isTurn = Schema.is(TranscriptTurn)
const isReadTurn = Schema.is(ReadTurn)

/** Values a transcript's fields may hold that a provider's never would: control characters, great lengths, emptiness. */
const oddValues: fc.Arbitrary<unknown> = fc.oneof(
  anyJson,
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ minLength: 257, maxLength: 600 }),
  fc.constantFrom("", "\u0000", "msg_\n01", "<synthetic>", "HEAD", -1, 1e300, "2026-13-45T99:99:99Z")
)

/** A session's lines with some replaced: an entry changed anywhere inside, any JSON, a cut line, or text. */
const damaged = (lines: ReadonlyArray<string>): fc.Arbitrary<ReadonlyArray<string>> =>
  fc.array(
    fc.tuple(
      fc.nat({ max: lines.length - 1 }),
      fc.oneof(
        { weight: 4, arbitrary: fc.nat({ max: lines.length - 1 }).chain((at) => mutated(JSON.parse(lines[at]!), oddValues).map((value) => JSON.stringify(value) ?? "")) },
        { weight: 1, arbitrary: anyJson.map((value) => JSON.stringify(value) ?? "") },
        { weight: 1, arbitrary: fc.nat({ max: lines.length - 1 }).chain((at) => fc.nat({ max: lines[at]!.length }).map((cut) => lines[at]!.slice(0, cut))) },
        { weight: 1, arbitrary: fc.string({ maxLength: 50 }) }
      )
    ),
    { maxLength: 6 }
  ).map((changes) => {
    const copy = [...lines]
    for (const [at, line] of changes) copy[at] = line
    return copy
  })

const readAll = (reader: TranscriptReader, lines: ReadonlyArray<string>) => {
  let end = 0
  return [...lines.flatMap((line) => reader.line(line, (end += line.length + 1))), ...reader.idle(end)]
}

describe("fuzzing the transcript readers", () => {
  const cases = [
    { name: "Claude Code", lines: claudeSession({ cwd: "/w", start: Date.UTC(2026, 10, 26), exchanges: EXCHANGES }).lines, reader: () => new ClaudeCodeTranscript() },
    { name: "Codex", lines: codexSession({ cwd: "/w", start: Date.UTC(2026, 10, 26), exchanges: EXCHANGES }).lines, reader: () => new CodexRollout() }
  ]
  for (const { name, lines, reader } of cases) {
    it(`${name}: any damage to a transcript: no crash; a turn the watcher would send is one the gateway takes`, () => {
      let sendable = 0
      fc.assert(
        fc.property(damaged(lines), (transcript) => {
          for (const { turn } of readAll(reader(), transcript)) {
            if (!isReadTurn(turn)) continue
            sendable++
            assert.isTrue(isTurn({ ...turn, agent_id: turn.client, agent_name: null }), JSON.stringify(turn).slice(0, 500))
          }
        }),
        checkOptions()
      )
      assert.isAbove(sendable, 0, "damaged transcripts still hold turns")
    })
  }
})
