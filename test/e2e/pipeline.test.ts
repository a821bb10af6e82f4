/**
 * The pipeline end to end: calls through the gateway (the official `openai` client, fake providers), captures on
 * the Redis stream, the decision builder, and the decisions, session and agent read back through the query layer
 * (`LedgerQuery`, what REST and MCP serve) — plus the pipeline figures on /metrics.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import OpenAI from "openai"
import { BuilderLive } from "../../layers/Builder.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Health } from "../../src/serving/Health.ts"
import { PipelineMetrics } from "../../src/ops/PipelineMetrics.ts"
import { LedgerQuery } from "../../src/query/LedgerQuery.ts"
import { LedgerQueryLive } from "../../src/query/ReadModel.ts"
import { gatewayStack } from "../support/gateway-stack.ts"
import { gatewayClient } from "../support/openai-client.ts"

const PROVIDER_KEY = "sk-provider-test-0123456789"

describe("pipeline: gateway → stream → builder → query layer", () => {
  it.live("every call through the gateway becomes a decision, visible over the query layer", () =>
    Effect.gen(function*() {
      const stack = yield* gatewayStack({ layer: Layer.mergeAll(BuilderLive, LedgerQueryLive) })
      const client = gatewayClient(stack, {
        query: { agent_id: "agent-pipeline", agent_name: "Pipeline agent", execution_id: "run-42" },
        providerKey: PROVIDER_KEY
      })
      const call = (model: string, content: string, extra: Partial<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming> = {}) =>
        Effect.promise(async () => {
          const { response } = await client.chat.completions.create({ model, messages: [{ role: "user", content }], ...extra })
            .withResponse()
            .catch((error: unknown) => {
              if (error instanceof OpenAI.APIError && error.headers !== undefined) return { response: { headers: error.headers } }
              throw error
            })
          return response.headers.get("x-ledger-id")!
        })
      const streamed = Effect.promise(async () => {
        const { data, response } = await client.chat.completions.create({
          model: "anthropic/claude-sonnet-4-5",
          stream: true,
          messages: [{ role: "user", content: "Summarize the retry policy of payment-service in two lines" }]
        }).withResponse()
        for await (const _ of data) { /* drain */ }
        return response.headers.get("x-ledger-id")!
      })

      const answered = yield* call("openai/gpt-4o-mini", "What is the capital of France?")
      const tool = yield* call("openai/gpt-4o-mini", "Look up invoice INV-2211 [[tool]]", {
        tools: [{ type: "function", function: { name: "lookup_invoice", parameters: { type: "object", properties: { query: { type: "string" } } } } }]
      })
      const failed = yield* call("gemini/gemini-2.5-flash", "Translate good morning into Japanese [[error:429]]")
      const summary = yield* streamed
      const ids = [answered, tool, failed, summary]
      for (const id of ids) assert.match(id, /^[0-9a-f-]{36}$/)

      const principal = yield* Context.get(stack.context, Authenticator).authenticate(stack.pat, "pat")
      const query = Context.get(stack.context as Context.Context<LedgerQuery>, LedgerQuery)
      const decisions = yield* Effect.forEach(ids, (id) =>
        query.getDecision(principal, id).pipe(
          Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 200 }),
          Effect.orDie
        ))

      const [first, second, third, fourth] = decisions
      assert.deepStrictEqual(decisions.map((d) => [d.provider, d.model, d.outcome]), [
        ["openai", "gpt-4o-mini", "success"],
        ["openai", "gpt-4o-mini", "tool_call"],
        ["gemini", "gemini-2.5-flash", "error"],
        ["anthropic", "claude-sonnet-4-5", "success"]
      ])
      assert.strictEqual(first!.intent, "question")
      assert.isAbove(first!.cost_usd ?? 0, 0)
      assert.strictEqual(second!.artifacts[0]?.kind, "tool_arguments")
      assert.strictEqual(third!.cost_usd, null)
      assert.strictEqual(fourth!.intent, "summarization")
      assert.isTrue(fourth!.stream)
      assert.strictEqual(new Set(decisions.map((d) => d.session_id)).size, 1, "one execution: one session")

      const session = yield* query.getSession(principal, first!.session_id)
      assert.strictEqual(session.execution_id, "run-42")
      assert.strictEqual(session.decision_count, 4)
      assert.strictEqual(session.error_count, 1)
      const agents = yield* query.listAgents(principal, {})
      const agent = agents.data.find((a) => a.agent_id === "agent-pipeline")!
      assert.strictEqual(agent.agent_name, "Pipeline agent")
      assert.strictEqual(agent.decision_count, 4)
      assert.strictEqual(agent.session_count, 1)

      // the pipeline figures on /metrics (the API port serves the same process registry)
      yield* Context.get(stack.context, PipelineMetrics).refresh
      const metrics = yield* Context.get(stack.context, Health).metrics
      for (const name of ["ledger_stream_length", "ledger_stream_group_lag", "ledger_stream_pending", "ledger_stream_oldest_pending_seconds", "ledger_stream_oldest_waiting_seconds", "ledger_dead_letters"]) {
        assert.match(metrics, new RegExp(`^${name} \\d`, "m"), name)
      }
      assert.match(metrics, /^ledger_decisions_built_total [1-9]/m)
      assert.match(metrics, /^ledger_build_latency_seconds_bucket\{le="\+Inf"\} [1-9]/m)
      assert.match(metrics, /^ledger_builder_lock_wait_seconds_total \d/m)
    }).pipe(Effect.scoped), 60_000)
})
