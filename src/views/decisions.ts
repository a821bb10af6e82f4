import { Schema } from "effect"
import { DecisionOrder, PageLimit } from "../query/params.ts"
import { DecisionFilters, DecisionPage, LedgerQuery } from "../query/LedgerQuery.ts"
import { pageFields } from "./params.ts"
import { decisionList } from "./text.ts"
import { defineView } from "./View.ts"

const DEFAULT_ROWS = 100

export const decisionsView = defineView({
  name: "decisions",
  title: "Decisions",
  description:
    "`decisions`: a sortable, filterable table of decisions, with every list_decisions filter (`since`, `until`, " +
    "`outcomes`, `intents`, cost and quality ranges, `agent_id`, `session_id`, `model`, `order`, `limit`, `cursor`).",
  params: Schema.Struct({
    ...DecisionFilters.fields,
    order: Schema.optional(DecisionOrder),
    ...pageFields,
    limit: Schema.optional(PageLimit.annotate({ description: `Rows to show, 1–100 (default ${DEFAULT_ROWS}).` }))
  }),
  data: DecisionPage,
  load: (principal, params) => LedgerQuery.use((query) => query.listDecisions(principal, { limit: DEFAULT_ROWS, ...params })),
  heading: (data) => `${data.data.length}${data.next_cursor === null ? "" : "+"} decision${data.data.length === 1 && data.next_cursor === null ? "" : "s"}`,
  text: (data) => decisionList("Decisions", data.data, data.next_cursor),
  render: String.raw`(data, ui, params) => {
  const { h, fmt } = ui;
  const rows = data.data;
  const filters = Object.entries(params).filter(([k]) => k !== "view" && k !== "cursor" && k !== "limit");
  const outcomes = [...new Set(rows.map((d) => d.outcome))];
  const cost = rows.reduce((n, d) => n + (d.cost_usd || 0), 0);
  const errors = rows.filter((d) => d.outcome === "error").length;
  return h("div", { style: "display:grid;gap:14px" },
    ui.stats([
      { label: "decisions shown", value: fmt.num(rows.length) + (data.next_cursor ? "+" : "") },
      { label: "cost of these", value: fmt.usd(cost) },
      { label: "errors", value: fmt.num(errors), tone: errors > 0 ? "bad" : "ok" },
      { label: "mean quality", value: fmt.score(rows.length ? rows.reduce((n, d) => n + d.quality, 0) / rows.length : null) }
    ]),
    filters.length > 0 ? h("div", { class: "legend" }, "Filters: ", filters.map(([k, v]) => ui.badge(k + " = " + (Array.isArray(v) ? v.join("|") : v), "info"))) : null,
    ui.card("Decisions", ui.table({
      rows,
      sort: params.order === "oldest" ? ["created_at", "asc"] : params.order === "cost" ? ["cost_usd", "desc"] : params.order === "quality" ? ["quality", "asc"] : ["created_at", "desc"],
      placeholder: "Filter by agent, model, title…",
      chips: { key: (d) => d.outcome, values: outcomes },
      empty: "No decisions match.",
      args: (d) => ({ view: "decision", ledger_id: d.ledger_id }),
      columns: [
        { key: "created_at", label: "Time", nowrap: true, value: (d) => d.created_at, cell: (d) => fmt.time(d.created_at) },
        { key: "agent_id", label: "Agent", nowrap: true, value: (d) => d.agent_id, cell: (d) => ui.link(d.agent_id, { view: "agent", agent_id: d.agent_id }) },
        { key: "title", label: "Decision", wide: true, value: (d) => d.title },
        { key: "model", label: "Model", nowrap: true, value: (d) => d.model, cell: (d) => h("span", { class: "mono", text: d.model }) },
        { key: "intent", label: "Intent", value: (d) => d.intent, cell: (d) => d.intent.replace("_", " ") },
        { key: "outcome", label: "Outcome", value: (d) => d.outcome, cell: (d) => ui.outcome(d.outcome) },
        { key: "cost_usd", label: "Cost", num: true, value: (d) => d.cost_usd, cell: (d) => fmt.usd(d.cost_usd) },
        { key: "quality", label: "Quality", num: true, value: (d) => d.quality, cell: (d) => fmt.score(d.quality) },
        { key: "latency_ms", label: "Latency", num: true, value: (d) => d.latency_ms, cell: (d) => fmt.ms(d.latency_ms) }
      ]
    }),
    ui.pager({ ...params, view: "decisions" }, data.next_cursor)));
}`
})
