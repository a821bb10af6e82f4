/**
 * The views' second host: the app's web pages. The same renderers and drawing helpers as render_ui's MCP App
 * (src/views), with navigation by URL instead of tools/call: a link is a real `<a href>` to the view's path
 * (./paths.ts), so pages are deep links, open in new tabs and follow the browser's history. The payload is in the
 * page itself (`<script type="application/json" id="ledger-data">`), loaded on the server under the member's scope.
 */
import { HELPERS } from "../views/client.ts"
import { viewRenderers } from "../views/index.ts"
import { VIEW_PATHS } from "./paths.ts"

export const WEB_RUNTIME = String.raw`(() => {
"use strict";
const VIEWS = ${viewRenderers};
const PATHS = ${JSON.stringify(VIEW_PATHS)};
const root = document.documentElement;
${HELPERS}
// ---- navigation: every drill is a link to the view's path (./paths.ts applies the same rule on the server)
const hrefOf = (args) => {
  let path = PATHS[args.view] || "/";
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(args)) {
    if (key === "view" || value === undefined || value === null) continue;
    if (path.includes(":" + key)) path = path.replace(":" + key, encodeURIComponent(String(value)));
    else if (Array.isArray(value)) value.forEach((item) => query.append(key, String(item)));
    else query.set(key, String(value));
  }
  const search = query.toString();
  return search === "" ? path : path + "?" + search;
};
const canDrill = () => true;
const drill = (args) => { window.location.assign(hrefOf(args)); };
const link = (text, args) => h("a", { class: "drill", href: hrefOf(args), text });
const ui = { ...helpers, link, drill, canDrill };

// ---- shell: draw the page's payload
const target = document.getElementById("view");
const source = document.getElementById("ledger-data");
if (target && source) {
  try {
    const payload = JSON.parse(source.textContent);
    const render = VIEWS[payload.view];
    root.dataset.view = payload.view;
    target.replaceChildren(render(payload.data, ui, payload.params || {}));
    target.setAttribute("aria-busy", "false");
  } catch (error) {
    target.replaceChildren(h("div", { class: "notice bad", role: "alert", text: "Could not draw this view: " + error.message }));
  }
}
})();
`
