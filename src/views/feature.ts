import { Schema } from "effect"
import { AnalyticsQuery } from "../analytics/AnalyticsQuery.ts"
import { featureLine, suggestionLine } from "./analyticsText.ts"
import { FeatureDetail, FeatureGetParams } from "../analytics/schema.ts"
import { defineView } from "./View.ts"

export const featureView = defineView({
  name: "feature",
  title: "Feature",
  description:
    "`feature`: one unit of work — status and its reason, the subjects linking its sessions, cost, success rate, ROI " +
    "with every input, its sessions and possible duplicates (`feature_id` from list_features, optional `as_of`).",
  params: Schema.Struct(FeatureGetParams.fields),
  data: FeatureDetail,
  load: (principal, params) => AnalyticsQuery.use((query) => query.getFeature(principal, params)),
  heading: (data) => data.title,
  text: (data) =>
    [
      featureLine(data).slice(2),
      `Sessions: ${data.sessions.map((s) => `${s.session_id} (${s.agent_id})`).join(", ")}.`,
      ...(data.merge_suggestions.length === 0 ? [] : ["May duplicate:", ...data.merge_suggestions.map(suggestionLine)])
    ].join("\n"),
  render: String.raw`(data, ui) => {
  const { h, fmt } = ui;
  const statusTone = { delivered: "ok", in_progress: "info", stalled: "bad" };
  const roi = data.roi;
  const intents = Object.keys(roi.successful_decisions_by_intent);
  const other = (s) => s.feature_a.feature_id === data.feature_id ? s.feature_b : s.feature_a;
  return h("div", { style: "display:grid;gap:14px" },
    h("div", { class: "legend" }, ui.badge(data.status.replace("_", " "), statusTone[data.status]), " ", h("span", { class: "muted", text: data.status_reason })),
    ui.stats([
      { label: "sessions", value: fmt.num(data.session_count) },
      { label: "decisions", value: fmt.num(data.decision_count) },
      { label: "agents", value: fmt.num(data.agent_count), hint: data.agents.join(", ") },
      { label: "cost", value: fmt.usd(data.cost_usd) },
      { label: "success rate", value: fmt.pct(data.success_rate), tone: data.success_rate >= 0.8 ? "ok" : data.success_rate >= 0.5 ? "warn" : "bad" },
      { label: "ROI", value: roi.roi === null ? "–" : roi.roi + "×", hint: "value " + fmt.usd(roi.value_usd) + " / cost " + fmt.usd(roi.cost_usd), tone: roi.roi !== null && roi.roi >= 1 ? "ok" : "" },
      { label: "time span", value: data.time_span_hours < 48 ? data.time_span_hours.toFixed(1) + " h" : (data.time_span_hours / 24).toFixed(1) + " days" }
    ]),
    h("div", { class: "grid2" },
      ui.card("Subjects linking its sessions", h("div", { class: "legend" }, data.subjects.map((s) =>
        ui.badge(s.kind + " " + s.label + " · " + s.sessions + " sessions", s.kind === "ticket" || s.kind === "issue" ? "info" : "")))),
      ui.card("ROI inputs", ui.table({
        rows: intents.map((intent) => ({ intent, n: roi.successful_decisions_by_intent[intent], minutes: roi.minutes_saved_by_intent[intent] })),
        sort: ["n", "desc"],
        columns: [
          { key: "intent", label: "Intent", value: (r) => r.intent, cell: (r) => r.intent.replace("_", " ") },
          { key: "n", label: "Successful", num: true, value: (r) => r.n, cell: (r) => fmt.num(r.n) },
          { key: "minutes", label: "Minutes each", num: true, value: (r) => r.minutes, cell: (r) => fmt.num(r.minutes) },
          { key: "value", label: "Value", num: true, value: (r) => r.n * r.minutes / 60 * roi.hourly_rate_usd, cell: (r) => fmt.usd(r.n * r.minutes / 60 * roi.hourly_rate_usd) }
        ]
      }), h("div", { class: "faint", style: "margin-top:8px", text: roi.formula + " (hourly rate $" + roi.hourly_rate_usd + ")" }))),
    ui.card("Sessions", ui.table({
      rows: data.sessions,
      sort: ["started_at", "asc"],
      placeholder: "Filter sessions…",
      args: (s) => ({ view: "session", session_id: s.session_id }),
      columns: [
        { key: "started_at", label: "Started", nowrap: true, value: (s) => s.started_at, cell: (s) => fmt.time(s.started_at) },
        { key: "agent_id", label: "Agent", nowrap: true, value: (s) => s.agent_id, cell: (s) => ui.link(s.agent_id, { view: "agent", agent_id: s.agent_id }) },
        { key: "summary", label: "Summary", wide: true, value: (s) => s.summary },
        { key: "decision_count", label: "Decisions", num: true, value: (s) => s.decision_count, cell: (s) => fmt.num(s.decision_count) },
        { key: "total_cost_usd", label: "Cost", num: true, value: (s) => s.total_cost_usd, cell: (s) => fmt.usd(s.total_cost_usd) }
      ]
    })),
    ui.card("May be the same work as", data.merge_suggestions.length === 0 ? ui.empty("No other feature looks like this one.") :
      h("div", { class: "bars" }, data.merge_suggestions.map((s) => h("div", {},
        ui.badge("score " + s.score.toFixed(2), s.score >= 0.7 ? "warn" : "info"), " ",
        ui.link(other(s).title, { view: "feature", feature_id: other(s).feature_id }),
        h("div", { class: "faint", text: s.reason }))))));
}`
})
