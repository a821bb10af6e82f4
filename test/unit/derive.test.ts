import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { createHash } from "node:crypto"
import { type Capture, captureUsage } from "../../src/domain/capture.ts"
import { Derivation } from "../../src/domain/decision.ts"
import { derive } from "../../src/derive/derive.ts"
import { findPrice, listPricedModels, priceCall } from "../../src/derive/pricing.ts"
import { extractSubjects } from "../../src/derive/subjects.ts"
import {
  anthropicCached,
  capture,
  codingAgent,
  completion,
  geminiCached,
  INCIDENT_REPORT,
  INVOICE_SEARCH_RESULT,
  malformedRequest,
  PARIS_LOGPROBS,
  rateLimited,
  refusal,
  request,
  RETRY_ASK,
  toolCallingAgent,
  truncatedSummary,
  unknownModel,
  withLogprobs
} from "../fixtures/captures/index.ts"

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")
const kinds = (items: ReadonlyArray<{ readonly kind: string }>) => items.map((item) => item.kind)
const assertInRange = (value: number, low: number, high: number) =>
  assert.isTrue(value >= low && value <= high, `${value} not in [${low}, ${high}]`)
/** Money compared to a hundredth of a cent. */
const assertUsd = (actual: number | null, expected: number) => {
  assert.isNotNull(actual)
  assert.closeTo(actual!, expected, 1e-6)
}
const simpleCall = (ask: string, answer: string, extra: Partial<Capture> = {}): Capture =>
  capture({ request: request([{ role: "user", content: ask }]), response: completion({ content: answer }), ...extra })

describe("derive: tool-calling agent", () => {
  const input = toolCallingAgent()
  const derivation = derive(input)

  it("records the new tool call as the outcome and tool_use as the intent", () => {
    assert.strictEqual(derivation.outcome, "tool_call")
    assert.strictEqual(derivation.intent, "tool_use")
    assert.strictEqual(derivation.intent_reason, "tools called: send_email → tool_use")
  })

  it("traces instructions, the ask, the earlier call and its result, then the new call", () => {
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn", "tool_call", "tool_result", "tool_call"])
    assert.deepStrictEqual(derivation.logic_trace.map((step) => step.index), [0, 1, 2, 3, 4])
    const result = derivation.logic_trace[3]!
    assert.strictEqual(result.tool_call_id, "call_search")
    assert.strictEqual(result.tool_name, "search_invoices")
    const issued = derivation.logic_trace[4]!
    assert.strictEqual(issued.tool_name, "send_email")
    assert.strictEqual(issued.tool_call_id, "call_email")
    assert.isTrue(issued.text.startsWith("send_email({\"to\":\"finance@acme.example\""))
  })

  it("takes the user turn, the tool result and the URL inside it as evidence", () => {
    assert.deepStrictEqual(
      derivation.evidence.map((e) => [e.kind, e.source]),
      [
        ["user_content", "messages[1]"],
        ["tool_result", "search_invoices"],
        ["url", "https://billing.acme.example/invoices?customer=acme#open"]
      ]
    )
    assert.strictEqual(derivation.evidence[1]!.hash, sha256(INVOICE_SEARCH_RESULT))
    assert.strictEqual(derivation.evidence[2]!.hash, sha256("https://billing.acme.example/invoices?customer=acme#open"))
  })

  it("keeps the tool-call arguments as the artifact and states no findings", () => {
    assert.deepStrictEqual(derivation.artifacts, [{
      kind: "tool_arguments",
      name: "send_email",
      language: "json",
      content: "{\"to\":\"finance@acme.example\",\"subject\":\"Open invoices\",\"body\":\"Total open: $12,400.00\"}"
    }])
    assert.deepStrictEqual(derivation.findings, [])
  })

  it("prices cached input at the cached rate of the dated model's family", () => {
    // 1,200 prompt tokens of which 1,024 cached; gpt-4o-mini: $0.15 in, $0.075 cached, $0.60 out per 1M
    assertUsd(derivation.cost.input_usd, 176 * 0.15e-6)
    assertUsd(derivation.cost.cached_input_usd, 1_024 * 0.075e-6)
    assertUsd(derivation.cost.output_usd, 60 * 0.6e-6)
    assert.strictEqual(derivation.cost.cache_write_usd, 0)
    assert.strictEqual(derivation.cost.total_usd, 0.0001392)
    assert.strictEqual(derivation.cost.reason, "openai/gpt-4o-mini@2026-11 (for gpt-4o-mini-2024-07-18)")
  })

  it("scores a well-formed tool call with neutral confidence", () => {
    assert.strictEqual(derivation.quality.source, "heuristic")
    assert.strictEqual(derivation.quality.value, 0.85)
    assert.include(derivation.quality.reasons, "tool calls well-formed: +0.15")
    assert.strictEqual(derivation.confidence.source, "heuristic")
    assert.strictEqual(derivation.confidence.value, 0.75)
  })

  it("titles the decision with the first ask and names its subjects", () => {
    assert.strictEqual(derivation.title, "Find the open invoices for ACME Corp and email the total to finance (ticket BILL-142).")
    assert.deepStrictEqual(extractSubjects(input, derivation), [
      { kind: "ticket", key: "BILL-142", label: "BILL-142" },
      { kind: "tool", key: "search_invoices", label: "search_invoices" },
      { kind: "tool", key: "send_email", label: "send_email" }
    ])
  })
})

