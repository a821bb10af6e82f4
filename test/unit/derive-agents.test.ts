/**
 * The derivation of decisions from the agents' own APIs: Anthropic Messages (Claude Code's turns), the Responses API
 * (Codex's items, namespaced and custom tools, a WebSocket turn with the turns the gateway joined), and embeddings —
 * read into the same trace, evidence, artifacts, outcome and cost as chat completions.
 */
import { assert, describe, it } from "@effect/vitest"
import { captureUsage } from "../../src/domain/capture.ts"
import { derive } from "../../src/derive/derive.ts"
import { readCall } from "../../src/derive/read.ts"
import { priceCall } from "../../src/derive/pricing.ts"
import { truncate } from "../../src/derive/text.ts"
import { pgJson } from "../../src/store/pgValues.ts"
import { capture } from "../fixtures/captures/index.ts"

const kinds = (items: ReadonlyArray<{ readonly kind: string }>) => items.map((item) => item.kind)

const CLAUDE_REMINDER = "<system-reminder>\nAttribution for git commits: Co-Authored-By: Claude 🤖\n</system-reminder>\n"

/** A Claude Code turn reading the output of the Bash command its previous turn asked for. */
const claudeCodeTurn = (response: object) =>
  capture({
    v: 2,
    api: "messages",
    provider: "anthropic",
    provider_type: "anthropic",
    model: "claude-sonnet-4-6",
    request: JSON.stringify({
      model: "claude-sonnet-4-6",
      system: [{ type: "text", text: "You are Claude Code." }, { type: "text", text: "Work in /srv/app." }],
      messages: [
        { role: "user", content: [{ type: "text", text: CLAUDE_REMINDER }, { type: "text", text: "Why does the build fail? Check with make." }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "Run make first.", signature: "sig" }, { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "make build", description: "build" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "src/app.ts(3,1): error TS2304: Cannot find name 'x'." }] }] },
        { role: "system", content: "# Environment\ncwd: /srv/app" }
      ],
      tools: [{ name: "Bash", input_schema: { type: "object" } }, { name: "Edit", input_schema: { type: "object" } }]
    }),
    response: JSON.stringify(response)
  })

describe("Anthropic Messages captures", () => {
  const answer = {
    id: "msg_01",
    type: "message",
    role: "assistant",
    model: "claude-sonnet-4-6",
    content: [
      { type: "thinking", thinking: "The name x is undefined.", signature: "sig2" },
      { type: "text", text: "The build fails because `x` is not declared in src/app.ts. I will fix it." },
      { type: "tool_use", id: "toolu_2", name: "Edit", input: { file_path: "src/app.ts", old_string: "x", new_string: "const x = 1" } }
    ],
    stop_reason: "tool_use",
    usage: { input_tokens: 1000, cache_read_input_tokens: 8000, cache_creation_input_tokens: 2000, cache_creation: { ephemeral_5m_input_tokens: 1500, ephemeral_1h_input_tokens: 500 }, output_tokens: 300 }
  }

  it("read into the trace: the system prompt, the turns, the tool loop, the thinking and the answer", () => {
    const derivation = derive(claudeCodeTurn(answer))
    assert.deepStrictEqual(kinds(derivation.logic_trace), [
      "instruction",
      "user_turn",
      "tool_call",
      "tool_result",
      "instruction",
      "reasoning",
      "answer",
      "tool_call"
    ])
    assert.strictEqual(derivation.title, "Why does the build fail? Check with make.", "the harness's reminder is not the ask")
    assert.strictEqual(derivation.outcome, "tool_call")
    assert.strictEqual(derivation.intent, "debugging")
    assert.strictEqual(derivation.evidence.find((item) => item.kind === "tool_result")?.source, "Bash")
  })

  it("artifacts: the command it ran (with what it printed) and the edit it asks for", () => {
    const derivation = derive(claudeCodeTurn(answer))
    const ran = derivation.artifacts.find((artifact) => artifact.kind === "command")!
    assert.deepStrictEqual({ ...ran, result: undefined }, { kind: "command", name: "Bash", language: "shell", content: "make build", result: undefined })
    assert.include(ran.result, "error TS2304")
    const patch = derivation.artifacts.find((artifact) => artifact.kind === "patch")!
    assert.strictEqual(patch.name, "src/app.ts")
    assert.strictEqual(patch.content, "--- src/app.ts\n+++ src/app.ts\n@@\n-x\n+const x = 1")
  })

  it("cost: cache reads, 5-minute and 1-hour writes each at their price, counted once", () => {
    const turn = claudeCodeTurn(answer)
    const usage = captureUsage(turn)
    assert.deepStrictEqual(usage, {
      prompt_tokens: 11000,
      completion_tokens: 300,
      total_tokens: 11300,
      cached_tokens: 8000,
      cache_write_tokens: 2000,
      cache_write_1h_tokens: 500
    })
    // Sonnet 4.6: $3 in, $0.30 read, $3.75 5-minute write, $6 1-hour write, $15 out
    const cost = priceCall({ ...turn, usage })
    assert.strictEqual(cost.total_usd, (1000 * 3 + 8000 * 0.3 + 1500 * 3.75 + 500 * 6 + 300 * 15) / 1e6)
  })

  it("stop reasons: a refusal is a refusal, the token limit truncates", () => {
    const refused = derive(claudeCodeTurn({ ...answer, content: [{ type: "text", text: "I won't run that." }], stop_reason: "refusal" }))
    assert.strictEqual(refused.outcome, "refusal")
    const cut = derive(claudeCodeTurn({ ...answer, content: [{ type: "text", text: "The build" }], stop_reason: "max_tokens" }))
    assert.strictEqual(cut.outcome, "truncated")
  })
})

