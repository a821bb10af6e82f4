/** Evidence sources the fresh decisions cite, and their `cites` edges in the graph. */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { floats, texts, times, zipped } from "../../store/arrays.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import { groupBy, widen } from "./shared.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/** Counts each fresh decision once per source it cites, and links the two. */
export const writeCitations = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) {
  const sql = yield* ScopedSql
  const { tenant_id, workspace_id } = scope
  const citations = fresh.flatMap((a) => a.sources.map((source) => ({ decision: a.decision, source })))
  if (citations.length > 0) {
    const sources = [...groupBy(
      citations,
      (c) => c.source.source_id,
      (c) => ({ ...c.source, n: 1, first: c.decision.created_at, last: c.decision.created_at }),
      (acc, c) => {
        acc.n += 1
        widen(acc, c.decision.created_at)
      }
    ).values()]
    yield* sql`INSERT INTO sources (tenant_id, workspace_id, source_id, kind, label, decision_count, first_seen_at, last_seen_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, t.* FROM ${zipped(sql, {
        source_id: texts(sources.map((s) => s.source_id)),
        kind: texts(sources.map((s) => s.kind)),
        label: texts(sources.map((s) => s.label)),
        decision_count: floats(sources.map((s) => s.n)),
        first_seen_at: times(sources.map((s) => s.first.getTime())),
        last_seen_at: times(sources.map((s) => s.last.getTime()))
      })} AS t
      ON CONFLICT (tenant_id, workspace_id, source_id) DO UPDATE SET decision_count = sources.decision_count + EXCLUDED.decision_count,
        first_seen_at = least(sources.first_seen_at, EXCLUDED.first_seen_at),
        last_seen_at = greatest(sources.last_seen_at, EXCLUDED.last_seen_at)`
    yield* sql`INSERT INTO graph_edges (tenant_id, workspace_id, src_type, src_id, edge_type, dst_type, dst_id, weight, first_at, last_at)
      SELECT ${tenant_id}::uuid, ${workspace_id}::uuid, 'decision', t.ledger_id, 'cites', 'source', t.source_id, 1, t.at, t.at
      FROM ${zipped(sql, {
        ledger_id: texts(citations.map((c) => c.decision.ledger_id)),
        source_id: texts(citations.map((c) => c.source.source_id)),
        at: times(citations.map((c) => c.decision.created_at.getTime()))
      })} AS t
      ON CONFLICT DO NOTHING`
  }
})
