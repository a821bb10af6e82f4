import { Effect, Option, Schema } from "effect"
import { DecisionSummary } from "../domain/decision.ts"
import { Agent, Session } from "../domain/ledger.ts"
import type { Principal } from "../domain/principal.ts"
import { LedgerQuery } from "../query/LedgerQuery.ts"
import { agentIdParam, pageFields } from "./params.ts"
import { plural, usd, when } from "./text.ts"
import { defineView } from "./View.ts"
import { Activity, activityOf, collect, countBy } from "./shared.ts"

const MAX_SESSIONS = 50
const MAX_DECISIONS = 300
const AGENT_SEARCH = 500

/**
 * The agent's rollup row. The read model lists agents but has no lookup by id, so this lists the agents active
 * since this one's latest decision (a short list: this agent is among the most recent of them) and picks it.
 */
const findAgent = (principal: Principal, agentId: string, latest: DecisionSummary | undefined) =>
  latest === undefined
    ? Effect.succeed(Option.none<Agent>())
    : LedgerQuery.use((query) =>
      collect((page) => query.listAgents(principal, { active_since: latest.created_at, order: "recent", ...page }), AGENT_SEARCH)
    ).pipe(Effect.map(({ items }) => Option.fromNullishOr(items.find((agent) => agent.agent_id === agentId))))

