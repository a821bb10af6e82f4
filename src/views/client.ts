/**
 * The browser side shared by every render_ui view: brand styles, the MCP Apps bridge (JSON-RPC over postMessage
 * with the host, protocol 2026-01-26 of `io.modelcontextprotocol/ui`) and the drawing helpers views use (`ui.*`).
 *
 * Everything is inline and self-contained: no fetch, no external font or script. Text always goes through DOM text
 * nodes, never innerHTML, because decisions carry arbitrary model and user text.
 */

export const APP_PROTOCOL_VERSION = "2026-01-26"

export const BRAND_MARK = `<svg viewBox="0 0 32 32" width="28" height="28" aria-hidden="true">
<rect x="3" y="5" width="22" height="24" rx="4" fill="#312e81"/><rect x="7" y="3" width="22" height="24" rx="4" fill="#4f46e5"/>
<path d="M12 10h12M12 15h12M12 20h7" stroke="#e0e7ff" stroke-width="2.2" stroke-linecap="round"/>
<circle cx="24" cy="21" r="4.5" fill="#14b8a6"/><path d="m22 21 1.5 1.5 2.7-3" stroke="#fff" stroke-width="1.6" fill="none" stroke-linecap="round"/></svg>`

export const STYLES = `
:root{--bg:var(--color-background-primary,#fbfbfe);--panel:var(--color-background-secondary,#ffffff);--sunk:var(--color-background-tertiary,#f1f2f8);
--text:var(--color-text-primary,#1c1b33);--muted:var(--color-text-secondary,#5f5e7a);--faint:var(--color-text-tertiary,#6b6a85);
--line:var(--color-border-primary,#e3e3ef);--brand:#4f46e5;--brand-2:#14b8a6;--ok:#086a48;--warn:#7c4700;--bad:#b01f34;--info:#1f55b3;
--radius:var(--border-radius-md,10px);--font:var(--font-sans,ui-sans-serif,system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif);
--mono:var(--font-mono,ui-monospace,SFMono-Regular,Menlo,Consolas,monospace);color-scheme:light}
:root[data-theme=dark]{--bg:var(--color-background-primary,#12111f);--panel:var(--color-background-secondary,#1b1a2e);--sunk:var(--color-background-tertiary,#24233a);
--text:var(--color-text-primary,#ecebff);--muted:var(--color-text-secondary,#b3b1d4);--faint:var(--color-text-tertiary,#7f7da3);--line:var(--color-border-primary,#302f4a);
--brand:#8b85ff;--ok:#34d399;--warn:#fbbf24;--bad:#fb7185;--info:#60a5fa;color-scheme:dark}
*{box-sizing:border-box}html,body{margin:0;background:var(--bg);color:var(--text);font:14px/1.45 var(--font)}
header.app{display:flex;align-items:center;gap:12px;padding:14px 18px 10px;border-bottom:1px solid var(--line)}
header.app .brand{font-size:11px;letter-spacing:.08em;text-transform:uppercase;color:var(--brand);font-weight:700}
header.app h1{margin:0;font-size:18px;font-weight:650;line-height:1.25;word-break:break-word}
header.app .titles{flex:1;min-width:0}
button.back{border:1px solid var(--line);background:var(--panel);color:var(--text);border-radius:8px;padding:5px 10px;font:inherit;cursor:pointer}
main{padding:14px 18px 18px;display:grid;gap:14px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:var(--radius);padding:12px 14px;min-width:0}
.card>h2{margin:0 0 10px;font-size:13px;font-weight:650;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}
.grid2{display:grid;gap:14px;grid-template-columns:repeat(auto-fit,minmax(300px,1fr))}
.stats{display:grid;gap:10px;grid-template-columns:repeat(auto-fit,minmax(120px,1fr))}
.stat{background:var(--panel);border:1px solid var(--line);border-radius:var(--radius);padding:10px 12px}
.stat .v{font-size:20px;font-weight:700;font-variant-numeric:tabular-nums}.stat .l{color:var(--muted);font-size:12px}
.stat.bad .v{color:var(--bad)}.stat.warn .v{color:var(--warn)}.stat.ok .v{color:var(--ok)}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;background:var(--sunk);color:var(--muted);white-space:nowrap}
.badge.ok{background:color-mix(in srgb,var(--ok) 10%,transparent);color:var(--ok)}.badge.warn{background:color-mix(in srgb,var(--warn) 10%,transparent);color:var(--warn)}
.badge.bad{background:color-mix(in srgb,var(--bad) 10%,transparent);color:var(--bad)}.badge.info{background:color-mix(in srgb,var(--info) 10%,transparent);color:var(--info)}
.muted{color:var(--muted)}.faint{color:var(--faint)}.mono{font-family:var(--mono);font-size:12.5px}.num{text-align:right;font-variant-numeric:tabular-nums}
a.drill,button.drill{color:var(--brand);text-decoration:none;cursor:pointer;background:none;border:0;padding:0;font:inherit;text-align:left}
a.drill:hover,button.drill:hover{text-decoration:underline}
.bars{display:grid;gap:6px}.bar{display:grid;grid-template-columns:minmax(110px,42%) 1fr auto;gap:8px;align-items:center}
.bar .track{background:var(--sunk);border-radius:6px;height:12px;overflow:hidden}.bar .fill{height:100%;border-radius:6px;background:linear-gradient(90deg,var(--brand),var(--brand-2))}
.bar .fill.bad{background:var(--bad)}.bar .label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}.bar .value{font-variant-numeric:tabular-nums;color:var(--muted);font-size:12.5px}
.mix{display:flex;height:12px;border-radius:6px;overflow:hidden;background:var(--sunk)}.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin-top:8px;font-size:12.5px;color:var(--muted)}
.legend i{display:inline-block;width:9px;height:9px;border-radius:3px;margin-right:5px;vertical-align:-1px}
svg.chart{width:100%;height:auto;display:block}svg.chart text{fill:var(--faint);font:10.5px var(--font)}
.tablebar{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:8px}
.tablebar input{flex:1;min-width:160px;border:1px solid var(--line);background:var(--bg);color:var(--text);border-radius:8px;padding:6px 10px;font:inherit}
.chip{border:1px solid var(--line);background:var(--bg);color:var(--muted);border-radius:999px;padding:2px 10px;font:inherit;font-size:12.5px;cursor:pointer}
.chip[aria-pressed=true]{background:var(--brand);border-color:var(--brand);color:#fff}
.tablewrap{overflow:auto;max-height:520px;border:1px solid var(--line);border-radius:8px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{padding:7px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{position:sticky;top:0;background:var(--sunk);font-weight:650;color:var(--muted);cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" ▲";font-size:10px}th[aria-sort=descending]::after{content:" ▼";font-size:10px}
tbody tr:hover{background:color-mix(in srgb,var(--brand) 6%,transparent)}tbody tr.clickable{cursor:pointer}tbody tr.clickable:focus-visible{outline:2px solid var(--brand);outline-offset:-2px}
.count{color:var(--faint);font-size:12.5px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0}dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;min-width:0;word-break:break-word}
ol.timeline{list-style:none;margin:0;padding:0;position:relative}
ol.timeline li{position:relative;padding:0 0 12px 26px}
ol.timeline li::before{content:"";position:absolute;left:8px;top:18px;bottom:0;width:2px;background:var(--line)}ol.timeline li:last-child::before{display:none}
ol.timeline .dot{position:absolute;left:2px;top:4px;width:14px;height:14px;border-radius:50%;border:3px solid var(--panel);background:var(--ok);box-shadow:0 0 0 1px var(--line)}
ol.timeline .dot.bad{background:var(--bad)}ol.timeline .dot.warn{background:var(--warn)}ol.timeline .dot.info{background:var(--info)}
.step{border-left:3px solid var(--line);padding:4px 10px;margin:6px 0;background:var(--sunk);border-radius:0 8px 8px 0}
.step .k{font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--faint);font-weight:650}
.step .k .src{text-transform:none;letter-spacing:0;font-family:var(--mono);font-weight:500}td.nowrap{white-space:nowrap}td.wide{min-width:260px}
.step.reasoning{border-color:var(--info)}.step.tool_call,.step.tool_result{border-color:var(--warn)}.step.answer{border-color:var(--ok)}.step.instruction{border-color:var(--brand)}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0 0;font:12.5px/1.45 var(--mono);max-height:260px;overflow:auto}
.notice{padding:10px 12px;border-radius:8px;background:var(--sunk);color:var(--muted)}.notice.bad{color:var(--bad)}
footer{padding:0 18px 14px;color:var(--faint);font-size:11.5px}
details.fold summary{cursor:pointer;display:flex;gap:10px;align-items:baseline;min-width:0}details.fold summary .k{flex:none}details.fold summary .faint{flex:1;min-width:0;font-size:12.5px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}details.fold[open] summary .faint{display:none}
nav.pager{display:flex;justify-content:space-between;gap:10px;margin-top:10px}
`