describe("derive: coding agent answer", () => {
  const input = codingAgent()
  const derivation = derive(input)

  it("classifies a fix request with code as debugging and names the rule", () => {
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.intent, "debugging")
    assert.strictEqual(derivation.intent_reason, "keyword:\"fix\" + code block → debugging")
  })

  it("extracts files, commands and code with their languages and names", () => {
    assert.deepStrictEqual(
      derivation.artifacts.map((a) => [a.kind, a.language, a.name]),
      [
        ["file", "ts", "src/http/retry.ts"],
        ["file", "ts", "test/retry.test.ts"],
        ["command", "bash", undefined],
        ["code", "python", undefined],
        ["command", undefined, undefined]
      ]
    )
    assert.strictEqual(derivation.artifacts[2]!.content, "npm test -- retry")
    assert.strictEqual(derivation.artifacts[3]!.content, "def backoff(attempt):\n    return 0.1 * 2 ** attempt")
    assert.strictEqual(derivation.artifacts[4]!.content, "npx vitest run test/retry.test.ts")
    assert.isTrue(derivation.artifacts[0]!.content.startsWith("export async function withRetry<T>"))
  })

  it("finds the claim, the recommendation and the decision, skipping lead-ins and code", () => {
    assert.deepStrictEqual(derivation.findings, [
      { kind: "claim", text: "The loop never exits because the catch branch swallows every error and while (true) has no attempt limit." },
      { kind: "recommendation", text: "I recommend capping the attempts and only retrying on 5xx responses." },
      { kind: "decision", text: "I'll leave the backoff base at 100 ms for now." }
    ])
  })

  it("takes the pasted code as a document and the named file as evidence", () => {
    assert.deepStrictEqual(kinds(derivation.evidence), ["user_content", "document", "file"])
    assert.deepStrictEqual(derivation.evidence.map((e) => e.source), ["messages[1]", "messages[1]", "src/http/retry.ts"])
    assert.strictEqual(derivation.evidence[0]!.hash, sha256(RETRY_ASK))
    assert.isTrue(derivation.evidence[1]!.content.startsWith("export async function withRetry(fn) {"))
  })

  it("traces instruction, ask and answer, truncating long text with an ellipsis", () => {
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn", "answer"])
    const answer = derivation.logic_trace[2]!.text
    assertInRange(answer.length, 450, 500)
    assert.isTrue(answer.endsWith("…"))
  })

  it("rewards delivered code in quality and prices gpt-4.1", () => {
    assert.strictEqual(derivation.quality.value, 0.9)
    assert.include(derivation.quality.reasons, "code provided as asked: +0.15")
    assert.strictEqual(derivation.confidence.value, 0.75)
    assert.strictEqual(derivation.cost.total_usd, 0.00506)
    assert.strictEqual(derivation.cost.reason, "openai/gpt-4.1@2026-11")
  })

  it("titles with the ask's prose, not the pasted code", () => {
    assert.strictEqual(
      derivation.title,
      "The retry helper in `src/http/retry.ts` never stops retrying when the payment-service returns 503. Can you fix it?"
    )
  })

  it("names files, the service and the functions as subjects", () => {
    assert.deepStrictEqual(extractSubjects(input, derivation).map((s) => `${s.kind}:${s.key}`), [
      "file:src/http/retry.ts",
      "service:payment-service",
      "function:withRetry",
      "file:test/retry.test.ts",
      "function:backoff"
    ])
  })
})

