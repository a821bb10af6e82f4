/**
 * Concise text renderings for tool results (`content`): one line per item, the figures a reader compares first,
 * and how to get the next page.
 */
import type { DecisionSummary } from "../domain/decision.ts"
import type { Decision } from "../domain/decision.ts"

export const usd = (amount: number | null): string =>
  amount === null ? "unpriced" : amount !== 0 && Math.abs(amount) < 0.01 ? `$${amount.toPrecision(2)}` : `$${amount.toFixed(2)}`

/** `2025-11-03 09:30:00Z` — ISO without the T and milliseconds, easier to scan. */
export const when = (iso: string): string => iso.replace("T", " ").replace(/\.\d+Z$/, "Z")

export const score = (value: number | null): string => (value === null ? "–" : value.toFixed(2))

export const plural = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? "" : "s"}`

export const nextPage = (cursor: string | null): string =>
  cursor === null ? "" : `\nMore results: call again with cursor "${cursor}".`

export const decisionLine = (d: DecisionSummary): string =>
  `- ${d.ledger_id} ${when(d.created_at)} ${d.agent_id} ${d.provider}/${d.model} ${d.intent} → ${d.outcome}, ` +
  `${usd(d.cost_usd)}, quality ${score(d.quality)}, ${d.latency_ms} ms: ${d.title}`

export const decisionList = (heading: string, data: ReadonlyArray<DecisionSummary>, cursor: string | null): string =>
  data.length === 0 ? `${heading}: none match.` : `${heading} (${data.length}):\n${data.map(decisionLine).join("\n")}${nextPage(cursor)}`

/** A decision's audit trail as text: what get_decision answers, and the decision view's text. */
export const decisionText = (d: Decision): string =>
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
