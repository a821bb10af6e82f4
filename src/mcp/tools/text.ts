/**
 * Concise text renderings for tool results (`content`): one line per item, the figures a reader compares first,
 * and how to get the next page.
 */
import type { DecisionSummary } from "../../domain/decision.ts"

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