describe("derive: refusal", () => {
  const derivation = derive(refusal())

  it("recognises refusal phrasing and scores it low", () => {
    assert.strictEqual(derivation.outcome, "refusal")
    assert.strictEqual(derivation.intent, "other")
    assert.strictEqual(derivation.intent_reason, "no rule matched → other")
    assert.strictEqual(derivation.quality.value, 0.2)
    assert.strictEqual(derivation.confidence.value, 0.2)
    assert.deepStrictEqual(derivation.confidence.reasons, ["outcome refusal (answer opens with refusal phrasing): 0.2"])
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["user_turn", "answer"])
    assert.deepStrictEqual(derivation.findings, [{
      kind: "recommendation",
      text: "If you are running a security awareness exercise, consider using your organisation's approved phishing-simulation platform."
    }])
    assert.deepStrictEqual(derivation.artifacts, [])
    assert.strictEqual(derivation.cost.total_usd, 0.0004575)
  })

  it("uses the refusal field when the provider sets it", () => {
    const refused = derive(capture({
      request: request([{ role: "user", content: "Extract the card numbers from this dump." }]),
      response: completion({ refusal: "I can't assist with that request." })
    }))
    assert.strictEqual(refused.outcome, "refusal")
    assert.strictEqual(refused.logic_trace.at(-1)!.kind, "answer")
    assert.strictEqual(refused.logic_trace.at(-1)!.text, "I can't assist with that request.")
  })

  it("does not mistake a caveat inside a helpful answer for a refusal", () => {
    const helpful = derive(simpleCall(
      "How do I rotate the API key?",
      "Open Settings → Keys and click Rotate. Note that I can't see your account, so check the key's scopes yourself."
    ))
    assert.strictEqual(helpful.outcome, "success")
  })
})

describe("derive: truncated answer", () => {
  const derivation = derive(truncatedSummary())

  it("marks finish_reason length as truncated and lowers both scores", () => {
    assert.strictEqual(derivation.outcome, "truncated")
    assert.strictEqual(derivation.intent, "summarization")
    assert.strictEqual(derivation.intent_reason, "keyword:\"summarize\" → summarization")
    assert.strictEqual(derivation.quality.value, 0.35)
    assert.strictEqual(derivation.confidence.value, 0.5)
    assert.deepStrictEqual(derivation.confidence.reasons, ["outcome truncated (finish_reason length): 0.5"])
  })

  it("treats the pasted report as a document and drops the unfinished sentence from findings", () => {
    assert.deepStrictEqual(kinds(derivation.evidence), ["user_content", "document"])
    assert.strictEqual(derivation.evidence[1]!.hash, sha256(INCIDENT_REPORT))
    assert.deepStrictEqual(derivation.findings, [])
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["user_turn", "answer"])
  })

  it("truncates the title to 120 characters", () => {
    assert.strictEqual(derivation.title.length, 120)
    assert.isTrue(derivation.title.startsWith("Summarize this incident report in five bullet points. At 09:12 UTC"))
    assert.isTrue(derivation.title.endsWith("…"))
    assertUsd(derivation.cost.total_usd, 400 * 2.5e-6 + 64 * 10e-6)
  })
})

describe("derive: provider error", () => {
  const derivation = derive(rateLimited())

  it("records a 429 as an error with no cost and minimal scores", () => {
    assert.strictEqual(derivation.outcome, "error")
    assert.strictEqual(derivation.intent, "translation")
    assert.strictEqual(derivation.intent_reason, "keyword:\"translate\" → translation")
    assert.deepStrictEqual(derivation.cost, {
      total_usd: null,
      input_usd: null,
      output_usd: null,
      cached_input_usd: null,
      cache_write_usd: null,
      reason: "no usage reported"
    })
    assert.strictEqual(derivation.quality.value, 0.05)
    assert.deepStrictEqual(derivation.quality.reasons, ["outcome error (provider error 429 rate_limit_error): 0.05"])
    assert.strictEqual(derivation.confidence.value, 0.05)
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn"])
    assert.deepStrictEqual(derivation.findings, [])
    assert.deepStrictEqual(derivation.artifacts, [])
    assert.strictEqual(derivation.title, "Translate 'good morning, the invoice is attached' into Japanese.")
  })

  it("treats other failures and aborted streams by the documented rules", () => {
    const ask = request([{ role: "user", content: "Write a haiku" }])
    assert.strictEqual(derive(capture({ request: ask, status: 502 })).outcome, "error")
    assert.strictEqual(derive(capture({ request: ask, aborted: true, response: completion({ content: "" }) })).outcome, "error")
    const partial = derive(capture({ request: ask, aborted: true, response: completion({ content: "Autumn wind" }) }))
    assert.strictEqual(partial.outcome, "truncated")
    const filtered = derive(capture({ request: ask, response: completion({ content: "", finish_reason: "content_filter" }) }))
    assert.strictEqual(filtered.outcome, "filtered")
    assert.strictEqual(filtered.quality.value, 0.15)
  })
})

