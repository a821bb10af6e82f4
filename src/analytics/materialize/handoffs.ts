/** Hand-offs between agents, found through the line prints of decisions' inputs and outputs. */
import { Effect } from "effect"
import { ScopedSql } from "../../store/TenantSql.ts"
import { texts, times, uuids, zipped } from "../../store/arrays.ts"
import type { DecisionAnalysis } from "../analyse.ts"
import { addAgentEdges } from "./agentEdges.ts"
import type { WorkspaceScope } from "../../domain/principal.ts"

/**
 * Matching rows per hand-off lookup. A hand-off shows as a line few decisions share; a line thousands share is
 * boilerplate, and this bound keeps such lines from making every batch slow.
 */
const HANDOFF_CANDIDATES = 2_000

/**
 * Hand-offs: a fresh decision whose newest input repeats distinctive lines of another agent's earlier output (or
 * whose output another agent's later input repeats). Each producer/consumer pair counts once, with the number of
 * lines they share.
 */
export const writeHandoffs = Effect.fnUntraced(function*(scope: WorkspaceScope, fresh: ReadonlyArray<DecisionAnalysis>) {
  const sql = yield* ScopedSql
  const prints = fresh.flatMap((a) => [
    ...a.inputPrints.map((print) => ({ direction: "in", print, decision: a.decision })),
    ...a.outputPrints.map((print) => ({ direction: "out", print, decision: a.decision }))
  ])
  if (prints.length === 0) return
  yield* sql`INSERT INTO decision_prints (tenant_id, workspace_id, direction, print, ledger_id, agent_id, created_at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM ${zipped(sql, {
      direction: texts(prints.map((p) => p.direction)),
      print: texts(prints.map((p) => p.print)),
      ledger_id: uuids(prints.map((p) => p.decision.ledger_id)),
      agent_id: texts(prints.map((p) => p.decision.agent_id)),
      created_at: times(prints.map((p) => p.decision.created_at.getTime()))
    })} AS t
    ON CONFLICT DO NOTHING`
  // the other side of each print: outputs matching fresh inputs, inputs matching fresh outputs
  const matches = yield* sql<{ direction: "in" | "out"; print: string; ledger_id: string; agent_id: string; created_at: Date }>`
    (SELECT direction, print, ledger_id::text AS ledger_id, agent_id, created_at FROM decision_prints
      WHERE direction = 'out' AND print = ANY(${[...new Set(fresh.flatMap((a) => a.inputPrints))]}::text[]) LIMIT ${HANDOFF_CANDIDATES})
    UNION ALL
    (SELECT direction, print, ledger_id::text AS ledger_id, agent_id, created_at FROM decision_prints
      WHERE direction = 'in' AND print = ANY(${[...new Set(fresh.flatMap((a) => a.outputPrints))]}::text[]) LIMIT ${HANDOFF_CANDIDATES})`
  const pairs = new Map<string, { producer: Side; consumer: Side; shared: number }>()
  interface Side {
    readonly ledger_id: string
    readonly agent_id: string
    readonly created_at: Date
  }
  const count = (producer: Side, consumer: Side) => {
    if (producer.agent_id === consumer.agent_id || producer.created_at > consumer.created_at) return
    const key = `${producer.ledger_id}|${consumer.ledger_id}`
    const pair = pairs.get(key)
    if (pair === undefined) pairs.set(key, { producer, consumer, shared: 1 })
    else pair.shared += 1
  }
  for (const p of prints) {
    for (const match of matches) {
      if (match.print !== p.print || match.direction === p.direction) continue
      if (p.direction === "in") count(match, p.decision)
      // a pair of two fresh decisions is met from both sides: count it from its consumer's side only
      else if (!fresh.some((a) => a.decision.ledger_id === match.ledger_id)) count(p.decision, match)
    }
  }
  if (pairs.size === 0) return
  const found = yield* sql<{ producer_agent: string; consumer_agent: string; at: Date }>`
    INSERT INTO handoffs (tenant_id, workspace_id, producer_ledger_id, consumer_ledger_id, producer_agent, consumer_agent, shared_lines, at)
    SELECT ${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid, t.* FROM jsonb_to_recordset(${
    JSON.stringify([...pairs.values()].map(({ consumer, producer, shared }) => ({
      producer: producer.ledger_id,
      consumer: consumer.ledger_id,
      producer_agent: producer.agent_id,
      consumer_agent: consumer.agent_id,
      shared,
      at: consumer.created_at.toISOString()
    })))
  }::jsonb) AS t(producer uuid, consumer uuid, producer_agent text, consumer_agent text, shared int, at timestamptz)
    ON CONFLICT DO NOTHING
    RETURNING producer_agent, consumer_agent, at`
  yield* addAgentEdges(scope, "handed_off_to", found.map((h) => ({ from: h.producer_agent, to: h.consumer_agent, at: h.at })))
})
