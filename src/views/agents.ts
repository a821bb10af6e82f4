import { Effect, Schema } from "effect"
import { Agent } from "../domain/ledger.ts"
import { IsoDateTime, MAX_PAGE_LIMIT } from "../query/params.ts"
import { LedgerQuery } from "../query/LedgerQuery.ts"
import { pageFields } from "./params.ts"
import { plural, usd, when } from "./text.ts"
import { defineView } from "./View.ts"
import { Activity, activityOf, collect } from "./shared.ts"

const ACTIVITY_SAMPLE = 500

export const agentsView = defineView({
  name: "agents",
  title: "Agents overview",
  description: "`agents`: every agent with cost and activity charts, a page at a time (optional `active_since`, `active_until`, `limit`, `cursor`).",
  params: Schema.Struct({
    ...pageFields,
    active_since: Schema.optional(IsoDateTime.annotate({ description: "Only agents active at or after this ISO 8601 time." })),
    active_until: Schema.optional(IsoDateTime.annotate({ description: "Only agents active before this ISO 8601 time." }))
  }),
  data: Schema.Struct({
    /** one page of agents, most recently active first */
    agents: Schema.Array(Agent),
    /** false when the workspace has more agents than shown */
    complete: Schema.Boolean,
    /** the next page's cursor; null on the last page */
    next_cursor: Schema.NullOr(Schema.String),
    activity: Activity
  }),
  load: Effect.fnUntraced(function*(principal, { limit, cursor, ...range }) {
    const query = yield* LedgerQuery
    const [agents, decisions] = yield* Effect.all([
      query.listAgents(principal, { ...range, order: "recent", limit: limit ?? MAX_PAGE_LIMIT, cursor }),
      collect((page) => query.listDecisions(principal, { since: range.active_since, until: range.active_until, ...page }), ACTIVITY_SAMPLE)
    ], { concurrency: 2 })
    return {
      agents: agents.data,
      complete: agents.next_cursor === null && cursor === undefined,
      next_cursor: agents.next_cursor,
      activity: activityOf(decisions.items, decisions.complete)
    }
  }),
  heading: (data) => `${plural(data.agents.length, "agent")}${data.complete ? "" : "+"}`,
  text: (data) =>
    data.agents.length === 0
      ? "No agents have recorded decisions yet."
      : [
        `Agents overview: ${plural(data.agents.length, "agent")}${data.complete ? "" : " (first page)"}, ` +
        `${plural(data.agents.reduce((n, a) => n + a.decision_count, 0), "decision")}, ` +
        `${usd(data.agents.reduce((n, a) => n + a.total_cost_usd, 0))} in total.`,
        ...data.agents.map((a) =>
          `- ${a.agent_name ?? a.agent_id} (${a.agent_id}): ${plural(a.decision_count, "decision")}, ${usd(a.total_cost_usd)}, ` +
          `${plural(a.error_count, "error")}, last active ${when(a.last_seen_at)}`
        ),
        `Activity: ${data.activity.buckets.reduce((n, b) => n + b.decisions, 0)} recent decisions per ${data.activity.unit} ` +
        `over ${data.activity.buckets.length} ${data.activity.unit}s.`
      ].join("\n"),
  render: String.raw`(data, ui, params) => {
  const { h, fmt } = ui;
  const agents = data.agents;
  if (agents.length === 0) return ui.empty("No agents have recorded decisions yet. Send model calls through the gateway with ?agent_id=… to see them here.");
  const total = (key) => agents.reduce((n, a) => n + (a[key] || 0), 0);
  const decisions = total("decision_count");
  const errors = total("error_count");
  const weighted = agents.filter((a) => a.avg_confidence !== null);
  const confidence = weighted.length === 0 ? null :
    weighted.reduce((n, a) => n + a.avg_confidence * a.decision_count, 0) / Math.max(1, weighted.reduce((n, a) => n + a.decision_count, 0));
  const name = (a) => a.agent_name || a.agent_id;
  const byCost = [...agents].sort((a, b) => b.total_cost_usd - a.total_cost_usd).slice(0, 12);
  const byDecisions = [...agents].sort((a, b) => b.decision_count - a.decision_count).slice(0, 12);
  const unitLabel = data.activity.unit === "hour" ? fmt.hour : fmt.day;
  return h("div", { style: "display:grid;gap:14px" },
    ui.stats([
      { label: "agents" + (data.complete ? "" : " (first " + agents.length + ")"), value: fmt.num(agents.length) },
      { label: "decisions", value: fmt.num(decisions) },
      { label: "total cost", value: fmt.usd(total("total_cost_usd")) },
      { label: "errors", value: fmt.num(errors), tone: errors > 0 ? "bad" : "ok", hint: fmt.pct(decisions ? errors / decisions : 0) + " of decisions" },
      { label: "mean confidence", value: fmt.score(confidence) }
    ]),
    h("div", { class: "grid2" },
      ui.card("Cost by agent", ui.bars(byCost.map((a) => ({ label: name(a), value: a.total_cost_usd, args: { view: "agent", agent_id: a.agent_id } })), { format: fmt.usd })),
      ui.card("Decisions by agent", ui.bars(byDecisions.map((a) => ({ label: name(a), value: a.decision_count, args: { view: "agent", agent_id: a.agent_id } }))))),
    ui.card("Activity per " + data.activity.unit + (data.activity.complete ? "" : " (latest " + data.activity.sampled + " decisions)"),
      ui.columns(data.activity.buckets.map((b) => ({ label: fmt.time(b.start), short: unitLabel(b.start), values: [b.decisions - b.errors, b.errors] })),
        { series: [{ name: "decisions", color: "#4f46e5" }, { name: "errors", color: "#dc2f45" }], label: "decisions over time" }),
      ui.columns(data.activity.buckets.map((b) => ({ label: fmt.time(b.start), short: unitLabel(b.start), values: [b.cost_usd] })),
        { series: [{ name: "cost (USD)", color: "#14b8a6" }], format: fmt.usd, label: "cost over time" })),
    ui.card("Agents", ui.table({
      rows: agents,
      sort: ["last_seen_at", "desc"],
      placeholder: "Filter agents…",
      args: (a) => ({ view: "agent", agent_id: a.agent_id }),
      columns: [
        { key: "agent", label: "Agent", value: name, cell: (a) => h("div", {}, h("div", { text: name(a) }), a.agent_name && a.agent_name !== a.agent_id ? h("div", { class: "faint mono", text: a.agent_id }) : null) },
        { key: "decision_count", label: "Decisions", num: true, value: (a) => a.decision_count, cell: (a) => fmt.num(a.decision_count) },
        { key: "session_count", label: "Sessions", num: true, value: (a) => a.session_count, cell: (a) => fmt.num(a.session_count) },
        { key: "total_cost_usd", label: "Cost", num: true, value: (a) => a.total_cost_usd, cell: (a) => fmt.usd(a.total_cost_usd) },
        { key: "error_count", label: "Errors", num: true, value: (a) => a.error_count, cell: (a) => a.error_count > 0 ? ui.badge(fmt.num(a.error_count), "bad") : "0" },
        { key: "avg_confidence", label: "Confidence", num: true, value: (a) => a.avg_confidence, cell: (a) => fmt.score(a.avg_confidence) },
        { key: "last_seen_at", label: "Last active", value: (a) => a.last_seen_at, cell: (a) => h("span", { title: fmt.time(a.last_seen_at), text: fmt.ago(a.last_seen_at) }) }
      ]
    }), ui.pager({ ...params, view: "agents" }, data.next_cursor)));
}`
})