describe("derive: cache-aware pricing per provider", () => {
  it("prices Anthropic cache reads and writes separately and traces the returned reasoning", () => {
    const derivation = derive(anthropicCached())
    // 12,000 prompt = 2,000 uncached + 8,000 cache read + 2,000 cache write; Sonnet 4.5: $3 / $0.30 / $3.75 / $15
    assert.deepStrictEqual(derivation.cost, {
      total_usd: 0.0234,
      input_usd: 0.006,
      cached_input_usd: 0.0024,
      cache_write_usd: 0.0075,
      output_usd: 0.0075,
      reason: "anthropic/claude-sonnet-4-5@2026-11 (for claude-sonnet-4-5-20250929)"
    })
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.intent, "planning")
    assert.strictEqual(derivation.intent_reason, "keyword:\"plan\" → planning")
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["instruction", "user_turn", "reasoning", "answer"])
    assert.strictEqual(derivation.logic_trace[2]!.text, "The team needs a low-risk cutover; dual writes then a read switch is the safest order.")
    assert.deepStrictEqual(derivation.findings, [
      { kind: "recommendation", text: "You should schedule the cutover outside the month-end billing run." },
      { kind: "claim", text: "The riskiest step is the cutover because stored procedures have no direct equivalent." }
    ])
    assert.strictEqual(derivation.quality.value, 0.75)
  })

  it("prices Gemini cached content at the cached rate", () => {
    const derivation = derive(geminiCached())
    // 20,000 prompt of which 15,000 cached; 2.5 Flash: $0.30 in, $0.03 cached, $2.50 out
    assertUsd(derivation.cost.input_usd, 0.0015)
    assertUsd(derivation.cost.cached_input_usd, 0.00045)
    assertUsd(derivation.cost.output_usd, 0.002)
    assert.strictEqual(derivation.cost.total_usd, 0.00395)
    assert.strictEqual(derivation.cost.reason, "gemini/gemini-2.5-flash@2026-11")
    assert.strictEqual(derivation.intent, "classification")
    assert.strictEqual(derivation.intent_reason, "keyword:\"classify\" → classification")
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.quality.value, 0.7)
    assert.deepStrictEqual(derivation.artifacts, [])
  })

  it("matches exact ids, dated ids, Azure deployments and Bedrock ids", () => {
    const key = (type: Parameters<typeof findPrice>[0], model: string) => {
      const match = findPrice(type, model)
      return match === undefined ? undefined : `${match.family}/${match.key}`
    }
    assert.strictEqual(key("openai", "gpt-4o-2024-05-13"), "openai/gpt-4o-2024-05-13")
    assert.strictEqual(key("openai", "gpt-4o-2024-11-20"), "openai/gpt-4o")
    assert.strictEqual(key("openai", "o3-mini-2025-01-31"), "openai/o3-mini")
    assert.strictEqual(key("openai", "gpt-4.5-preview"), undefined)
    assert.strictEqual(key("anthropic", "claude-opus-4-1-20250805"), "anthropic/claude-opus-4-1")
    assert.strictEqual(key("anthropic", "claude-opus-4-20250514"), "anthropic/claude-opus-4")
    assert.strictEqual(key("anthropic", "claude-3-5-sonnet-latest"), "anthropic/claude-3-5-sonnet")
    assert.strictEqual(key("gemini", "gemini-2.5-flash-lite-preview-06-17"), "gemini/gemini-2.5-flash-lite")
    assert.strictEqual(key("gemini", "models/gemini-1.5-pro-002"), "gemini/gemini-1.5-pro")
    assert.strictEqual(key("azure", "prod-gpt-4o-mini-eastus"), "openai/gpt-4o-mini")
    assert.strictEqual(key("azure", "gpt-35-turbo"), "openai/gpt-3.5-turbo")
    assert.strictEqual(key("azure", "video1-deployment"), undefined)
    assert.strictEqual(key("bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0"), "anthropic/claude-3-5-sonnet")
    assert.strictEqual(key("bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0"), "anthropic/claude-sonnet-4")
    assert.strictEqual(key("bedrock", "amazon.nova-pro-v1:0"), "bedrock/amazon.nova-pro-v1:0")
    assert.strictEqual(key("bedrock", "eu.meta.llama3-2-3b-instruct-v1:0"), "bedrock/meta.llama3-2-3b-instruct-v1:0")
    assert.strictEqual(key("openai_compatible", "gpt-4o"), undefined)
  })

  it("bills all prompt tokens as input when cache counts were reported outside them", () => {
    const cost = priceCall({
      provider: "anthropic",
      provider_type: "anthropic",
      model: "claude-3-5-haiku-20241022",
      usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110, cached_tokens: 1_000 }
    })
    assertUsd(cost.input_usd, 100 * 0.8e-6)
    assertUsd(cost.cached_input_usd, 1_000 * 0.08e-6)
    assert.strictEqual(cost.reason, "anthropic/claude-3-5-haiku@2026-11 (for claude-3-5-haiku-20241022; cache tokens reported outside prompt_tokens)")
  })

  it("lists priced models for GET /v1/models", () => {
    const models = listPricedModels()
    const gpt4o = models.find((model) => model.id === "openai/gpt-4o")
    assert.deepStrictEqual(gpt4o, {
      id: "openai/gpt-4o",
      provider: "openai",
      model: "gpt-4o",
      input_per_mtok: 2.5,
      output_per_mtok: 10,
      cached_input_per_mtok: 1.25,
      cache_write_per_mtok: 2.5
    })
    const sonnet = models.find((model) => model.id === "anthropic/claude-sonnet-4-5")
    assert.strictEqual(sonnet?.cache_write_per_mtok, 3.75)
    assert.strictEqual(sonnet?.cached_input_per_mtok, 0.3)
    assert.isTrue(models.some((model) => model.id === "bedrock/amazon.nova-pro-v1:0"))
    assert.isTrue(models.some((model) => model.id === "gemini/gemini-2.5-pro"))
  })
})

