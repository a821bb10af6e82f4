import { Schema } from "effect"
import { Decision, LedgerQuery } from "../../query/LedgerQuery.ts"
import { ledgerIdParam } from "./params.ts"
import { score, usd, when } from "./text.ts"
import { defineTool } from "./Tool.ts"

export const getDecision = defineTool({
  name: "get_decision",
  title: "Get a decision's audit trail",
  description:
    "Get one decision — a single model call an agent made — rebuilt as an audit trail: the logic trace (instructions, " +
    "turns, reasoning, tool calls and results, answer), the evidence the model was given (with sources and content " +
    "hashes), the findings its answer states, the artifacts it produced (code, commands, tool arguments), plus " +
    "outcome, intent, cost breakdown, quality and confidence with their reasons, latency and token usage, and " +
    "`integrity`: the decision's place in its workspace's hash chain (`seq`, `hash`, `prev_hash`; null until chained). " +
    "Use it to explain or verify why an agent did something.",
  input: Schema.Struct({ ledger_id: ledgerIdParam }),
  output: Decision,
  run: (principal, args) => LedgerQuery.use((query) => query.getDecision(principal, args.ledger_id)),
  text: (d) =>
    [
      `Decision ${d.ledger_id} — ${d.title}`,
      `${when(d.created_at)}, agent ${d.agent_id}, session ${d.session_id}, ${d.provider}/${d.model}`,
      `intent ${d.intent} (${d.intent_reason}); outcome ${d.outcome}${d.error ? ` — ${d.error.type}: ${d.error.message}` : ""}`,
      `cost ${usd(d.cost_usd)} (${d.cost.reason}); quality ${score(d.quality)}, confidence ${score(d.confidence)}; ` +
      `${d.latency_ms} ms${d.usage ? `, ${d.usage.total_tokens} tokens` : ""}`,
      d.integrity ? `chain seq ${d.integrity.seq}, hash ${d.integrity.hash}, prev_hash ${d.integrity.prev_hash}` : "not chained yet",
      `Logic trace (${d.logic_trace.length} steps):`,
      ...d.logic_trace.map((step) => `  ${step.index}. ${step.kind}${step.tool_name ? ` ${step.tool_name}` : ""}: ${step.text}`),
      ...(d.evidence.length > 0
        ? [`Evidence (${d.evidence.length}):`, ...d.evidence.map((e) => `  - ${e.kind} from ${e.source}: ${e.content}`)]
        : []),
      ...(d.findings.length > 0 ? [`Findings (${d.findings.length}):`, ...d.findings.map((f) => `  - ${f.kind}: ${f.text}`)] : []),
      ...(d.artifacts.length > 0
        ? [`Artifacts (${d.artifacts.length}):`, ...d.artifacts.map((a) => `  - ${a.kind}${a.name ? ` ${a.name}` : ""}${a.language ? ` (${a.language})` : ""}`)]
        : [])
    ].join("\n")
})
