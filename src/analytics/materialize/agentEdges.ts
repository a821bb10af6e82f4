/** Agent↔agent edges of the graph: hand-offs, shared subjects, shared executions. */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { floats, texts, times, zipped } from "../../store/arrays.ts"
import { groupBy, widen } from "./shared.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/** Adds `weight` to agent↔agent edges (both directions for symmetric types), summed per pair first. */
export const addAgentEdges = Effect.fnUntraced(function*(
  scope: WorkspaceScope,
  edgeType: "handed_off_to" | "shares_subject" | "shares_execution",
  increments: ReadonlyArray<{ readonly from: string; readonly to: string; readonly at: Date }>
) {
  const directed = edgeType === "handed_off_to" ? increments : increments.flatMap((i) => [i, { from: i.to, to: i.from, at: i.at }])
  if (directed.length === 0) return
  const sql = yield* ScopedSql
  const pairs = [...groupBy(
    directed,
    (i) => `${i.from}\u0000${i.to}`,
    (i) => ({ from: i.from, to: i.to, n: 1, first: i.at, last: i.at }),
    (acc, i) => {
      acc.n += 1
      widen(acc, i.at)
    }
  ).values()]
  yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, 'agent', t.src, ${edgeType}, 'agent', t.dst, t.n, t.first_at, t.last_at
    FROM ${zipped(sql, {
      src: texts(pairs.map((p) => p.from)),
      dst: texts(pairs.map((p) => p.to)),
      n: floats(pairs.map((p) => p.n)),
      first_at: times(pairs.map((p) => p.first.getTime())),
      last_at: times(pairs.map((p) => p.last.getTime()))
    })} AS t
    ON CONFLICT (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id) DO UPDATE SET
      weight = graph_edges.weight + EXCLUDED.weight, first_at = least(graph_edges.first_at, EXCLUDED.first_at),
      last_at = greatest(graph_edges.last_at, EXCLUDED.last_at)`
})