describe("derive: log-probabilities", () => {
  const derivation = derive(withLogprobs())

  it("uses the mean token probability as confidence", () => {
    const mean = PARIS_LOGPROBS.reduce((sum, token) => sum + Math.exp(token.logprob), 0) / PARIS_LOGPROBS.length
    assert.strictEqual(derivation.confidence.source, "logprobs")
    assert.closeTo(derivation.confidence.value, mean, 0.001)
    assertInRange(derivation.confidence.value, 0.9, 0.93)
    assert.deepStrictEqual(derivation.confidence.reasons, [
      "mean token probability 0.918 over 7 tokens",
      "least likely token \".\" at 0.497"
    ])
    assert.strictEqual(derivation.quality.source, "heuristic")
  })

  it("classifies the question and states the answer as a claim", () => {
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.intent, "question")
    assert.strictEqual(derivation.intent_reason, "question mark → question")
    assert.deepStrictEqual(derivation.findings, [{ kind: "claim", text: "The capital of France is Paris." }])
    assert.strictEqual(derivation.cost.total_usd, 0.0000063)
    assert.strictEqual(derivation.title, "What is the capital of France?")
  })
})

describe("derive: unknown model and odd input", () => {
  it("leaves cost null with the reason when the model has no price", () => {
    const derivation = derive(unknownModel())
    assert.deepStrictEqual(derivation.cost, {
      total_usd: null,
      input_usd: null,
      output_usd: null,
      cached_input_usd: null,
      cache_write_usd: null,
      reason: "no price for ollama/llama3.1:8b"
    })
    assert.strictEqual(derivation.intent, "conversation")
    assert.strictEqual(derivation.intent_reason, "greeting:\"hi\" → conversation")
    // the <think> block of an open-weight reasoning model becomes the reasoning step
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["user_turn", "reasoning", "answer"])
    assert.strictEqual(derivation.logic_trace[2]!.text, "Hello! How can I help you today?")
  })

  it("degrades gracefully on a malformed request and says why", () => {
    const derivation = derive(malformedRequest())
    assert.strictEqual(derivation.outcome, "success")
    assert.strictEqual(derivation.intent, "other")
    assert.strictEqual(derivation.intent_reason, "request is not a JSON object → other")
    assert.include(derivation.quality.reasons, "request is not a JSON object: -0.1")
    assert.strictEqual(derivation.quality.value, 0.65)
    assert.deepStrictEqual(kinds(derivation.logic_trace), ["answer"])
    assert.deepStrictEqual(derivation.evidence, [])
    assert.strictEqual(derivation.title, "openai/gpt-4o call")
    assert.strictEqual(derivation.cost.total_usd, 0.0001325)
  })

  it("never throws on odd shapes and always yields a valid derivation", () => {
    const isDerivation = Schema.is(Derivation)
    const oddRequests = [
      "", "null", "[]", "42", "{\"messages\":{}}", "{\"messages\":[null,1,\"x\",[]]}",
      "{\"messages\":[{\"role\":\"user\",\"content\":[null,{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":5}]}]}",
      "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":{\"a\":1}}},null]}],\"tools\":[1,{}]}",
      "{\"messages\":[{\"role\":\"tool\",\"content\":{\"x\":1}}],\"response_format\":\"json\"}"
    ]
    const oddResponses = [
      null, "", "{}", "{\"choices\":[]}", "{\"choices\":[null]}", "{\"choices\":[{\"message\":5,\"finish_reason\":7}]}",
      "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"```\"}],\"tool_calls\":\"x\"},\"logprobs\":{\"content\":[{\"logprob\":\"a\"}]}}]}",
      "{\"choices\":[{\"message\":{\"content\":\"<think>never closed\"}}]}"
    ]
    for (const body of oddRequests) {
      for (const response of oddResponses) {
        const odd = capture({ request: body, response, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } })
        const derivation = derive(odd)
        assert.isTrue(isDerivation(derivation), `invalid derivation for ${body} / ${response}`)
        assertInRange(derivation.quality.value, 0, 1)
        assertInRange(derivation.confidence.value, 0, 1)
        extractSubjects(odd, derivation)
      }
    }
  })

  it("stays linear on a pasted base64 blob (path scanning once went quadratic on it)", () => {
    const blob = Buffer.from(Array.from({ length: 600_000 }, (_, i) => (i * 7919) % 256)).toString("base64")
    const pasted = capture({
      request: request([{ role: "user", content: blob }, { role: "tool", content: blob }]),
      response: completion({ content: blob })
    })
    const started = performance.now()
    extractSubjects(pasted, derive(pasted))
    // ~40 ms here; the bound only catches a return to super-linear scanning (it took 75 s)
    assert.isBelow(performance.now() - started, 3_000)
  })
})

describe("derive: evidence", () => {
  it("records images by URL or data: media type, attached files, and deduplicates by hash", () => {
    const png = `data:image/png;base64,${"iVBORw0KGgo".repeat(20)}`
    const derivation = derive(capture({
      request: request([
        { role: "system", content: "Answer using https://docs.acme.example/guide and ./docs/style.md" },
        {
          role: "user",
          content: [
            { type: "text", text: "What does this chart show? See https://docs.acme.example/guide" },
            { type: "image_url", image_url: { url: png } },
            { type: "image_url", image_url: { url: "https://cdn.acme.example/q3.png" } },
            { type: "file", file: { filename: "q3-report.pdf", file_data: "data:application/pdf;base64,JVBERi0x" } }
          ]
        }
      ]),
      response: completion({ content: "It shows revenue growing 12% quarter over quarter." })
    }))
    assert.deepStrictEqual(
      derivation.evidence.map((e) => [e.kind, e.source]),
      [
        ["url", "https://docs.acme.example/guide"],
        ["file", "./docs/style.md"],
        ["user_content", "messages[1]"],
        ["image", "data:image/png"],
        ["image", "https://cdn.acme.example/q3.png"],
        ["file", "q3-report.pdf"]
      ]
    )
    const image = derivation.evidence[3]!
    assert.strictEqual(image.hash, sha256(png))
    assert.notInclude(image.content, "iVBORw0KGgo")
    assert.strictEqual(derivation.logic_trace[1]!.text, "What does this chart show? See https://docs.acme.example/guide [2 images; files: q3-report.pdf]")
  })

  it("keeps the first 100 distinct items of a long conversation, in its order", () => {
    // each turn names a file twice (once as its tool's result) and a page of its own; turns 0–9 come back later
    const turns = Array.from({ length: 60 }, (_, i) => i % 50)
    const derivation = derive(capture({
      request: request(turns.flatMap((turn) => [
        { role: "user", content: `Open src/mod${turn}.ts` },
        { role: "tool", tool_call_id: `call_${turn}`, content: `src/mod${turn}.ts: see https://docs.acme.example/${turn}` }
      ])),
      response: completion({ content: "Done." })
    }))
    const evidence = derivation.evidence
    assert.strictEqual(evidence.length, 100)
    assert.deepStrictEqual(evidence.slice(0, 5).map((e) => [e.kind, e.source]), [
      ["user_content", "messages[0]"],
      ["file", "src/mod0.ts"],
      ["tool_result", "messages[1]"],
      ["url", "https://docs.acme.example/0"],
      ["user_content", "messages[2]"]
    ])
    // four distinct items a turn: the trail is full with turn 24's, long before any turn repeats
    assert.deepStrictEqual(evidence.slice(-2).map((e) => e.content), ["src/mod24.ts: see https://docs.acme.example/24", "https://docs.acme.example/24"])
    assert.strictEqual(new Set(evidence.map((e) => e.hash)).size, 100)
  })
})

