import { Effect, Schema } from "effect"
import { DecisionSummary } from "../domain/decision.ts"
import { SessionDetail } from "../domain/ledger.ts"
import { LedgerQuery } from "../query/LedgerQuery.ts"
import { pageFields, sessionIdParam } from "./params.ts"
import { decisionLine, plural, score, usd, when } from "./text.ts"
import { defineView } from "./View.ts"

/** decisions per page of the timeline: a session of any length opens with its first page */
const TIMELINE_PAGE = 100

export const sessionView = defineView({
  name: "session",
  title: "Session timeline",
  description: "`session`: one session's health and its decisions as a timeline, a page at a time (needs `session_id`; `limit`, `cursor`).",
  params: Schema.Struct({ session_id: sessionIdParam, ...pageFields }),
  data: Schema.Struct({
    session: SessionDetail,
    /** one page of the session's decisions, oldest first */
    timeline: Schema.Array(DecisionSummary),
    /** the next page's cursor; null on the last page */
    next_cursor: Schema.NullOr(Schema.String)
  }),
  load: Effect.fnUntraced(function*(principal, { session_id, limit, cursor }) {
    const query = yield* LedgerQuery
    const [session, page] = yield* Effect.all([
      query.getSession(principal, session_id),
      query.listSessionDecisions(principal, session_id, { order: "oldest", limit: limit ?? TIMELINE_PAGE, cursor })
    ], { concurrency: 2 })
    return { session, timeline: page.data, next_cursor: page.next_cursor }
  }),
  heading: (data) => data.session.summary || `Session of ${data.session.agent_id}`,
  text: (data) => {
    const s = data.session
    return [
      `Session ${s.session_id} of agent ${s.agent_id}${s.execution_id ? ` (execution ${s.execution_id})` : ""}`,
      `${when(s.started_at)} → ${when(s.ended_at)}: ${plural(s.decision_count, "decision")}, ${plural(s.error_count, "error")}, ` +
      `${usd(s.total_cost_usd)}, ${s.total_tokens} tokens`,
      `Health: ${s.health.status}${s.health.reasons.length > 0 ? ` — ${s.health.reasons.join("; ")}` : ""} ` +
      `(error rate ${score(s.health.error_rate)}, loops ${s.health.loops}, p95 latency ${s.health.p95_latency_ms ?? "–"} ms)`,
      ...(s.summary ? [`Summary: ${s.summary}`] : []),
      `Timeline (${data.timeline.length} decisions, oldest first${data.next_cursor === null ? "" : `; next page: cursor ${data.next_cursor}`}):`,
      ...data.timeline.map(decisionLine)
    ].join("\n")
  },
  render: String.raw`(data, ui, params) => {
  const { h, fmt } = ui;
  const s = data.session;
  const health = s.health;
  const tone = ui.TONE[health.status] || "";
  const timeline = data.timeline;
  const first = timeline.length > 0 ? Date.parse(timeline[0].created_at) : 0;
  const dotTone = (d) => d.outcome === "error" ? "bad" : d.outcome === "success" ? "" : d.outcome === "tool_call" ? "info" : "warn";
  return h("div", { style: "display:grid;gap:14px" },
    h("div", { class: "grid2" },
      ui.card("Health",
        h("div", { style: "display:flex;align-items:center;gap:10px;margin-bottom:8px" },
          h("span", { class: "badge " + tone, style: "font-size:14px;padding:3px 12px", text: health.status }),
          h("span", { class: "muted", text: "last activity " + fmt.ago(health.last_activity_at) })),
        health.reasons.length > 0 ? h("ul", { style: "margin:0 0 8px;padding-left:18px" }, health.reasons.map((r) => h("li", { text: r }))) : null,
        ui.kv([
          ["error rate", fmt.pct(health.error_rate)],
          ["loops", fmt.num(health.loops)],
          ["p95 latency", fmt.ms(health.p95_latency_ms)],
          ["cost per hour", health.cost_per_hour_usd === null ? "–" : fmt.usd(health.cost_per_hour_usd)],
          ["token growth", health.token_growth === null ? "–" : "×" + health.token_growth.toFixed(2)]
        ])),
      ui.card("Session",
        ui.kv([
          ["agent", ui.link(s.agent_id, { view: "agent", agent_id: s.agent_id })],
          ["session", h("span", { class: "mono", text: s.session_id })],
          ["execution", s.execution_id],
          ["started", fmt.time(s.started_at)],
          ["ended", fmt.time(s.ended_at)],
          ["summary", s.summary]
        ]))),
    ui.stats([
      { label: "decisions", value: fmt.num(s.decision_count) },
      { label: "errors", value: fmt.num(s.error_count), tone: s.error_count > 0 ? "bad" : "ok" },
      { label: "cost", value: fmt.usd(s.total_cost_usd) },
      { label: "tokens", value: fmt.num(s.total_tokens) }
    ]),
    h("div", { class: "grid2" },
      ui.card("Outcomes", ui.mix(s.outcomes, ui.OUTCOME_COLOR)),
      ui.card("Intents", ui.mix(s.intents))),
    ui.card("Latency per step",
      ui.columns(timeline.map((d, i) => ({ label: "#" + (i + 1) + " " + d.title, short: String(i + 1), values: [d.latency_ms] })),
        { series: [{ name: "latency", color: "#14b8a6" }], format: fmt.ms, label: "latency per decision" })),
    ui.card("Timeline" + (params.cursor || data.next_cursor ? " (" + timeline.length + " on this page)" : ""),
      timeline.length === 0 ? ui.empty("No decisions visible in this session.") :
      h("ol", { class: "timeline" }, timeline.map((d, i) => h("li", { "data-ledger-id": d.ledger_id },
        h("span", { class: "dot " + dotTone(d) }),
        h("div", { style: "display:flex;flex-wrap:wrap;gap:8px;align-items:baseline" },
          h("span", { class: "faint mono", text: (params.cursor ? "" : "#" + (i + 1) + " ") + "+" + fmt.ms(Date.parse(d.created_at) - first) }),
          ui.link(d.title || d.ledger_id, { view: "decision", ledger_id: d.ledger_id }),
          ui.outcome(d.outcome)),
        h("div", { class: "muted", style: "font-size:12.5px", text: [fmt.time(d.created_at), d.provider + "/" + d.model, d.intent.replace("_", " "), fmt.usd(d.cost_usd), fmt.ms(d.latency_ms), "quality " + fmt.score(d.quality)].join(" · ") })))),
      ui.pager({ ...params, view: "session" }, data.next_cursor)));
}`
})
