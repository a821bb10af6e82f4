import { Effect, Schema } from "effect"
import { Decision } from "../domain/decision.ts"
import { LedgerQuery } from "../query/LedgerQuery.ts"
import { ledgerIdParam } from "./params.ts"
import { decisionText } from "./text.ts"
import { defineView } from "./View.ts"

export const decisionView = defineView({
  name: "decision",
  title: "Decision audit trail",
  description: "`decision`: one decision's audit trail — trace, evidence, findings, artifacts, scores and cost (needs `ledger_id`).",
  params: Schema.Struct({ ledger_id: ledgerIdParam }),
  data: Schema.Struct({ decision: Decision }),
  load: (principal, { ledger_id }) =>
    Effect.map(LedgerQuery.use((query) => query.getDecision(principal, ledger_id)), (decision) => ({ decision })),
  heading: (data) => data.decision.title || data.decision.ledger_id,
  text: (data) => decisionText(data.decision),
  render: String.raw`(data, ui) => {
  const { h, fmt } = ui;
  const TRACE_OPEN_STEPS = 12;
  const d = data.decision;
  const scoreCard = (label, value, detail) => ui.card(label,
    h("div", { style: "display:flex;align-items:baseline;gap:8px" }, h("span", { class: "stat", style: "border:0;padding:0" }, h("span", { class: "v", text: fmt.score(value) })), ui.badge(detail.source, "info")),
    detail.reasons.length > 0 ? h("ul", { style: "margin:6px 0 0;padding-left:18px" }, detail.reasons.map((r) => h("li", { class: "muted", text: r }))) : null);
  const usage = d.usage;
  // a long trace (an agent's whole run) opens as one line per step
  const foldTrace = d.logic_trace.length > TRACE_OPEN_STEPS;
  return h("div", { style: "display:grid;gap:14px" },
    h("div", { class: "grid2" },
      ui.card("Decision",
        ui.kv([
          ["outcome", ui.outcome(d.outcome)],
          ["intent", h("span", {}, d.intent.replace("_", " "), h("span", { class: "faint", text: " — " + d.intent_reason }))],
          ["agent", ui.link(d.agent_id, { view: "agent", agent_id: d.agent_id })],
          ["session", ui.link(fmt.short(d.session_id), { view: "session", session_id: d.session_id })],
          ["execution", d.execution_id],
          ["model", h("span", { class: "mono", text: d.provider + "/" + d.model })],
          ["time", fmt.time(d.created_at)],
          ["ledger id", h("span", { class: "mono", text: d.ledger_id })],
          ["chain", d.integrity && h("span", { class: "mono", title: d.integrity.hash, text: "seq " + d.integrity.seq + " · " + d.integrity.hash.slice(0, 16) + "…" })]
        ])),
      ui.card("Cost and timing",
        ui.kv([
          ["total cost", fmt.usd(d.cost.total_usd)],
          ["input", fmt.usd(d.cost.input_usd)],
          ["output", fmt.usd(d.cost.output_usd)],
          ["cached input", d.cost.cached_input_usd === null ? null : fmt.usd(d.cost.cached_input_usd)],
          ["cache writes", d.cost.cache_write_usd === null ? null : fmt.usd(d.cost.cache_write_usd)],
          ["price basis", h("span", { class: "faint", text: d.cost.reason })],
          ["latency", fmt.ms(d.latency_ms)],
          ["first token", d.first_token_ms === null ? null : fmt.ms(d.first_token_ms)],
          ["tokens", usage ? fmt.num(usage.prompt_tokens) + " in · " + fmt.num(usage.completion_tokens) + " out" + (usage.cached_tokens ? " · " + fmt.num(usage.cached_tokens) + " cached" : "") : "–"],
          ["streamed", d.stream ? "yes" : "no"]
        ]))),
    d.error ? h("div", { class: "notice bad", role: "alert", text: d.error.type + (d.error.code ? " (" + d.error.code + ")" : "") + ": " + d.error.message }) : null,
    h("div", { class: "grid2" }, scoreCard("Quality", d.quality, d.quality_detail), scoreCard("Confidence", d.confidence, d.confidence_detail)),
    ui.card("Logic trace (" + d.logic_trace.length + " steps" + (foldTrace ? ", folded: open a step to read it" : "") + ")",
      d.logic_trace.length === 0 ? ui.empty("No steps recorded.") :
      ui.lazyList("div", {}, d.logic_trace, (step) => h("div", { class: "step " + step.kind }, ui.fold(ui.label(step.index + ". " + step.kind, step.tool_name), step.text, foldTrace)))),
    h("div", { class: "grid2" },
      ui.card("Evidence (" + d.evidence.length + ")",
        d.evidence.length === 0 ? ui.empty("The model was given no evidence.") :
        d.evidence.map((e) => h("div", { class: "step" },
          ui.fold(ui.label(e.kind, e.source), e.content),
          h("div", { class: "faint mono", title: e.hash, text: "sha256 " + e.hash.slice(0, 16) + "…" })))),
      ui.card("Findings (" + d.findings.length + ")",
        d.findings.length === 0 ? ui.empty("The answer states no findings.") :
        h("ul", { style: "margin:0;padding-left:18px" }, d.findings.map((f) => h("li", {}, ui.badge(f.kind, f.kind === "decision" ? "ok" : f.kind === "recommendation" ? "info" : ""), " ", f.text))))),
    ui.card("Artifacts (" + d.artifacts.length + ")",
      d.artifacts.length === 0 ? ui.empty("The answer produced no artifacts.") :
      d.artifacts.map((a) => h("div", { class: "step" }, ui.fold(ui.label(a.kind, a.name, a.language), a.content)))));
}`
})