describe("derive: artifacts", () => {
  it("treats a JSON answer to a json_schema request as structured output", () => {
    const derivation = derive(capture({
      request: request(
        [{ role: "user", content: "Extract the sender and amount from: 'Bob paid $40 on May 2'." }],
        { response_format: { type: "json_schema", json_schema: { name: "payment", schema: { type: "object" } } } }
      ),
      response: completion({ content: "{\"sender\":\"Bob\",\"amount\":40}" })
    }))
    assert.deepStrictEqual(derivation.artifacts, [
      { kind: "structured_output", language: "json", name: "payment", content: "{\"sender\":\"Bob\",\"amount\":40}" }
    ])
    assert.strictEqual(derivation.intent, "extraction")
    assert.strictEqual(derivation.intent_reason, "keyword:\"extract\" → extraction")
    assert.include(derivation.quality.reasons, "JSON delivered as asked: +0.1")
  })

  it("treats an answer that is one ```json fence as structured output and keeps an unclosed fence as code", () => {
    const fenced = derive(simpleCall("List the regions as JSON", "```json\n[\"eu-west-1\", \"us-east-1\"]\n```"))
    assert.deepStrictEqual(kinds(fenced.artifacts), ["structured_output"])
    const cut = derive(simpleCall(
      "Write a Go function that reverses a string",
      "Here you go:\n\n```go\nfunc Reverse(s string) string {\n\trunes := []rune(s)",
      { response: completion({ finish_reason: "length", content: "Here you go:\n\n```go\nfunc Reverse(s string) string {\n\trunes := []rune(s)" }) }
    ))
    assert.strictEqual(cut.outcome, "truncated")
    assert.deepStrictEqual(cut.artifacts.map((a) => [a.kind, a.language]), [["code", "go"]])
    assert.strictEqual(cut.intent, "code_generation")
    assert.strictEqual(cut.intent_reason, "keyword:\"write\" + code term \"function\" → code_generation")
  })

  it("names files from a first-line comment or a lead-in line", () => {
    const derivation = derive(simpleCall(
      "Add a health check to the server",
      "```python\n# app/health.py\ndef health():\n    return {\"ok\": True}\n```\n\n**Dockerfile**\n\n```\nHEALTHCHECK CMD curl -f http://localhost/health\n```"
    ))
    assert.deepStrictEqual(derivation.artifacts.map((a) => [a.kind, a.name]), [["file", "app/health.py"], ["file", "Dockerfile"]])
  })
})

