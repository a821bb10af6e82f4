/**
 * A decision: one captured model call rebuilt into an audit trail (docs/ARCHITECTURE.md, "Deriving a decision").
 * The same schemas back the builder's derivation, the stored rows, REST bodies and MCP structuredContent.
 */
import { Schema } from "effect"
import { CaptureApi, CaptureSource } from "./capture.ts"
import { Usage } from "./usage.ts"

export const Outcome = Schema.Literals(["success", "tool_call", "refusal", "truncated", "filtered", "error"])
export type Outcome = typeof Outcome.Type

export const Intent = Schema.Literals([
  "question",
  "code_generation",
  "code_change",
  "debugging",
  "review",
  "planning",
  "summarization",
  "extraction",
  "classification",
  "translation",
  "tool_use",
  "conversation",
  "other"
])
export type Intent = typeof Intent.Type

/** One ordered step of what happened in the call. */
export const LogicStep = Schema.Struct({
  index: Schema.Number,
  kind: Schema.Literals(["instruction", "user_turn", "assistant_turn", "reasoning", "tool_call", "tool_result", "answer"]),
  /** short human-readable text of the step (truncated for long content) */
  text: Schema.String,
  tool_name: Schema.optional(Schema.String),
  tool_call_id: Schema.optional(Schema.String)
})
export type LogicStep = typeof LogicStep.Type

/** Something the model was given to rely on. */
export const Evidence = Schema.Struct({
  kind: Schema.Literals(["user_content", "tool_result", "document", "url", "file", "image"]),
  /** where it came from: `message[3]`, a tool name, a URL, a file path */
  source: Schema.String,
  /** excerpt (truncated) */
  content: Schema.String,
  /** sha256 hex of the full content */
  hash: Schema.String
})
export type Evidence = typeof Evidence.Type

/** A conclusion the answer states. */
export const Finding = Schema.Struct({
  kind: Schema.Literals(["claim", "recommendation", "decision"]),
  text: Schema.String
})
export type Finding = typeof Finding.Type

/**
 * Something the call produced: in its answer (code, structured output, files, the commands and patches its tool calls
 * ask for), or — for a coding agent's turn — the commands it ran just before this call, with what they printed.
 */
export const Artifact = Schema.Struct({
  kind: Schema.Literals(["code", "structured_output", "tool_arguments", "file", "command", "patch"]),
  language: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  content: Schema.String,
  /** for a command that was run: what it printed (excerpt), as the call read it */
  result: Schema.optional(Schema.String)
})
export type Artifact = typeof Artifact.Type

/** A score in [0,1] with how it was arrived at. */
export const Score = Schema.Struct({
  value: Schema.Number,
  source: Schema.Literals(["logprobs", "heuristic", "model"]),
  reasons: Schema.Array(Schema.String)
})
export type Score = typeof Score.Type

/** Cost breakdown; `total_usd` null with a reason when the model has no known price. */
export const Cost = Schema.Struct({
  total_usd: Schema.NullOr(Schema.Number),
  input_usd: Schema.NullOr(Schema.Number),
  output_usd: Schema.NullOr(Schema.Number),
  cached_input_usd: Schema.NullOr(Schema.Number),
  cache_write_usd: Schema.NullOr(Schema.Number),
  /** price table entry used, e.g. `openai/gpt-4o@2024-08`; or why there is none */
  reason: Schema.String
})
export type Cost = typeof Cost.Type

/** Everything the builder derives from one capture (the part `ledger rebuild` recomputes). */
export const Derivation = Schema.Struct({
  outcome: Outcome,
  intent: Intent,
  intent_reason: Schema.String,
  cost: Cost,
  quality: Score,
  confidence: Score,
  logic_trace: Schema.Array(LogicStep),
  evidence: Schema.Array(Evidence),
  findings: Schema.Array(Finding),
  artifacts: Schema.Array(Artifact),
  /** one-line description of what the call was about (first user ask, truncated) */
  title: Schema.String
})
export type Derivation = typeof Derivation.Type

export const NullableUsage = Schema.NullOr(Usage)

/** A decision as listed (no heavy trail). */
export const DecisionSummary = Schema.Struct({
  ledger_id: Schema.String,
  session_id: Schema.String,
  agent_id: Schema.String,
  execution_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  provider: Schema.String,
  model: Schema.String,
  title: Schema.String,
  intent: Intent,
  outcome: Outcome,
  cost_usd: Schema.NullOr(Schema.Number),
  quality: Schema.Number,
  confidence: Schema.Number,
  latency_ms: Schema.Number,
  status: Schema.Number,
  usage: NullableUsage
})
export type DecisionSummary = typeof DecisionSummary.Type

/**
 * A decision's place in its workspace's keyed hash chain (docs/ARCHITECTURE.md, "Integrity"): what `ledger verify`
 * checks, quoted so a reader can hold the ledger to it. Hashes are lowercase hex.
 */
export const DecisionIntegrity = Schema.Struct({
  /** position in the workspace's chain: from 1, gapless, in the order decisions were recorded */
  seq: Schema.Number,
  /** HMAC-SHA-256 over the captured facts, `prev_hash` and the hash of the raw exchange */
  hash: Schema.String,
  /** the `hash` of the decision at `seq - 1` (zeros for the first) */
  prev_hash: Schema.String,
  /** when the decision was chained; never earlier than its predecessor's */
  recorded_at: Schema.String,
  /** id of the integrity key the hash was made with */
  chain_key: Schema.Number
})
export type DecisionIntegrity = typeof DecisionIntegrity.Type

/** One decision with its full audit trail. */
export const Decision = Schema.Struct({
  ...DecisionSummary.fields,
  /** the API the call was made on: chat completions, the Responses API, Anthropic Messages, embeddings */
  api: CaptureApi,
  /** the provider's id of the answer (`resp_…`, `msg_…`, `chatcmpl-…`) */
  response_id: Schema.NullOr(Schema.String),
  /** the decision this one continues (its `previous_response_id`), whose turns open its logic trace */
  previous_ledger_id: Schema.NullOr(Schema.String),
  /** null for a call through the gateway; a turn `ledger watch` read from a coding assistant's transcript says so */
  source: Schema.NullOr(CaptureSource),
  stream: Schema.Boolean,
  first_token_ms: Schema.NullOr(Schema.Number),
  intent_reason: Schema.String,
  cost: Cost,
  quality_detail: Score,
  confidence_detail: Score,
  error: Schema.NullOr(Schema.Struct({ type: Schema.String, code: Schema.NullOr(Schema.String), message: Schema.String })),
  logic_trace: Schema.Array(LogicStep),
  evidence: Schema.Array(Evidence),
  findings: Schema.Array(Finding),
  artifacts: Schema.Array(Artifact),
  /** null until the decision is chained (one stored before chaining joins its chain when the builder starts) */
  integrity: Schema.NullOr(DecisionIntegrity)
})
export type Decision = typeof Decision.Type