/** A Codex turn on the Responses API. */
const codexTurn = (input: ReadonlyArray<object>, output: ReadonlyArray<object>, extra: object = {}, context?: ReadonlyArray<object>) =>
  capture({
    v: 2,
    api: "responses",
    provider: "openai",
    provider_type: "openai",
    model: "gpt-5.5",
    request: JSON.stringify({ model: "gpt-5.5", input, tools: [{ type: "function", name: "exec_command" }, { type: "custom", name: "apply_patch" }, { type: "namespace", name: "mcp", tools: [{ type: "function", name: "search" }] }, { type: "web_search" }], ...extra }),
    ...(context === undefined ? {} : { context: JSON.stringify(context) }),
    response: JSON.stringify({ id: "resp_2", object: "response", status: "completed", output, usage: { input_tokens: 5000, input_tokens_details: { cached_tokens: 4000 }, output_tokens: 200, output_tokens_details: { reasoning_tokens: 120 }, total_tokens: 5200 } })
  })

const CODEX_START = [
  { type: "message", role: "developer", content: [{ type: "input_text", text: "You are a coding agent running in the Codex CLI." }] },
  { type: "message", role: "user", content: [{ type: "input_text", text: "<environment_context>\n  <cwd>/srv/app</cwd>\n</environment_context>" }] },
  { type: "message", role: "user", content: [{ type: "input_text", text: "Run the tests and fix what fails" }] }
]
const RAN = [
  { type: "reasoning", summary: [], encrypted_content: "gAAAA" },
  { type: "function_call", call_id: "call_1", name: "exec_command", arguments: JSON.stringify({ cmd: "npm test" }) },
  { type: "function_call_output", call_id: "call_1", output: "1 failing: expected 2 to equal 3" }
]

