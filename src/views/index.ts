/**
 * The views of render_ui, in the order render_ui's description lists them. Adding a view: write its module
 * (see ../View.ts) and append it here.
 */
import { agentView } from "./agent.ts"
import { agentsView } from "./agents.ts"
import { decisionView } from "./decision.ts"
import { decisionsView } from "./decisions.ts"
import { featureView } from "./feature.ts"
import { graphView } from "./graph.ts"
import { pulseView } from "./pulse.ts"
import { sessionView } from "./session.ts"

export const views = [agentsView, agentView, sessionView, decisionView, decisionsView, pulseView, featureView, graphView] as const

/** Every view's renderer, as the source of one object literal `{ name: (data, ui, params) => Node }`. */
export const viewRenderers = `{\n${views.map((view) => `${JSON.stringify(view.name)}: ${view.render}`).join(",\n")}\n}`
