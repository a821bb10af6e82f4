/**
 * Capture records, as the gateway publishes them, for the ingest benchmark and the builder's tests:
 * - realistic: the call shapes of test/fixtures/captures (tool calls, code answers, refusals, truncation, provider
 *   errors, cached Anthropic/Gemini usage, log-probabilities, an unpriced upstream) re-keyed to real tenant ids and times;
 * - short: the call the gateway benchmark makes (one user message, a one-sentence answer with its usage), the captures
 *   a gateway under bench/gateway's load fills the stream with;
 * - conversation: a coding agent's call deep into its session — chat completions carry the whole conversation every
 *   call, here 120 messages (~110 KB): asks, tool calls, source files and test output naming paths and URLs.
 */
import type { Capture } from "../../src/domain/capture.ts"
import { uuidv7 } from "../../src/gateway/uuidv7.ts"
import * as Fixtures from "../../test/fixtures/captures/index.ts"

const SHORT_ASK = "Summarise the incident report for the payments outage in two sentences."
const SHORT_ANSWER = "The payments service failed for 42 minutes after a certificate expired. Renewing it restored service."

const short = (): Capture =>
  Fixtures.capture({
    model: "gpt-4o-mini",
    request: JSON.stringify({ model: "openai/gpt-4o-mini", stream: false, messages: [{ role: "user", content: SHORT_ASK }] }),
    response: Fixtures.completion({ model: "gpt-4o-mini-2024-07-18", content: SHORT_ANSWER }),
    usage: { prompt_tokens: 19, completion_tokens: 21, total_tokens: 40 }
  })

/** A source file as a read_file tool returns it: imports, code and comments naming paths and URLs. */
const sourceFile = (turn: number) =>
  [
    `import { retry } from "../lib/retry${turn % 5}.ts"`,
    `import type { Order } from "../domain/order.ts"`,
    ...Array.from({ length: 30 }, (_, line) =>
      line % 6 === 0
        ? `// see https://docs.example.com/payments/${turn}/${line} and src/payments/rules${line}.ts`
        : `export const step${turn}_${line} = (order: Order) => retry(() => charge(order, ${line}), { attempts: ${line % 4 + 1} })`)
  ].join("\n")

const testOutput = (turn: number) =>
  [
    ` FAIL  test/payments/charge${turn}.test.ts > charges once per idempotency key`,
    `AssertionError: expected 2 to equal 1`,
    ` ❯ test/payments/charge${turn}.test.ts:${20 + turn}:17`,
    ` ❯ src/payments/charge${turn}.ts:${40 + turn}:9`,
    `Test Files  1 failed | ${turn + 11} passed (${turn + 12})`
  ].join("\n")

/** The messages of a coding agent's session after `turns` rounds of ask, read, test and answer. */
export const agentConversation = (turns: number): Array<unknown> => [
  { role: "system", content: "You are a coding agent in the repository at /work/payments. Read files and run tests with the tools; keep changes small." },
  ...Array.from({ length: turns }, (_, turn) => [
    { role: "user", content: `The test in test/payments/charge${turn}.test.ts fails after the change to src/payments/charge${turn}.ts:\n\n\`\`\`\nAssertionError: expected 2 to equal 1\n\`\`\`\n\nFix it without touching the retry policy.` },
    { role: "assistant", content: null, tool_calls: [{ id: `call_read_${turn}`, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: `src/payments/charge${turn}.ts` }) } }] },
    { role: "tool", tool_call_id: `call_read_${turn}`, content: sourceFile(turn) },
    { role: "assistant", content: null, tool_calls: [{ id: `call_test_${turn}`, type: "function", function: { name: "run_tests", arguments: JSON.stringify({ file: `test/payments/charge${turn}.test.ts` }) } }] },
    { role: "tool", tool_call_id: `call_test_${turn}`, content: testOutput(turn) },
    { role: "assistant", content: `The charge in src/payments/charge${turn}.ts ran once per attempt; it now reuses the idempotency key, and the test passes.` }
  ]).flat()
]

const CONVERSATION_TURNS = 20

const conversation = (): Capture =>
  Fixtures.capture({
    agent_id: "agent-coder",
    model: "gpt-4.1",
    request: JSON.stringify({ model: "gpt-4.1", messages: agentConversation(CONVERSATION_TURNS) }),
    response: Fixtures.completion({ model: "gpt-4.1-2025-04-14", content: "Both tests pass now: src/payments/charge19.ts reuses the key." }),
    usage: { prompt_tokens: 31_000, completion_tokens: 40, total_tokens: 31_040 }
  })

/**
 * Which captures a benchmark publishes: `realistic` rotates through the fixtures' shapes, `short` is one small call,
 * `conversation` one long agent call.
 */
export type CaptureShape = "realistic" | "short" | "conversation"
export const CAPTURE_SHAPES: ReadonlyArray<CaptureShape> = ["realistic", "short", "conversation"]

const TEMPLATES: ReadonlyArray<() => Capture> = [
  Fixtures.toolCallingAgent,
  Fixtures.codingAgent,
  Fixtures.refusal,
  Fixtures.truncatedSummary,
  Fixtures.rateLimited,
  Fixtures.anthropicCached,
  Fixtures.geminiCached,
  Fixtures.withLogprobs,
  Fixtures.unknownModel
]

/** Who made the call: ids of a real tenant, workspace, user and gateway key (they must be uuids). */
export interface CaptureIdentity {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly key_id: string
}

export interface CaptureOptions {
  readonly agent_id: string
  readonly agent_name?: string | null
  readonly execution_id?: string | null
  /** epoch ms */
  readonly started_at: number
  readonly duration_ms?: number
  /** picks the call shape (modulo the number of templates) */
  readonly variant?: number
  readonly ledger_id?: string
}

export const TEMPLATE_COUNT = TEMPLATES.length

export const realisticCapture = (identity: CaptureIdentity, options: CaptureOptions, shape: CaptureShape = "realistic"): Capture => {
  const template = shape === "short" ? short() : shape === "conversation" ? conversation() : TEMPLATES[(options.variant ?? 0) % TEMPLATES.length]!()
  const duration = options.duration_ms ?? 1_500
  return {
    ...template,
    ...identity,
    // minted like the gateway does: uuid v7, time-ordered
    ledger_id: options.ledger_id ?? uuidv7(),
    agent_id: options.agent_id,
    agent_name: options.agent_name ?? null,
    execution_id: options.execution_id ?? null,
    started_at: options.started_at,
    first_token_at: template.first_token_at === null ? null : options.started_at + Math.min(400, duration),
    ended_at: options.started_at + duration,
    upstream_ms: Math.max(0, duration - 5)
  }
}