export const agentView = defineView({
  name: "agent",
  title: "Agent",
  description: "`agent`: one agent's sessions (a page at a time: `limit`, `cursor`), activity, outcome and intent mix, models and recent decisions (needs `agent_id`).",
  params: Schema.Struct({ agent_id: agentIdParam, ...pageFields }),
  data: Schema.Struct({
    agent_id: Schema.String,
    /** the agent's rollup; null when it could not be located among the recently active agents */
    agent: Schema.NullOr(Agent),
    /** one page of the agent's sessions, most recent first */
    sessions: Schema.Array(Session),
    sessions_complete: Schema.Boolean,
    /** the next page of sessions; null on the last */
    sessions_next_cursor: Schema.NullOr(Schema.String),
    recent: Schema.Array(DecisionSummary),
    recent_complete: Schema.Boolean,
    /** over `recent` */
    outcomes: Schema.Record(Schema.String, Schema.Number),
    intents: Schema.Record(Schema.String, Schema.Number),
    models: Schema.Record(Schema.String, Schema.Number),
    activity: Activity
  }),
  load: Effect.fnUntraced(function*(principal, { agent_id, limit, cursor }) {
    const query = yield* LedgerQuery
    // the sessions list refuses an unknown (or invisible) agent first
    const sessions = yield* query.listAgentSessions(principal, agent_id, { limit: limit ?? MAX_SESSIONS, cursor })
    const recent = yield* collect((page) => query.listDecisions(principal, { agent_id, ...page }), MAX_DECISIONS)
    const agent = yield* findAgent(principal, agent_id, recent.items[0])
    return {
      agent_id,
      agent: Option.getOrNull(agent),
      sessions: sessions.data,
      sessions_complete: sessions.next_cursor === null && cursor === undefined,
      sessions_next_cursor: sessions.next_cursor,
      recent: recent.items,
      recent_complete: recent.complete,
      outcomes: countBy(recent.items, (d) => d.outcome),
      intents: countBy(recent.items, (d) => d.intent),
      models: countBy(recent.items, (d) => `${d.provider}/${d.model}`),
      activity: activityOf(recent.items, recent.complete)
    }
  }),
  heading: (data) => data.agent?.agent_name ?? data.agent_id,
  text: (data) =>
    [
      `Agent ${data.agent_id}${data.agent?.agent_name ? ` (${data.agent.agent_name})` : ""}` +
      (data.agent
        ? `: ${plural(data.agent.decision_count, "decision")} in ${plural(data.agent.session_count, "session")}, ` +
          `${usd(data.agent.total_cost_usd)}, ${plural(data.agent.error_count, "error")}, last active ${when(data.agent.last_seen_at)}`
        : ""),
      `Outcomes (latest ${data.recent.length}): ${Object.entries(data.outcomes).map(([k, n]) => `${k} ${n}`).join(", ") || "none"}`,
      `Intents: ${Object.entries(data.intents).map(([k, n]) => `${k} ${n}`).join(", ") || "none"}`,
      `Models: ${Object.entries(data.models).map(([k, n]) => `${k} ${n}`).join(", ") || "none"}`,
      `Sessions (${data.sessions.length}${data.sessions_complete ? "" : "+"}):`,
      ...data.sessions.map((s) =>
        `- ${s.session_id} ${when(s.started_at)} → ${when(s.ended_at)}: ${plural(s.decision_count, "decision")}, ` +
        `${usd(s.total_cost_usd)}${s.summary ? ` — ${s.summary}` : ""}`
      )
    ].join("\n"),
  render: String.raw`(data, ui, params) => {
  const { h, fmt } = ui;
  const a = data.agent;
  const recent = data.recent;
  const errors = a ? a.error_count : recent.filter((d) => d.outcome === "error").length;
  const decisions = a ? a.decision_count : recent.length;
  const unitLabel = data.activity.unit === "hour" ? fmt.hour : fmt.day;
  const models = Object.entries(data.models).sort((x, y) => y[1] - x[1]);
  return h("div", { style: "display:grid;gap:14px" },
    ui.stats([
      { label: "decisions", value: fmt.num(decisions) },
      { label: "sessions", value: a ? fmt.num(a.session_count) : fmt.num(data.sessions.length) + (data.sessions_complete ? "" : "+") },
      { label: "total cost", value: a ? fmt.usd(a.total_cost_usd) : fmt.usd(data.sessions.reduce((n, s) => n + s.total_cost_usd, 0)) },
      { label: "errors", value: fmt.num(errors), tone: errors > 0 ? "bad" : "ok" },
      { label: "mean confidence", value: fmt.score(a ? a.avg_confidence : null) },
      { label: "last active", value: a ? fmt.ago(a.last_seen_at) : recent[0] ? fmt.ago(recent[0].created_at) : "–", hint: a ? fmt.time(a.last_seen_at) : undefined }
    ]),
    ui.card("Activity per " + data.activity.unit + (data.activity.complete ? "" : " (latest " + data.activity.sampled + " decisions)"),
      ui.columns(data.activity.buckets.map((b) => ({ label: fmt.time(b.start), short: unitLabel(b.start), values: [b.decisions - b.errors, b.errors] })),
        { series: [{ name: "decisions", color: "#4f46e5" }, { name: "errors", color: "#dc2f45" }], label: "decisions over time" })),
    h("div", { class: "grid2" },
      ui.card("Outcomes", ui.mix(data.outcomes, ui.OUTCOME_COLOR)),
      ui.card("Intents", ui.mix(data.intents)),
      ui.card("Models", ui.bars(models.map(([model, n]) => ({ label: model, value: n }))))),
    ui.card("Sessions" + (data.sessions_complete ? "" : " (latest " + data.sessions.length + ")"), ui.table({
      rows: data.sessions,
      sort: ["ended_at", "desc"],
      placeholder: "Filter sessions…",
      empty: "No sessions.",
      args: (s) => ({ view: "session", session_id: s.session_id }),
      columns: [
        { key: "started_at", label: "Started", nowrap: true, value: (s) => s.started_at, cell: (s) => fmt.time(s.started_at) },
        { key: "ended_at", label: "Last activity", value: (s) => s.ended_at, cell: (s) => h("span", { title: fmt.time(s.ended_at), text: fmt.ago(s.ended_at) }) },
        { key: "summary", label: "Summary", value: (s) => s.summary || s.execution_id || s.session_id, cell: (s) => h("div", {}, h("div", { text: s.summary || "—" }), h("div", { class: "faint mono", text: s.execution_id ? "execution " + s.execution_id : fmt.short(s.session_id) })) },
        { key: "decision_count", label: "Decisions", num: true, value: (s) => s.decision_count, cell: (s) => fmt.num(s.decision_count) },
        { key: "error_count", label: "Errors", num: true, value: (s) => s.error_count, cell: (s) => s.error_count > 0 ? ui.badge(fmt.num(s.error_count), "bad") : "0" },
        { key: "total_cost_usd", label: "Cost", num: true, value: (s) => s.total_cost_usd, cell: (s) => fmt.usd(s.total_cost_usd) }
      ]
    }), ui.pager({ ...params, view: "agent" }, data.sessions_next_cursor)),
    ui.card("Recent decisions" + (data.recent_complete ? "" : " (latest " + recent.length + ")"), ui.table({
      rows: recent,
      sort: ["created_at", "desc"],
      placeholder: "Filter decisions…",
      chips: { key: (d) => d.outcome, values: Object.keys(data.outcomes) },
      args: (d) => ({ view: "decision", ledger_id: d.ledger_id }),
      columns: [
        { key: "created_at", label: "Time", nowrap: true, value: (d) => d.created_at, cell: (d) => fmt.time(d.created_at) },
        { key: "title", label: "Decision", wide: true, value: (d) => d.title },
        { key: "model", label: "Model", nowrap: true, value: (d) => d.model, cell: (d) => h("span", { class: "mono", text: d.model }) },
        { key: "outcome", label: "Outcome", value: (d) => d.outcome, cell: (d) => ui.outcome(d.outcome) },
        { key: "cost_usd", label: "Cost", num: true, value: (d) => d.cost_usd, cell: (d) => fmt.usd(d.cost_usd) },
        { key: "latency_ms", label: "Latency", num: true, value: (d) => d.latency_ms, cell: (d) => fmt.ms(d.latency_ms) }
      ]
    })));
}`
})
