/**
 * The builder decodes every capture with a StorableCapture decoder that Effect's JIT compiler generates. It must
 * accept, strip and refuse exactly what Effect's interpreter does: the same payloads, valid and nearly valid, decoded
 * here and in a process where the compiler cannot run (test/support/capture-decoding.ts), give the same outcomes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { codeGeneration, type DecodingOutcome, decodingOutcomes } from "../support/capture-decoding.ts"
import { anyJson, mutated } from "../fuzz/arbitraries.ts"

const INTERPRETED = Path.resolve(import.meta.dirname, "../support/capture-decoding.ts")

const uuid = (n: number) => `0194a000-0000-7000-8000-${String(n).padStart(12, "0")}`
const base = {
  v: 2,
  ledger_id: uuid(1),
  tenant_id: uuid(2),
  workspace_id: uuid(3),
  user_id: uuid(4),
  key_id: uuid(5),
  agent_id: "agent-a",
  agent_name: "Agent A",
  execution_id: null,
  provider: "openai",
  provider_type: "openai",
  model: "gpt-4o-mini",
  stream: false,
  status: 200,
  aborted: false,
  started_at: 1_764_000_000_000,
  first_token_at: 1_764_000_000_400,
  ended_at: 1_764_000_001_500,
  upstream_ms: 1_495
}
/** Valid captures of every shape the schema has: chat with usage, a Responses call with context and an error, a watcher turn. */
const VALID: ReadonlyArray<Record<string, unknown>> = [
  {
    ...base,
    api: "chat",
    request: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Why?" }] }),
    response: JSON.stringify({ choices: [{ message: { role: "assistant", content: "Because." } }] }),
    error: null,
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, cached_tokens: 1 }
  },
  {
    ...base,
    api: "responses",
    execution_id: "run-1",
    agent_name: null,
    request: JSON.stringify({ model: "o4-mini", input: "go on", previous_response_id: "resp_1" }),
    context: JSON.stringify([{ type: "message", role: "user", content: "start" }]),
    response: null,
    error: { status: 429, type: "rate_limit_error", code: null, message: "slow down" },
    status: 429,
    usage: null,
    first_token_at: null
  },
  {
    ...base,
    v: 1,
    api: "messages",
    provider: "anthropic",
    provider_type: "anthropic",
    request: JSON.stringify({ model: "claude", messages: [] }),
    response: JSON.stringify({ content: [] }),
    error: null,
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, cache_write_tokens: 3, cache_write_1h_tokens: 1, reasoning_tokens: 0 },
    source: { kind: "watcher", client: "claude-code", client_version: "2.1.0", cwd: "/work", git_branch: null }
  }
]

/** Values at and beyond the edges the storable checks draw: ids, lengths, times, durations, statuses. */
const edges = fc.constantFrom<unknown>(
  -1, 0, 0.5, 999, 1000, 2 ** 31 - 1, 2 ** 31, Date.UTC(2100, 0, 1), Date.UTC(2100, 0, 1) + 1, -0, 1e308,
  "", "x", "x".repeat(512), "x".repeat(513), uuid(9).toUpperCase(), "00000000-0000-0000-0000-000000000000",
  "ffffffff-ffff-ffff-ffff-ffffffffffff", "0194a000-0000-9000-8000-000000000001", "0194a000-0000-7000-c000-000000000001",
  "chat", "responses", "embeddings", "watcher", "codex", "openai_compatible", 1, 2, 3, true, false, null, [], {}
)

const FIELDS = [...new Set(VALID.flatMap((capture) => Object.keys(capture)))]

const payloads = fc.oneof(
  fc.constantFrom(...VALID),
  // one field at an edge
  fc.tuple(fc.constantFrom(...VALID), fc.constantFrom(...FIELDS), edges).map(([valid, field, value]) => ({ ...valid, [field]: value })),
  // anything, anywhere
  fc.constantFrom(...VALID).chain((valid) => mutated(valid, fc.oneof(anyJson, edges)))
).map((capture) => JSON.stringify(capture))

const interpreted = (input: ReadonlyArray<string>) =>
  new Promise<{ codeGeneration: boolean; outcomes: Array<DecodingOutcome> }>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, ["--disallow-code-generation-from-strings", INTERPRETED], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
    child.once("error", reject)
    child.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`the interpreting process exited with ${code}`))))
    child.stdin.end(JSON.stringify(input))
  })

describe("decoding captures compiled", () => {
  it("accepts, strips and refuses what the interpreter does, with the same issues", async () => {
    const seed = Number(process.env.FUZZ_SEED ?? Date.now())
    const input = fc.sample(payloads, { numRuns: 5_000, seed })
    const reference = await interpreted(input)
    assert.isFalse(reference.codeGeneration, "the reference process could generate code: it would not interpret")
    assert.isTrue(codeGeneration())
    const compiled = decodingOutcomes(input)
    // some of each, so the comparison covers both sides
    assert.isAbove(compiled.filter((outcome) => outcome.ok).length, 300)
    assert.isAbove(compiled.filter((outcome) => !outcome.ok).length, 300)
    for (let i = 0; i < input.length; i++) {
      assert.deepStrictEqual(compiled[i], reference.outcomes[i], `payload ${input[i]} (FUZZ_SEED=${seed})`)
    }
  }, 60_000)
})
