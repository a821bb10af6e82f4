import { Schema } from "effect"
import { AnalyticsQuery } from "../analytics/AnalyticsQuery.ts"
import { graphText } from "./analyticsText.ts"
import { GraphParams, GraphResult } from "../analytics/schema.ts"
import { defineView } from "./View.ts"

/** Nodes drawn: enough to read, few enough to lay out. */
const VIEW_NODES = 150

const { limit: _limit, ...graphFields } = GraphParams.fields

export const graphView = defineView({
  name: "graph",
  title: "Decision graph",
  description:
    "`graph`: a node-link drawing of the decision graph around one node (`agent_id`, `session_id`, `ledger_id`, " +
    "`subject` or `source`; `edge_types`, `direction`, `depth`), or of the whole agent network (`mode` agent_network).",
  params: Schema.Struct(graphFields),
  data: GraphResult,
  load: (principal, params) => AnalyticsQuery.use((query) => query.queryGraph(principal, { ...params, limit: VIEW_NODES })),
  heading: (data) => data.mode === "agent_network" ? "Agent network" : `Around ${data.start}`,
  text: (data) => graphText(data),
  render: String.raw`(data, ui) => {
  const { h, s, fmt } = ui;
  const COLORS = { agent: "#4f46e5", session: "#14b8a6", decision: "#f59e0b", subject: "#ec4899", source: "#64748b" };
  const EDGE_COLORS = { handed_off_to: "#dc2f45", shares_execution: "#2f6fdc", shares_subject: "#a855f7" };
  const nodes = data.nodes;
  if (nodes.length === 0) return ui.empty(data.mode === "agent_network" ? "No agents yet." : "Nothing is linked to this node.");
  const width = 900, height = 560, cx = width / 2, cy = height / 2;
  // rings by depth around the start node; one ring for the agent network
  const byDepth = new Map();
  for (const node of nodes) byDepth.set(node.depth, [...(byDepth.get(node.depth) || []), node]);
  const rings = Math.max(...nodes.map((n) => n.depth));
  const position = new Map();
  for (const [depth, ring] of byDepth) {
    const radius = data.mode === "agent_network" ? Math.min(cx, cy) - 70 : depth === 0 ? 0 : (Math.min(cx, cy) - 50) * depth / Math.max(1, rings);
    ring.forEach((node, i) => {
      const angle = (2 * Math.PI * i) / ring.length + depth * 0.35;
      position.set(node.key, { x: cx + radius * Math.cos(angle) * (width / height), y: cy + radius * Math.sin(angle) });
    });
  }
  const clamp = (p) => ({ x: Math.max(20, Math.min(width - 20, p.x)), y: Math.max(20, Math.min(height - 20, p.y)) });
  const maxWeight = Math.max(1, ...data.edges.map((e) => e.weight));
  const argsOf = (node) => node.type === "agent" ? { view: "agent", agent_id: node.id }
    : node.type === "session" ? { view: "session", session_id: node.id }
    : node.type === "decision" ? { view: "decision", ledger_id: node.id }
    : { view: "graph", [node.type]: node.id };
  const svg = s("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "graph of " + nodes.length + " nodes" },
    data.edges.map((e) => {
      const a = clamp(position.get(e.source)), b = clamp(position.get(e.target));
      return s("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, stroke: EDGE_COLORS[e.type] || "currentColor",
        "stroke-opacity": EDGE_COLORS[e.type] ? 0.8 : 0.25, "stroke-width": 1 + 3 * e.weight / maxWeight },
        s("title", {}, e.source + " " + e.label + " " + e.target));
    }),
    nodes.map((node) => {
      const p = clamp(position.get(node.key));
      const r = node.depth === 0 && data.mode !== "agent_network" ? 11 : node.type === "agent" ? 9 : 6;
      const group = s("g", { style: ui.canDrill() ? "cursor:pointer" : null },
        s("circle", { cx: p.x, cy: p.y, r, fill: COLORS[node.type], stroke: "#fff", "stroke-width": 1.5 }, s("title", {}, node.key + ": " + node.label)),
        nodes.length <= 40 || node.type === "agent" || node.depth === 0
          ? s("text", { x: p.x + r + 3, y: p.y + 4 }, node.label.length > 28 ? node.label.slice(0, 27) + "…" : node.label) : null);
      if (ui.canDrill()) group.addEventListener("click", () => ui.drill(argsOf(node)));
      return group;
    }));
  const counts = {};
  for (const node of nodes) counts[node.type] = (counts[node.type] || 0) + 1;
  const edgeCounts = {};
  for (const edge of data.edges) edgeCounts[edge.type] = (edgeCounts[edge.type] || 0) + 1;
  return h("div", { style: "display:grid;gap:14px" },
    ui.stats([
      { label: "nodes" + (data.truncated ? " (limit reached)" : ""), value: fmt.num(nodes.length), tone: data.truncated ? "warn" : "" },
      { label: "edges", value: fmt.num(data.edges.length) },
      { label: data.mode === "agent_network" ? "mode" : "depth · direction", value: data.mode === "agent_network" ? "agent network" : data.depth + " · " + data.direction }
    ]),
    ui.card(data.mode === "agent_network" ? "Agents and how they are linked" : "Around " + data.start, svg,
      h("div", { class: "legend" },
        Object.keys(counts).map((type) => h("span", {}, h("i", { style: "background:" + COLORS[type] }), type + " " + counts[type])),
        Object.keys(edgeCounts).map((type) => h("span", {}, h("i", { style: "background:" + (EDGE_COLORS[type] || "#9ca3af") }), type.replace(/_/g, " ") + " " + edgeCounts[type])))),
    ui.card("Edges", ui.table({
      rows: data.edges.map((e) => ({ ...e, from: (nodes.find((n) => n.key === e.source) || {}).label || e.source, to: (nodes.find((n) => n.key === e.target) || {}).label || e.target })),
      sort: ["weight", "desc"],
      placeholder: "Filter edges…",
      chips: { key: (e) => e.type, values: Object.keys(edgeCounts) },
      empty: "No edges between these nodes.",
      columns: [
        { key: "from", label: "From", wide: true, value: (e) => e.from },
        { key: "label", label: "Edge", nowrap: true, value: (e) => e.label, cell: (e) => ui.badge(e.label, EDGE_COLORS[e.type] ? "info" : "") },
        { key: "to", label: "To", wide: true, value: (e) => e.to },
        { key: "weight", label: "Weight", num: true, value: (e) => e.weight, cell: (e) => fmt.num(e.weight) }
      ]
    })));
}`
})
