/**
 * Concise text renderings of analytics payloads: the `content` of the analytics MCP tools and the text fallback of
 * their render_ui views. One line per item, the figures a reader compares first, and what to call next.
 */
import { decisionLine, nextPage, plural, usd, when } from "./text.ts"
import type { Feature, GraphResult, Insight, MergeSuggestion, PulseReport, SimilarResult } from "../analytics/schema.ts"

const pct = (rate: number) => `${Math.round(rate * 1000) / 10}%`

export const graphText = (graph: GraphResult): string => {
  const heading = graph.mode === "agent_network"
    ? `Agent network: ${plural(graph.nodes.length, "agent")}, ${plural(graph.edges.length, "link")}`
    : `Graph from ${graph.start} (depth ${graph.depth}, ${graph.direction}): ${plural(graph.nodes.length, "node")}, ${plural(graph.edges.length, "edge")}`
  const label = new Map(graph.nodes.map((n) => [n.key, n.label]))
  const lines = [
    `${heading}${graph.truncated ? " (node limit reached: nearest nodes kept)" : ""}.`,
    ...graph.nodes.slice(0, 40).map((n) => `- [${n.depth}] ${n.key}: ${n.label}`),
    ...(graph.nodes.length > 40 ? [`… ${graph.nodes.length - 40} more nodes`] : []),
    ...graph.edges.slice(0, 40).map((e) => `- ${label.get(e.source) ?? e.source} —${e.label}→ ${label.get(e.target) ?? e.target}`),
    ...(graph.edges.length > 40 ? [`… ${graph.edges.length - 40} more edges`] : [])
  ]
  return lines.join("\n")
}

const MATCHED: Record<SimilarResult["data"][number]["match"], string> = {
  exact: ", holds the text",
  phrase: ", holds the phrase",
  all_terms: ", holds every word",
  meaning: ""
}

export const similarText = (result: SimilarResult): string =>
  result.data.length === 0
    ? `No decision scores ≥ ${result.min_score} (${result.representation} vectors, ${result.candidates} candidates).`
    : [
      `Similar decisions (${result.representation} vectors, ${result.candidates} candidates, score ≥ ${result.min_score}):`,
      ...result.data.map((d) =>
        `${decisionLine(d)} — score ${d.score.toFixed(2)}${MATCHED[d.match]}${
          d.shared_terms.length > 0 ? ` (shares ${d.shared_terms.slice(0, 6).join(", ")})` : ""
        }`
      )
    ].join("\n")

export const featureLine = (f: Feature): string =>
  `- ${f.feature_id} ${f.title} — ${f.status} (${f.status_reason}); ${plural(f.session_count, "session")}, ` +
  `${plural(f.decision_count, "decision")}, ${f.agents.join(", ")}; ${usd(f.cost_usd)}, success ${pct(f.success_rate)}, ` +
  `ROI ${f.roi.roi === null ? "n/a" : `${f.roi.roi}×`} (value ${usd(f.roi.value_usd)}); ${when(f.started_at)} → ${when(f.last_activity_at)}`

export const featuresText = (data: ReadonlyArray<Feature>, cursor: string | null, statusRule: string): string =>
  data.length === 0
    ? "No features match (a feature is at least two sessions sharing work subjects)."
    : [`Features (${data.length}):`, ...data.map(featureLine), `Status rule: ${statusRule}`].join("\n") + nextPage(cursor)

export const suggestionLine = (s: MergeSuggestion): string =>
  `- ${s.feature_a.title} (${s.feature_a.feature_id}) ≈ ${s.feature_b.title} (${s.feature_b.feature_id}): score ${s.score} — ${s.reason}`

export const insightLine = (i: Insight): string =>
  `- [${i.severity}] ${i.type} ${when(i.window_start)} → ${when(i.window_end)}: ${i.title} (${plural(i.ledger_ids.length, "decision")}; id ${i.insight_id})`

export const insightsText = (data: ReadonlyArray<Insight>, cursor: string | null): string =>
  data.length === 0 ? "No insights match." : [`Insights (${data.length}):`, ...data.map(insightLine)].join("\n") + nextPage(cursor)

const change = (delta: { change: number; percent: number | null } | undefined, format: (n: number) => string = String) =>
  delta === undefined ? "" : ` (${delta.change >= 0 ? "+" : ""}${format(delta.change)}${delta.percent === null ? "" : `, ${delta.percent >= 0 ? "+" : ""}${delta.percent}%`})`

export const pulseText = (report: PulseReport): string => {
  const t = report.totals
  const mix = (record: Record<string, number>) => Object.entries(record).map(([k, n]) => `${k} ${n}`).join(", ") || "none"
  return [
    `Pulse ${report.period.kind} ${when(report.period.start)} → ${when(report.period.end)} (vs the ${report.period.kind} before):`,
    `${t.decisions} decisions${change(report.deltas.decisions)}, ${t.sessions} sessions${change(report.deltas.sessions)}, ` +
    `${t.agents} agents, cost ${usd(t.cost_usd)}${change(report.deltas.cost_usd, usd)}, errors ${t.errors} (${pct(t.error_rate)})` +
    `${change(report.deltas.errors)}, mean quality ${t.avg_quality ?? "n/a"}, mean latency ${t.avg_latency_ms ?? "n/a"} ms.`,
    `Top agents: ${report.top_agents.map((a) => `${a.agent_name ?? a.agent_id} (${a.decisions}, ${usd(a.cost_usd)})`).join("; ") || "none"}.`,
    `Outcomes: ${mix(report.outcomes)}. Intents: ${mix(report.intents)}.`,
    `Costliest sessions: ${report.costliest_sessions.map((s) => `${s.session_id} ${s.agent_id} ${usd(s.total_cost_usd)}`).join("; ") || "none"}.`,
    `New insights (${report.new_insights.length}):`,
    ...report.new_insights.map(insightLine),
    `Features delivered (${report.features_delivered.length}): ${report.features_delivered.map((f) => f.title).join("; ") || "none"}.`,
    ...(report.partial.is_partial ? [`Partial data: ${report.partial.reasons.join("; ")}.`] : [])
  ].join("\n")
}