/**
 * The drawing helpers views use (`ui.h`, `ui.table`, ...), shared by both hosts of the views: the MCP App (this
 * module's RUNTIME) and the app's web pages (src/app/webRuntime.ts). They call the host's `canDrill`, `drill` and
 * `link`, which each host defines around them.
 */
export const HELPERS = String.raw`
// ---- helpers for views
const h = (tag, props, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    // through the CSSOM: neither host's Content-Security-Policy allows style attributes
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
};
const append = (node, children) => {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};
const SVG = "http://www.w3.org/2000/svg";
const s = (tag, attrs, ...children) => {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key === "style") node.style.cssText = value; else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) if (child !== undefined && child !== null) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
};

const fmt = {
  num: (n) => n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"),
  usd: (n) => n === null || n === undefined ? "unpriced" : n !== 0 && Math.abs(n) < 0.01 ? "$" + Number(n).toPrecision(2) : "$" + Number(n).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }),
  score: (n) => n === null || n === undefined ? "–" : Number(n).toFixed(2),
  pct: (n) => n === null || n === undefined ? "–" : (n * 100).toFixed(n < 0.1 && n > 0 ? 1 : 0) + "%",
  ms: (n) => n === null || n === undefined ? "–" : n >= 10000 ? (n / 1000).toFixed(1) + " s" : Math.round(n) + " ms",
  time: (iso) => iso ? iso.replace("T", " ").replace(/(:\d\d)(\.\d+)?Z$/, "$1Z") : "–",
  day: (iso) => iso ? iso.slice(0, 10) : "–",
  hour: (iso) => iso ? iso.slice(11, 16) : "–",
  ago: (iso) => {
    const seconds = (Date.now() - Date.parse(iso)) / 1000;
    if (!Number.isFinite(seconds)) return "–";
    if (seconds < 90) return "just now";
    if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
    if (seconds < 129600) return Math.round(seconds / 3600) + " h ago";
    return Math.round(seconds / 86400) + " d ago";
  },
  short: (id) => id && id.length > 13 ? id.slice(0, 8) + "…" + id.slice(-4) : id
};

const TONE = { success: "ok", tool_call: "info", refusal: "warn", truncated: "warn", filtered: "warn", error: "bad",
  healthy: "ok", degraded: "warn", failing: "bad", idle: "" };
const PALETTE = ["#4f46e5", "#14b8a6", "#f59e0b", "#ec4899", "#0ea5e9", "#84cc16", "#a855f7", "#f97316", "#64748b", "#ef4444", "#22c55e", "#eab308", "#06b6d4"];
const OUTCOME_COLOR = { success: "#0f9f6e", tool_call: "#2f6fdc", refusal: "#c27803", truncated: "#e0a100", filtered: "#a16207", error: "#dc2f45" };

const badge = (text, tone) => h("span", { class: "badge " + (tone || "") , text });
const outcome = (value) => badge(value.replace("_", " "), TONE[value]);
const card = (title, ...children) => h("section", { class: "card" }, title ? h("h2", { text: title }) : null, children);
const stats = (items) => h("div", { class: "stats" }, items.map((item) =>
  h("div", { class: "stat " + (item.tone || ""), title: item.hint }, h("div", { class: "v", text: item.value }), h("div", { class: "l", text: item.label }))));
const kv = (pairs) => h("dl", { class: "kv" }, pairs.filter((p) => p && p[1] !== undefined && p[1] !== null && p[1] !== "").map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)]));
const empty = (text) => h("div", { class: "notice", text });
/** The label of a trace step, evidence item or artifact: its kind, then where it comes from (kept as written). */
const label = (kind, ...details) => h("div", { class: "k" }, kind.replace("_", " "),
  details.filter(Boolean).map((detail) => h("span", { class: "src", text: " · " + detail })));

/** Horizontal bars: [{ label, value, tone?, args? }] (args: render_ui arguments to drill into). */
const bars = (items, options) => {
  const format = (options && options.format) || fmt.num;
  const max = Math.max(0, ...items.map((i) => i.value));
  if (items.length === 0) return empty("Nothing to chart.");
  return h("div", { class: "bars", role: "list" }, items.map((item) => h("div", { class: "bar", role: "listitem" },
    h("div", { class: "label", title: item.label }, item.args ? link(item.label, item.args) : item.label),
    h("div", { class: "track" }, h("div", { class: "fill " + (item.tone || ""), style: "width:" + (max > 0 ? Math.max(1.5, item.value / max * 100) : 0) + "%" })),
    h("div", { class: "value", text: format(item.value) }))));
};

/** Stacked columns over time: buckets [{ label, values: [..] }], series [{ name, color }]. */
const columns = (buckets, options) => {
  if (buckets.length === 0) return empty("No activity in range.");
  const series = options.series;
  const width = 900, height = 200, left = 70, bottom = 22, top = 10;
  const max = Math.max(0, ...buckets.map((b) => b.values.reduce((a, v) => a + v, 0))) || 1;
  const step = (width - left) / buckets.length;
  const barWidth = Math.max(2, step * 0.72);
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const every = Math.ceil(buckets.length / 8);
  const chart = s("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": options.label || "chart" },
    s("line", { x1: left, x2: width, y1: y(0), y2: y(0), stroke: "currentColor", "stroke-opacity": 0.15 }),
    s("line", { x1: left, x2: width, y1: y(max), y2: y(max), stroke: "currentColor", "stroke-opacity": 0.08, "stroke-dasharray": "3 3" }),
    s("text", { x: left - 6, y: y(max) + 4, "text-anchor": "end" }, (options.format || fmt.num)(max)),
    s("text", { x: left - 6, y: y(0) + 4, "text-anchor": "end" }, "0"),
    buckets.map((bucket, i) => {
      let base = 0;
      const x = left + i * step + (step - barWidth) / 2;
      const parts = bucket.values.map((v, k) => {
        const rect = s("rect", { x, width: barWidth, y: y(base + v), height: Math.max(0, y(base) - y(base + v)), rx: 2, fill: series[k].color },
          s("title", {}, bucket.label + " — " + series[k].name + ": " + (options.format || fmt.num)(v)));
        base += v;
        return rect;
      });
      const label = i % every === 0 ? s("text", { x: x + barWidth / 2, y: height - 6, "text-anchor": "middle" }, bucket.short || bucket.label) : null;
      return [parts, label];
    }));
  return h("div", {}, chart, h("div", { class: "legend" }, series.map((item) => h("span", {}, h("i", { style: "background:" + item.color }), item.name))));
};

/** Proportions of a count record as one stacked bar with a legend. */
const mix = (counts, colors) => {
  const entries = Object.entries(counts || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  const total = entries.reduce((a, [, n]) => a + n, 0);
  if (total === 0) return empty("No decisions.");
  const color = (key, i) => (colors && colors[key]) || PALETTE[i % PALETTE.length];
  return h("div", {},
    h("div", { class: "mix", role: "img", "aria-label": entries.map(([k, n]) => k + " " + n).join(", ") },
      entries.map(([key, n], i) => h("div", { title: key + ": " + n, style: "width:" + (n / total * 100) + "%;background:" + color(key, i) }))),
    h("div", { class: "legend" }, entries.map(([key, n], i) => h("span", {}, h("i", { style: "background:" + color(key, i) }), key.replace("_", " ") + " " + n + " (" + fmt.pct(n / total) + ")"))));
};

/**
 * A sortable, filterable table. columns: [{ key, label, value: row => sortable, cell?: row => node, num?, nowrap?, wide? }];
 * options: { rows, sort: [key, "asc"|"desc"], chips?: { label, key: row => string, values: [...] }, args?: row => render_ui args }.
 */
const table = (options) => {
  const columnsDef = options.columns;
  let [sortKey, sortDir] = options.sort || [columnsDef[0].key, "asc"];
  let query = "";
  const active = new Set();
  const body = h("tbody");
  const count = h("span", { class: "count" });
  const header = h("tr", {}, columnsDef.map((col) => h("th", {
    class: col.num ? "num" : "", scope: "col", "data-key": col.key, text: col.label,
    onclick: () => { sortDir = sortKey === col.key && sortDir === "desc" ? "asc" : sortKey === col.key ? "desc" : (col.num ? "desc" : "asc"); sortKey = col.key; draw(); }
  })));
  const search = h("input", { type: "search", placeholder: options.placeholder || "Filter…", "aria-label": "Filter rows", oninput: (e) => { query = e.target.value.toLowerCase(); draw(); } });
  const chips = options.chips ? options.chips.values.map((value) => h("button", { class: "chip", type: "button", "aria-pressed": "false", "data-value": value, text: value.replace("_", " "),
    onclick: (e) => { active.has(value) ? active.delete(value) : active.add(value); e.target.setAttribute("aria-pressed", String(active.has(value))); draw(); } })) : [];
  const draw = () => {
    const col = columnsDef.find((c) => c.key === sortKey) || columnsDef[0];
    const rows = options.rows.filter((row) =>
      (query === "" || columnsDef.some((c) => String(c.value(row) ?? "").toLowerCase().includes(query))) &&
      (active.size === 0 || active.has(options.chips.key(row))));
    rows.sort((a, b) => {
      const x = col.value(a), y = col.value(b);
      const order = x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x < y ? -1 : 1;
      return sortDir === "asc" ? order : -order;
    });
    for (const th of header.children) th.setAttribute("aria-sort", th.dataset.key === sortKey ? (sortDir === "asc" ? "ascending" : "descending") : "none");
    body.replaceChildren(...rows.map((row) => {
      const args = options.args && options.args(row);
      const drillable = args && canDrill();
      // a drillable row is reachable by keyboard too: Tab to it, Enter to open it
      return h("tr", { class: drillable ? "clickable" : "", tabindex: drillable ? "0" : null, onclick: drillable ? () => drill(args) : null,
        onkeydown: drillable ? (e) => { if (e.key === "Enter" && e.target === e.currentTarget) drill(args); } : null },
        columnsDef.map((c) => h("td", { class: [c.num ? "num" : "", c.nowrap ? "nowrap" : "", c.wide ? "wide" : ""].join(" ").trim() }, c.cell ? c.cell(row) : c.value(row))));
    }));
    if (rows.length === 0) body.replaceChildren(h("tr", {}, h("td", { colspan: columnsDef.length, class: "muted", text: options.empty || "No rows match." })));
    count.textContent = rows.length + " of " + options.rows.length;
  };
  draw();
  return h("div", {}, h("div", { class: "tablebar" }, search, chips, count), h("div", { class: "tablewrap" }, h("table", {}, h("thead", {}, header), body)));
};

/**
 * Long text folded: a summary with its opening words; the whole text enters the page only when opened. "always"
 * folds short texts too (a long trace reads as a list of one-line steps).
 */
const FOLD_AT = 1200;
const fold = (head, text, always) => {
  const value = String(text === undefined || text === null ? "" : text);
  if (value.length <= FOLD_AT && !always) return h("div", {}, head, h("pre", { text: value }));
  const body = h("pre");
  const details = h("details", { class: "fold", ontoggle: () => { if (details.open && !body.firstChild) body.textContent = value; } },
    h("summary", {}, head, h("span", { class: "faint", text: value.slice(0, 160).replace(/\s+/g, " ") + (value.length > 160 ? "… (" + fmt.num(value.length) + " characters)" : "") })),
    body);
  return details;
};
/**
 * A long list drawn in slices: the first "first" items at once, the rest a "batch" per task, so the page answers
 * input while a list of thousands of items fills in (no task blocks the main thread for long).
 */
const lazyList = (tag, props, items, draw, first, batch) => {
  const node = h(tag, props);
  const size = batch || 100;
  const add = (from, count) => {
    node.append(...items.slice(from, from + count).map(draw));
    if (from + count < items.length) setTimeout(() => add(from + count, size), 0);
  };
  add(0, first || 50);
  return node;
};
/** Paging links for a view's list: "Next page →" with the next cursor, "← First page" when not on the first. */
const pager = (args, nextCursor) => {
  const { cursor, ...first } = args;
  if (!nextCursor && !cursor) return null;
  return h("nav", { class: "pager", "aria-label": "Pages" },
    cursor ? link("← First page", first) : h("span"),
    nextCursor ? link("Next page →", { ...first, cursor: nextCursor }) : null);
};
/** what views get as "ui", besides the host's link, drill and canDrill */
const helpers = { h, s, fmt, badge, outcome, card, stats, kv, empty, label, bars, columns, mix, table, fold, lazyList, pager, TONE, PALETTE, OUTCOME_COLOR };
`