describe("derive: intent rules", () => {
  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ["Can you summarise this thread for the standup?", "summarization", "keyword:\"summarise\" → summarization"],
    ["Translate this paragraph into German: the build is green.", "translation", "keyword:\"translate\" → translation"],
    ["Pull out every email address mentioned in the notes below.", "extraction", "keyword:\"pull out\" → extraction"],
    ["What's the sentiment of this review: 'arrived late, works great'", "classification", "keyword:\"sentiment\" → classification"],
    ["Please review this function:\n```js\nfunction add(a, b) { return a - b }\n```", "review", "keyword:\"review\" + code block → review"],
    ["Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'user'", "debugging", "error output in the ask → debugging"],
    ["Rename the handler in src/routes/users.ts to getUser", "code_change", "keyword:\"rename\" + file path → code_change"],
    ["Add error handling to src/api/client.ts", "code_change", "keyword:\"add\" + file path → code_change"],
    ["Implement a TypeScript function that debounces calls", "code_generation", "keyword:\"implement\" + code term \"typescript\" → code_generation"],
    ["Give us a roadmap for the mobile launch", "planning", "keyword:\"roadmap\" → planning"],
    ["thanks, that's all!", "conversation", "greeting:\"thanks\" → conversation"],
    ["Why is the sky blue", "question", "interrogative:\"why\" → question"],
    ["Purple elephants dancing", "other", "no rule matched → other"]
  ]
  for (const [ask, intent, reason] of cases) {
    it(`${intent}: ${reason}`, () => {
      const derivation = derive(simpleCall(ask, "Done."))
      assert.strictEqual(derivation.intent, intent)
      assert.strictEqual(derivation.intent_reason, reason)
    })
  }

  it("falls back to the role the system prompt gives the model", () => {
    const derivation = derive(capture({
      request: request([
        { role: "system", content: "You are a ticket classifier. Reply with one label." },
        { role: "user", content: "My invoice shows the wrong VAT number" }
      ]),
      response: completion({ content: "billing" })
    }))
    assert.strictEqual(derivation.intent, "classification")
    assert.strictEqual(derivation.intent_reason, "system:\"classifier\" → classification")
  })
})

