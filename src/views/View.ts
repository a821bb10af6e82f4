/**
 * One render_ui view (an MCP App screen) = one module under src/views/ exporting a `LedgerView`, listed in
 * ./index.ts. A view declares:
 * - `params`: the render_ui arguments it takes (a Struct; render_ui's inputSchema is the union of every view's),
 * - `data` + `load`: the payload it fetches under the caller's principal (render_ui's `structuredContent.data`),
 * - `text`: the readable fallback for hosts without MCP Apps (render_ui's `content`),
 * - `render`: the browser side — JS source of a function `(data, ui, params) => Node` that draws the payload with
 *   the helpers of ./client.ts (`ui.h`, `ui.table`, `ui.columns`, `ui.bars`, `ui.drill`, ...). It runs in the
 *   host's sandboxed iframe: no network, no imports, text only through DOM text nodes.
 */
import type { Effect, Schema } from "effect"
import type { Principal } from "../domain/principal.ts"
import type { ReadError } from "./arguments.ts"

export interface LedgerView<P extends Schema.Struct<Schema.Struct.Fields>, D extends Schema.Top, R> {
  readonly name: string
  readonly title: string
  /** one line for render_ui's description: what the view shows and which parameters it needs */
  readonly description: string
  readonly params: P
  readonly data: D
  readonly load: (principal: Principal, params: P["Type"]) => Effect.Effect<D["Type"], ReadError, R>
  readonly text: (data: D["Type"], params: P["Type"]) => string
  /** a title for this payload, e.g. "Session 0193… of billing-agent" */
  readonly heading: (data: D["Type"], params: P["Type"]) => string
  readonly render: string
}

export type AnyView = LedgerView<any, any, any>

export type ViewServices<V> = V extends LedgerView<any, any, infer R> ? R : never

export const defineView = <P extends Schema.Struct<Schema.Struct.Fields>, D extends Schema.Top, R>(
  view: LedgerView<P, D, R>
): LedgerView<P, D, R> => view
