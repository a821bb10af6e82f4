/**
 * The ledger in the browser: each view's path (../paths.ts) answers with a page that carries the view's payload,
 * loaded under the signed-in member's principal through the same loader render_ui uses (src/views/loadView.ts) —
 * so the same query layer and the same tenant scope — and drawn by the same renderers (../webRuntime.ts).
 */
import { type Context, Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { argumentsFromText, loadView, type ViewPayload, type ViewsServices, viewsByName } from "../../views/loadView.ts"
import { type AppContext, frameUser, messagePage, requireMember } from "../context.ts"
import { html, page, pageResponse, raw } from "../html.ts"
import { viewOfPath } from "../paths.ts"

/** The nav entry each view belongs to. */
const SECTION: Record<string, string> = {
  agents: "Agents",
  agent: "Agents",
  session: "Agents",
  decision: "Decisions",
  decisions: "Decisions",
  pulse: "Pulse",
  feature: "Pulse",
  graph: "Graph"
}

/** JSON inside a `<script type="application/json">`: nothing in it may close the element or start a comment. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029")

type Loaded = { readonly payload?: ViewPayload; readonly refused?: { readonly status: number; readonly message: string } }

export const ledgerHandlers = (context: AppContext, services: Context.Context<ViewsServices>) => {
  const viewPage = (request: HttpServerRequest.HttpServerRequest) =>
    requireMember(context, request, (signed) =>
      Effect.gen(function*() {
        const url = new URL(request.url, context.config.publicUrl)
        const found = viewOfPath(url.pathname, url.searchParams)
        const view = found === undefined ? undefined : viewsByName.get(found.view)
        if (found === undefined || view === undefined) return messagePage("Not found", "There is no page here.", 404, signed)
        const loaded = yield* loadView(signed.member.principal, view, argumentsFromText(view, found.args)).pipe(
          Effect.map((payload): Loaded => ({ payload })),
          Effect.catchTags({
            BadRequest: (error) => Effect.succeed<Loaded>({ refused: { status: 400, message: error.message } }),
            NotFound: (error) => Effect.succeed<Loaded>({ refused: { status: 404, message: error.message } })
          }),
          Effect.provide(services)
        )
        if (loaded.refused !== undefined) {
          return messagePage(loaded.refused.status === 404 ? "Not found" : "Cannot show this", loaded.refused.message, loaded.refused.status, signed)
        }
        const payload = loaded.payload!
        return pageResponse(page({
          title: payload.title,
          section: SECTION[payload.view] ?? "Agents",
          user: frameUser(signed),
          scripts: ["/app/views.js"],
          body: html`<p class="muted view-kind">${payload.view_title} · generated ${payload.generated_at.slice(0, 19).replace("T", " ")}Z</p>
<div id="view" aria-busy="true" aria-live="polite"><noscript><div class="notice">This page draws its charts and tables with JavaScript.</div></noscript></div>
<script type="application/json" id="ledger-data">${raw(scriptJson(payload))}</script>`
        }))
      }))

  return { viewPage }
}