/**
 * The MCP App runtime: bridge + helpers + shell, in one closure. `__LEDGER_VIEWS__` is replaced by the views' renderers
 * (`{ name: (data, ui, params) => Node }`).
 */
export const RUNTIME = String.raw`(() => {
"use strict";
const VIEWS = __LEDGER_VIEWS__;
const root = document.documentElement;

// ---- bridge: JSON-RPC 2.0 with the host over postMessage
let nextId = 1;
const pending = new Map();
let hostCapabilities = {};
/** the tool result the host delivered last, as JSON */
let delivered = null;
const post = (message) => window.parent.postMessage(message, "*");
const request = (method, params) => new Promise((resolve, reject) => {
  const id = nextId++;
  pending.set(id, { resolve, reject });
  post({ jsonrpc: "2.0", id, method, params });
});
const notify = (method, params) => post({ jsonrpc: "2.0", method, params });
window.addEventListener("message", (event) => {
  if (event.source !== window.parent) return;
  const message = event.data;
  if (!message || message.jsonrpc !== "2.0") return;
  if (message.id !== undefined && message.method === undefined) {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(message.error.message)); else waiter.resolve(message.result);
    return;
  }
  if (message.id !== undefined) {
    const known = message.method === "ping" || message.method === "ui/resource-teardown";
    post(known ? { jsonrpc: "2.0", id: message.id, result: {} }
      : { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found: " + message.method } });
    return;
  }
  if (message.method === "ui/notifications/tool-result") {
    // a host may deliver the same result again (the view re-shown, a retry): redrawing would drop the reader's
    // place — filters, sort, the view drilled into; unless drilling has become possible since (a result delivered
    // before initialisation finished was drawn without links)
    const key = canDrill() + JSON.stringify(message.params);
    if (key !== delivered) { delivered = key; show(message.params, true); }
  }
  else if (message.method === "ui/notifications/host-context-changed") applyContext(message.params);
  else if (message.method === "ui/notifications/tool-cancelled") notice("The host cancelled this view.", false);
});

const applyContext = (context) => {
  if (!context) return;
  if (context.theme) root.dataset.theme = context.theme;
  const variables = context.styles && context.styles.variables;
  if (variables) for (const [name, value] of Object.entries(variables)) if (value) root.style.setProperty(name, value);
};

${HELPERS}
// ---- navigation: drill-down through the host (tools/call of render_ui), with a back stack
const backStack = [];
let current = null;
const canDrill = () => Boolean(hostCapabilities.serverTools);
const drill = (args) => {
  if (!canDrill()) return;
  notice("Loading…", false, true);
  request("tools/call", { name: "render_ui", arguments: args })
    .then((result) => { if (current) backStack.push(current); show(result, false); })
    .catch((error) => notice("Could not load the view: " + error.message, true));
};
const link = (text, args) => canDrill()
  ? h("button", { class: "drill", type: "button", onclick: (e) => { e.stopPropagation(); drill(args); }, text })
  : h("span", { text });

const ui = { ...helpers, link, drill, canDrill };

// ---- shell
const titleNode = document.getElementById("title");
const subtitleNode = document.getElementById("subtitle");
const mainNode = document.querySelector("main");
const backButton = document.getElementById("back");
const footerNode = document.querySelector("footer");
backButton.addEventListener("click", () => { const previous = backStack.pop(); if (previous) show(previous, false); });

const notice = (text, bad, keep) => {
  const node = h("div", { class: "notice" + (bad ? " bad" : ""), role: bad ? "alert" : "status", text });
  if (keep) mainNode.prepend(node); else mainNode.replaceChildren(node);
};

const show = (result, fresh) => {
  if (fresh) backStack.length = 0;
  current = result;
  backButton.hidden = backStack.length === 0;
  const payload = result && result.structuredContent;
  if (!payload || result.isError) {
    const text = (result && result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    titleNode.textContent = "Agent Decision Ledger";
    notice(text || "The tool returned no data.", Boolean(result && result.isError));
    return;
  }
  const render = VIEWS[payload.view];
  titleNode.textContent = payload.title;
  subtitleNode.textContent = payload.view_title ? " · " + payload.view_title : "";
  document.title = payload.title + " · Agent Decision Ledger";
  root.dataset.view = payload.view;
  if (!render) { notice("This page does not know the view \"" + payload.view + "\".", true); return; }
  try {
    mainNode.replaceChildren(render(payload.data, ui, payload.params || {}));
  } catch (error) {
    notice("Could not draw this view: " + error.message, true);
  }
  footerNode.textContent = "Read-only · generated " + fmt.time(payload.generated_at) + (canDrill() ? " · click rows to drill down" : "");
};

// the content's own height (not scrollHeight, which never drops below the iframe's), so the host can shrink it too
new ResizeObserver(() => {
  const box = root.getBoundingClientRect();
  notify("ui/notifications/size-changed", { width: Math.ceil(box.width), height: Math.ceil(box.height) });
}).observe(root);

request("ui/initialize", {
  appInfo: { name: "ledger-views", version: "0.1.0" },
  appCapabilities: { availableDisplayModes: ["inline", "fullscreen"] },
  protocolVersion: "${APP_PROTOCOL_VERSION}"
}).then((result) => {
  hostCapabilities = result.hostCapabilities || {};
  applyContext(result.hostContext);
  notify("ui/notifications/initialized", {});
}).catch((error) => notice("The host did not accept this app: " + error.message, true));
})();
`