describe("Responses API captures", () => {
  it("Codex's items: instructions, the ask without the harness's context, the command it ran, and its answer", () => {
    const derivation = derive(codexTurn([...CODEX_START, ...RAN], [
      { type: "reasoning", id: "rs_2", summary: [{ type: "summary_text", text: "The assertion is off by one." }] },
      { type: "custom_tool_call", id: "ctc_1", call_id: "call_2", name: "apply_patch", input: "*** Begin Patch\n*** Update File: src/sum.ts\n-2\n+3\n*** End Patch\n" },
      { type: "function_call", id: "fc_1", call_id: "call_3", name: "search", namespace: "mcp", arguments: "{\"q\":\"sum\"}" }
    ]))
    assert.strictEqual(derivation.title, "Run the tests and fix what fails")
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn", "user_turn", "tool_call", "tool_result", "reasoning", "tool_call", "tool_call"])
    assert.strictEqual(derivation.logic_trace.at(-1)!.tool_name, "mcp.search")
    assert.strictEqual(derivation.outcome, "tool_call")
    const ran = derivation.artifacts.find((artifact) => artifact.kind === "command")!
    assert.deepInclude(ran, { name: "exec_command", content: "npm test", result: "1 failing: expected 2 to equal 3" })
    const patch = derivation.artifacts.find((artifact) => artifact.kind === "patch")!
    assert.deepInclude(patch, { name: "apply_patch", language: "diff" })
    assert.include(patch.content, "*** Update File: src/sum.ts")
    assert.strictEqual(derivation.evidence.find((item) => item.kind === "tool_result")?.source, "exec_command")
  })

  it("usage: input includes the cached tokens, output the reasoning ones; priced once", () => {
    const turn = codexTurn(CODEX_START, [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "Done." }] }])
    assert.deepStrictEqual(captureUsage(turn), { prompt_tokens: 5000, completion_tokens: 200, total_tokens: 5200, cached_tokens: 4000, reasoning_tokens: 120 })
    const cost = priceCall({ ...turn, usage: captureUsage(turn) })
    // gpt-5.5: $5 in, $0.50 cached, $30 out
    assert.strictEqual(cost.total_usd, (1000 * 5 + 4000 * 0.5 + 200 * 30) / 1e6)
  })

  it("a turn continuing a chain: the earlier turns the gateway joined open the trace; the answer's id is kept", () => {
    const turn = codexTurn(
      [{ type: "function_call_output", call_id: "call_1", output: "all tests pass" }],
      [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "All green." }] }],
      { previous_response_id: "resp_1" },
      [...CODEX_START, { type: "function_call", call_id: "call_1", name: "exec_command", arguments: JSON.stringify({ cmd: "npm test" }) }]
    )
    const call = readCall(turn)
    assert.strictEqual(call.continues, "resp_1")
    assert.strictEqual(call.responseId, "resp_2")
    const derivation = derive(turn)
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn", "user_turn", "tool_call", "tool_result", "answer"])
    assert.strictEqual(derivation.title, "Run the tests and fix what fails")
    assert.deepInclude(derivation.artifacts[0]!, { kind: "command", content: "npm test", result: "all tests pass" })
  })

  it("an answer cut at the output limit is truncated; a string input is one user turn", () => {
    const turn = capture({
      v: 2,
      api: "responses",
      request: JSON.stringify({ model: "gpt-5.5", input: "Summarise the outage" }),
      response: JSON.stringify({ id: "resp_3", status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [{ type: "message", content: [{ type: "output_text", text: "The outage" }] }] })
    })
    const derivation = derive(turn)
    assert.strictEqual(derivation.outcome, "truncated")
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["user_turn", "answer"])
  })
})

describe("embeddings captures", () => {
  it("what was embedded, how many vectors of what size, and the price of the input", () => {
    const turn = capture({
      v: 2,
      api: "embeddings",
      model: "text-embedding-3-large",
      request: JSON.stringify({ model: "text-embedding-3-large", input: ["refund policy", "late fees"], dimensions: 1024 }),
      response: JSON.stringify({ object: "list", model: "text-embedding-3-large", data: 2, dimensions: 1024, usage: { prompt_tokens: 6, total_tokens: 6 } })
    })
    const derivation = derive({ ...turn, usage: captureUsage(turn) })
    assert.strictEqual(derivation.title, "Embed 2 inputs (22 characters) with text-embedding-3-large")
    assert.deepStrictEqual(derivation.logic_trace.map((step) => step.text), ["refund policy\nlate fees", "2 embeddings of 1024 dimensions"])
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.cost.total_usd, 6 * 0.13 / 1e6)
  })
})

describe("text the database takes", () => {
  it("an excerpt never ends in half an emoji, and jsonb never gets an unpaired surrogate", () => {
    const text = `${"a".repeat(8)}🤖${"b".repeat(8)}`
    assert.strictEqual(truncate(text, 10), "aaaaaaaa…", "the pair is dropped whole")
    const stored = pgJson({ step: "half \ud83d an emoji" })
    assert.notMatch(stored, /\\ud83d/)
    assert.strictEqual(JSON.parse(stored).step, "half \ufffd an emoji")
  })
})
