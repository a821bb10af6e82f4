import { Schema } from "effect"
import { AnalyticsQuery } from "../analytics/AnalyticsQuery.ts"
import { pulseText } from "./analyticsText.ts"
import { PulseParams, PulseReport } from "../analytics/schema.ts"
import { defineView } from "./View.ts"

export const pulseView = defineView({
  name: "pulse",
  title: "Pulse report",
  description:
    "`pulse`: a day, week or range at a glance — totals with changes against the period before, top agents, outcome " +
    "and intent mix, costliest sessions, new insights, features delivered (`period`, `date`, or `since`+`until`).",
  params: Schema.Struct(PulseParams.fields),
  data: PulseReport,
  load: (principal, params) => AnalyticsQuery.use((query) => query.getPulseReport(principal, params)),
  heading: (data) => `${data.period.kind === "range" ? "Range" : data.period.kind === "day" ? "Day" : "Week"} from ${data.period.start.slice(0, 10)}`,
  text: (data) => pulseText(data),
  render: String.raw`(data, ui) => {
  const { h, fmt } = ui;
  const t = data.totals;
  const change = (key, format, goodWhenUp) => {
    const d = data.deltas[key];
    if (!d) return undefined;
    const sign = d.change > 0 ? "+" : d.change < 0 ? "−" : "±";
    const text = sign + format(Math.abs(d.change)) + (d.percent === null ? "" : " (" + (d.percent > 0 ? "+" : "") + d.percent + "%)");
    return text + " vs the " + (data.period.kind === "range" ? "range" : data.period.kind) + " before";
  };
  const tone = (key, upIsGood) => {
    const d = data.deltas[key];
    if (!d || d.change === 0) return "";
    return (d.change > 0) === upIsGood ? "ok" : "warn";
  };
  const severity = { critical: "bad", warning: "warn", info: "info" };
  return h("div", { style: "display:grid;gap:14px" },
    data.partial.is_partial ? h("div", { class: "notice", role: "status" }, "Partial data: " + data.partial.reasons.join("; ")) : null,
    ui.stats([
      { label: "decisions", value: fmt.num(t.decisions), hint: change("decisions", fmt.num), tone: tone("decisions", true) },
      { label: "sessions", value: fmt.num(t.sessions), hint: change("sessions", fmt.num), tone: tone("sessions", true) },
      { label: "agents", value: fmt.num(t.agents), hint: change("agents", fmt.num) },
      { label: "cost", value: fmt.usd(t.cost_usd), hint: change("cost_usd", fmt.usd), tone: tone("cost_usd", false) },
      { label: "errors", value: fmt.num(t.errors) + " · " + fmt.pct(t.error_rate), hint: change("errors", fmt.num), tone: t.errors > 0 ? "bad" : "ok" },
      { label: "mean quality", value: fmt.score(t.avg_quality) },
      { label: "mean latency", value: fmt.ms(t.avg_latency_ms) }
    ]),
    h("div", { class: "legend" }, Object.keys(data.deltas).map((key) => {
      const d = data.deltas[key];
      return ui.badge(key.replace("_usd", "").replace("_", " ") + " " + (d.change >= 0 ? "+" : "") + (key === "cost_usd" ? fmt.usd(d.change) : key === "error_rate" ? fmt.pct(d.change) : fmt.num(d.change)) + (d.percent === null ? "" : " (" + d.percent + "%)"), d.change === 0 ? "" : "info");
    })),
    h("div", { class: "grid2" },
      ui.card("Top agents", data.top_agents.length === 0 ? ui.empty("No activity in this period.") :
        ui.bars(data.top_agents.map((a) => ({ label: a.agent_name || a.agent_id, value: a.decisions, args: { view: "agent", agent_id: a.agent_id } })))),
      ui.card("Outcomes", ui.mix(data.outcomes, ui.OUTCOME_COLOR), h("h2", { text: "Intents", style: "margin-top:14px" }), ui.mix(data.intents))),
    ui.card("Costliest sessions", ui.table({
      rows: data.costliest_sessions,
      sort: ["total_cost_usd", "desc"],
      empty: "No sessions in this period.",
      args: (s) => ({ view: "session", session_id: s.session_id }),
      columns: [
        { key: "agent_id", label: "Agent", nowrap: true, value: (s) => s.agent_id },
        { key: "summary", label: "Session", wide: true, value: (s) => s.summary },
        { key: "decision_count", label: "Decisions", num: true, value: (s) => s.decision_count, cell: (s) => fmt.num(s.decision_count) },
        { key: "total_cost_usd", label: "Cost", num: true, value: (s) => s.total_cost_usd, cell: (s) => fmt.usd(s.total_cost_usd) },
        { key: "started_at", label: "Started", nowrap: true, value: (s) => s.started_at, cell: (s) => fmt.time(s.started_at) }
      ]
    })),
    ui.card("New insights (" + data.new_insights.length + ")", data.new_insights.length === 0 ? ui.empty("No insight was raised in this period.") :
      h("div", { class: "bars" }, data.new_insights.map((i) => h("div", {},
        ui.badge(i.severity, severity[i.severity]), " ", ui.badge(i.type.replace(/_/g, " "), ""), " ", h("span", { text: i.title }),
        i.session_ids.length > 0 ? h("span", { class: "faint" }, " · ", ui.link("session", { view: "session", session_id: i.session_ids[0] })) : null)))),
    ui.card("Features delivered (" + data.features_delivered.length + ")", data.features_delivered.length === 0 ? ui.empty("No feature was delivered in this period.") :
      ui.table({
        rows: data.features_delivered,
        sort: ["last_activity_at", "desc"],
        args: (f) => ({ view: "feature", feature_id: f.feature_id }),
        columns: [
          { key: "title", label: "Feature", wide: true, value: (f) => f.title },
          { key: "session_count", label: "Sessions", num: true, value: (f) => f.session_count, cell: (f) => fmt.num(f.session_count) },
          { key: "cost_usd", label: "Cost", num: true, value: (f) => f.cost_usd, cell: (f) => fmt.usd(f.cost_usd) },
          { key: "roi", label: "ROI", num: true, value: (f) => f.roi.roi, cell: (f) => f.roi.roi === null ? "–" : f.roi.roi + "×" },
          { key: "last_activity_at", label: "Last activity", nowrap: true, value: (f) => f.last_activity_at, cell: (f) => fmt.time(f.last_activity_at) }
        ]
      })));
}`
})