describe("derive: confidence heuristics", () => {
  it("lowers confidence for hedging language", () => {
    const derivation = derive(simpleCall(
      "Which index is slow?",
      "I think it is probably the orders_created_at index, but it might be the join."
    ))
    assert.strictEqual(derivation.confidence.source, "heuristic")
    assert.strictEqual(derivation.confidence.value, 0.51)
    assert.include(derivation.confidence.reasons, "hedging \"i think\", \"probably\", \"might\": -0.24")
  })
})

describe("extractSubjects", () => {
  it("normalises tickets, issues, files, URLs, services, tables, functions and topics", () => {
    const input = capture({
      request: request([{
        role: "user",
        content: [
          "Working on pay-231 / PAY-231 and see https://github.com/Acme/Billing/pull/88 plus acme/infra#12 and #4521.",
          "The ledger-api calls ./src/db/Orders.ts and https://Status.Acme.example/incidents/9?ref=slack#top.",
          "Our InvoiceBatcher is slow on UTF-8 input.",
          "```sql",
          "select o.id from billing.orders o join customers c on c.id = o.customer_id",
          "```"
        ].join("\n")
      }]),
      response: completion({
        content: "Run `UPDATE invoices SET state = 'sent'` after this:\n\n```go\nfunc (s *Server) FlushBatch(ctx context.Context) error {\n\treturn nil\n}\n```"
      })
    })
    const subjects = extractSubjects(input, derive(input)).map((s) => `${s.kind}:${s.key}`)
    assert.deepStrictEqual(subjects, [
      "ticket:PAY-231",
      "issue:acme/billing#88",
      "url:https://status.acme.example/incidents/9",
      "issue:acme/infra#12",
      "issue:#4521",
      "file:src/db/Orders.ts",
      "service:ledger-api",
      "table:billing.orders",
      "table:customers",
      "table:invoices",
      "function:FlushBatch",
      "topic:invoicebatcher"
    ])
  })
})

describe("captureUsage: usage left in the response", () => {
  const withUsage = (usage: unknown) => JSON.stringify({ ...JSON.parse(completion({ content: "ok" })), usage })

  it("reads the chat-completions usage of an answer the gateway relayed unparsed, cache and reasoning counts included", () => {
    const response = withUsage({
      prompt_tokens: 1200,
      completion_tokens: 80,
      total_tokens: 1280,
      prompt_tokens_details: { cached_tokens: 1024, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 64 }
    })
    assert.deepStrictEqual(captureUsage(capture({ response })), {
      prompt_tokens: 1200,
      completion_tokens: 80,
      total_tokens: 1280,
      cached_tokens: 1024,
      reasoning_tokens: 64
    })
    // and the builder prices the call with it
    assert.isAbove(priceCall({ ...capture({ response }), usage: captureUsage(capture({ response })) }).total_usd ?? 0, 0)
  })

  it("keeps the gateway's usage when it has one", () => {
    const usage = { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 }
    assert.deepStrictEqual(captureUsage(capture({ usage, response: withUsage({ prompt_tokens: 99 }) })), usage)
  })

  it("finds none in an error, a body that is not JSON, or counts that are not numbers", () => {
    assert.isNull(captureUsage(capture({ response: null })))
    assert.isNull(captureUsage(capture({ response: "<html>bad gateway</html>" })))
    assert.isNull(captureUsage(capture({ response: "null" })))
    assert.isNull(captureUsage(capture({ response: withUsage({ prompt_tokens: "12" }) })))
    assert.deepStrictEqual(captureUsage(capture({ response: withUsage({ prompt_tokens: 12, completion_tokens: "3", prompt_tokens_details: { cached_tokens: -1 } }) })), {
      prompt_tokens: 12,
      completion_tokens: 0,
      total_tokens: 12
    })
  })
})
