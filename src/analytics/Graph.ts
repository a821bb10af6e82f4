/**
 * The analytics graph (docs/ARCHITECTURE.md, "Analytics"), read with one recursive query under the caller's RLS
 * scope.
 *
 * Nodes are agents, sessions, decisions, subjects and evidence sources. `ran` and `contains` edges are the ledger's
 * own rows (sessions, decisions); session↔session `shares_subject` links are read from the sessions' subjects
 * (`session_subjects`: work subjects not too common, rules.ts); `about`, `cites` and the agent↔agent links
 * (`handed_off_to`, `shares_subject`, `shares_execution`) are the materialiser's `graph_edges`. The walk is
 * breadth-first, so when the node limit cuts it the nodes kept are the nearest ones.
 */
import { Effect } from "effect"
import { NotFound } from "../domain/errors.ts"
import { isUuid } from "../domain/identifiers.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { currentSessionId } from "../store/sessionAliases.ts"
import { MAX_SUBJECT_SESSIONS, WORK_SUBJECT_KINDS } from "./rules.ts"
import type { EdgeType, GraphEdge, GraphNode, GraphResult, NodeType } from "./schema.ts"

const SYMMETRIC: ReadonlySet<EdgeType> = new Set(["shares_subject", "shares_execution"])
const WORK_KINDS: Array<string> = [...WORK_SUBJECT_KINDS]
const LABEL_CHARS = 90

export interface Traversal {
  readonly type: NodeType
  readonly id: string
  readonly edgeTypes: ReadonlyArray<EdgeType>
  readonly direction: "out" | "in" | "both"
  readonly depth: number
  readonly limit: number
}

const key = (type: string, id: string) => `${type}:${id}`
const clip = (text: string) => (text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1).trimEnd()}…` : text)

const edgeLabel = (type: EdgeType, weight: number): string => {
  switch (type) {
    case "ran":
      return `ran (${weight} decision${weight === 1 ? "" : "s"})`
    case "handed_off_to":
      return `handed off to (${weight}×)`
    case "shares_subject":
      return `shares ${weight} subject${weight === 1 ? "" : "s"}`
    case "shares_execution":
      return `shares ${weight} execution${weight === 1 ? "" : "s"}`
    default:
      return type
  }
}

/** Does the start node exist (and may the caller see it)? */
const exists = Effect.fnUntraced(function*(type: NodeType, id: string) {
  const sql = yield* ScopedSql
  if ((type === "session" || type === "decision") && !isUuid(id)) return false
  const rows = type === "agent"
    ? yield* sql`SELECT 1 FROM agents WHERE agent_id = ${id}`
    : type === "session"
    ? yield* sql`SELECT 1 FROM sessions WHERE session_id = ${id}::uuid`
    : type === "decision"
    ? yield* sql`SELECT 1 FROM decisions WHERE ledger_id = ${id}::uuid`
    : type === "subject"
    ? yield* sql`SELECT 1 FROM subjects WHERE subject_id = ${id}`
    : yield* sql`SELECT 1 FROM sources WHERE source_id = ${id}`
  return rows.length > 0
})

/** Labels of nodes, by type. */
const labelNodes = Effect.fnUntraced(function*(nodes: ReadonlyArray<{ type: NodeType; id: string; depth: number }>) {
  const sql = yield* ScopedSql
  const ids = (type: NodeType) => nodes.filter((n) => n.type === type).map((n) => n.id)
  const labels = new Map<string, string>()
  const put = (type: NodeType, rows: ReadonlyArray<{ id: string; label: string | null }>) => {
    for (const row of rows) labels.set(key(type, row.id), clip(row.label ?? row.id))
  }
  const agents = ids("agent")
  if (agents.length > 0) {
    put("agent", yield* sql<{ id: string; label: string | null }>`
      SELECT agent_id AS id, coalesce(agent_name, agent_id) AS label FROM agents WHERE agent_id = ANY(${agents}::text[])`)
  }
  // sessions and decisions are probed one primary key at a time: `id = ANY(ids)` next to the tenant policy made the
  // planner AND it with a bitmap of the workspace's rows (see the builder's store)
  const sessions = ids("session").filter((id) => isUuid(id))
  if (sessions.length > 0) {
    put("session", yield* sql<{ id: string; label: string | null }>`
      SELECT x.* FROM unnest(${sessions}::uuid[]) AS q(id) CROSS JOIN LATERAL (
        SELECT s.session_id::text AS id, nullif(s.summary, '') AS label FROM sessions s WHERE s.session_id = q.id LIMIT 1) x`)
  }
  const decisions = ids("decision").filter((id) => isUuid(id))
  if (decisions.length > 0) {
    put("decision", yield* sql<{ id: string; label: string | null }>`
      SELECT x.* FROM unnest(${decisions}::uuid[]) AS q(id) CROSS JOIN LATERAL (
        SELECT d.ledger_id::text AS id, d.title AS label FROM decisions d WHERE d.ledger_id = q.id LIMIT 1) x`)
  }
  const subjects = ids("subject")
  if (subjects.length > 0) {
    put("subject", yield* sql<{ id: string; label: string | null }>`
      SELECT subject_id AS id, kind || ' ' || label AS label FROM subjects WHERE subject_id = ANY(${subjects}::text[])`)
  }
  const sources = ids("source")
  if (sources.length > 0) {
    put("source", yield* sql<{ id: string; label: string | null }>`
      SELECT source_id AS id, kind || ' ' || label AS label FROM sources WHERE source_id = ANY(${sources}::text[])`)
  }
  return nodes.map((node): GraphNode => ({
    key: key(node.type, node.id),
    type: node.type,
    id: node.id,
    label: labels.get(key(node.type, node.id)) ?? node.id,
    depth: node.depth
  }))
})

/** The edges of `edgeTypes` whose two ends are both among `nodes`. */
const edgesAmong = Effect.fnUntraced(function*(nodes: ReadonlyArray<GraphNode>, edgeTypes: ReadonlyArray<EdgeType>) {
  const sql = yield* ScopedSql
  const keys = new Set(nodes.map((n) => n.key))
  const ids = (type: NodeType) => nodes.filter((n) => n.type === type).map((n) => n.id)
  const edges: Array<GraphEdge> = []
  const add = (type: EdgeType, source: string, target: string, weight: number) => {
    if (keys.has(source) && keys.has(target)) edges.push({ type, source, target, weight, label: edgeLabel(type, weight) })
  }
  const sessions = ids("session").filter((id) => isUuid(id))
  if (edgeTypes.includes("ran") && sessions.length > 0) {
    for (const row of yield* sql<{ agent_id: string; session_id: string; n: number }>`
      SELECT x.* FROM unnest(${sessions}::uuid[]) AS q(id) CROSS JOIN LATERAL (
        SELECT s.agent_id, s.session_id::text AS session_id, s.decision_count::int AS n FROM sessions s WHERE s.session_id = q.id LIMIT 1) x`) {
      add("ran", key("agent", row.agent_id), key("session", row.session_id), row.n)
    }
  }
  const decisions = ids("decision").filter((id) => isUuid(id))
  if (edgeTypes.includes("contains") && decisions.length > 0) {
    for (const row of yield* sql<{ ledger_id: string; session_id: string }>`
      SELECT x.* FROM unnest(${decisions}::uuid[]) AS q(id) CROSS JOIN LATERAL (
        SELECT d.ledger_id::text AS ledger_id, d.session_id::text AS session_id FROM decisions d WHERE d.ledger_id = q.id LIMIT 1) x`) {
      add("contains", key("session", row.session_id), key("decision", row.ledger_id), 1)
    }
  }
  if (edgeTypes.includes("shares_subject") && sessions.length > 1) {
    for (const row of yield* sql<{ a: string; b: string; n: number }>`
      SELECT a.session_id::text AS a, b.session_id::text AS b, count(*)::int AS n
      FROM session_subjects a
      JOIN subjects s ON s.tenant_id = a.tenant_id AND s.workspace_id = a.workspace_id AND s.subject_id = a.subject_id
      JOIN session_subjects b ON b.tenant_id = a.tenant_id AND b.workspace_id = a.workspace_id AND b.subject_id = a.subject_id
      WHERE a.session_id = ANY(${sessions}::uuid[]) AND b.session_id = ANY(${sessions}::uuid[]) AND a.session_id < b.session_id
        AND s.kind = ANY(${WORK_KINDS}::text[]) AND s.session_count <= ${MAX_SUBJECT_SESSIONS}
      GROUP BY a.session_id, b.session_id`) {
      add("shares_subject", key("session", row.a), key("session", row.b), row.n)
    }
  }
  const materialised = edgeTypes.filter((type) => type !== "ran" && type !== "contains")
  if (materialised.length > 0 && nodes.length > 0) {
    const rows = yield* sql<{ src_type: string; src_id: string; edge_type: EdgeType; dst_type: string; dst_id: string; weight: number }>`
      SELECT g.src_type, g.src_id, g.edge_type, g.dst_type, g.dst_id, g.weight
      FROM UNNEST(${nodes.map((n) => n.type)}::text[], ${nodes.map((n) => n.id)}::text[]) AS n(type, id)
      JOIN graph_edges g ON g.src_type = n.type AND g.src_id = n.id
      WHERE g.edge_type = ANY(${materialised}::text[])`
    for (const row of rows) {
      // a symmetric link is stored both ways; show it once
      if (SYMMETRIC.has(row.edge_type) && key(row.src_type, row.src_id) > key(row.dst_type, row.dst_id)) continue
      add(row.edge_type, key(row.src_type, row.src_id), key(row.dst_type, row.dst_id), row.weight)
    }
  }
  return edges
})

/** Breadth-first walk from a node; NotFound when the node does not exist or is not visible. */
export const traverse = Effect.fnUntraced(function*(traversal: Traversal) {
  const sql = yield* ScopedSql
  // a session merged into another starts the walk at the survivor
  const t = traversal.type === "session" && isUuid(traversal.id)
    ? { ...traversal, id: (yield* sql<{ id: string }>`SELECT ${currentSessionId(sql, traversal.id)}::text AS id`)[0]!.id }
    : traversal
  if (!(yield* exists(t.type, t.id))) {
    return yield* new NotFound({ message: `${traversal.type} ${traversal.id} not found` })
  }
  const out = t.direction !== "in"
  const inward = t.direction !== "out"
  const has = (type: EdgeType) => t.edgeTypes.includes(type)
  const materialised = t.edgeTypes.filter((type) => type !== "ran" && type !== "contains")
  // rows come out level by level, so the limit keeps the nearest nodes; a node met again deeper is dropped below.
  // `uid` carries session and decision ids as uuid: a condition casting the walk's text ids would not be leakproof,
  // and row-level security would then apply it after scanning the whole workspace instead of through an index.
  const start = t.type === "session" || t.type === "decision" ? t.id : null
  const rows = yield* sql<{ type: NodeType; id: string; depth: number }>`
    WITH RECURSIVE walk(type, id, uid, depth) AS (
      SELECT ${t.type}::text, ${t.id}::text, ${start}::uuid, 0
      UNION
      SELECT e.type, e.id, e.uid, w.depth + 1
      FROM walk w CROSS JOIN LATERAL (
        SELECT 'session'::text AS type, s.session_id::text AS id, s.session_id AS uid FROM sessions s
          WHERE ${has("ran") && out} AND w.type = 'agent' AND s.agent_id = w.id
        UNION ALL
        SELECT 'agent', s.agent_id, NULL::uuid FROM sessions s
          WHERE ${has("ran") && inward} AND w.type = 'session' AND s.session_id = w.uid
        UNION ALL
        SELECT 'decision', d.ledger_id::text, d.ledger_id FROM decisions d
          WHERE ${has("contains") && out} AND w.type = 'session' AND d.session_id = w.uid
        UNION ALL
        SELECT 'session', d.session_id::text, d.session_id FROM decisions d
          WHERE ${has("contains") && inward} AND w.type = 'decision' AND d.ledger_id = w.uid
        UNION ALL
        SELECT 'session', b.session_id::text, b.session_id FROM session_subjects a
          JOIN subjects s ON s.tenant_id = a.tenant_id AND s.workspace_id = a.workspace_id AND s.subject_id = a.subject_id
          JOIN session_subjects b ON b.tenant_id = a.tenant_id AND b.workspace_id = a.workspace_id
            AND b.subject_id = a.subject_id AND b.session_id <> a.session_id
          WHERE ${has("shares_subject")} AND w.type = 'session' AND a.session_id = w.uid
            AND s.kind = ANY(${WORK_KINDS}::text[]) AND s.session_count <= ${MAX_SUBJECT_SESSIONS}
        UNION ALL
        SELECT g.dst_type, g.dst_id, NULL::uuid FROM graph_edges g
          WHERE ${out} AND g.src_type = w.type AND g.src_id = w.id AND g.edge_type = ANY(${materialised}::text[])
        UNION ALL
        SELECT g.src_type, g.src_id, CASE WHEN g.src_type = 'decision' THEN g.src_id::uuid END FROM graph_edges g
          WHERE ${inward} AND g.dst_type = w.type AND g.dst_id = w.id AND g.edge_type = ANY(${materialised}::text[])
      ) e
      WHERE w.depth < ${t.depth}
    )
    SELECT type, id, depth FROM walk LIMIT ${t.limit * 4 + 1}`
  const nearest = new Map<string, { type: NodeType; id: string; depth: number }>()
  for (const row of rows) {
    const k = key(row.type, row.id)
    if (!nearest.has(k)) nearest.set(k, row)
  }
  const kept = [...nearest.values()].slice(0, t.limit)
  const truncated = nearest.size > t.limit || rows.length > t.limit * 4
  const nodes = yield* labelNodes(kept)
  return {
    mode: "traverse",
    start: key(t.type, t.id),
    edge_types: t.edgeTypes,
    direction: t.direction,
    depth: t.depth,
    nodes,
    edges: yield* edgesAmong(nodes, t.edgeTypes),
    truncated
  } satisfies GraphResult
})

const NETWORK_TYPES: ReadonlyArray<EdgeType> = ["handed_off_to", "shares_subject", "shares_execution"]

/** Agents and how they are linked: hand-offs, shared executions, shared subjects (links ≥ minWeight). */
export const agentNetwork = Effect.fnUntraced(function*(options: { readonly limit: number; readonly minWeight: number; readonly edgeTypes: ReadonlyArray<EdgeType> }) {
  const sql = yield* ScopedSql
  const types = options.edgeTypes.filter((type) => NETWORK_TYPES.includes(type))
  const links = types.length === 0 ? [] : yield* sql<{ src_id: string; edge_type: EdgeType; dst_id: string; weight: number }>`
    SELECT src_id, edge_type, dst_id, weight FROM graph_edges
    WHERE src_type = 'agent' AND dst_type = 'agent' AND edge_type = ANY(${types}::text[]) AND weight >= ${options.minWeight}
    ORDER BY weight DESC, src_id, dst_id LIMIT 5000`
  const linked = new Set(links.flatMap((l) => [l.src_id, l.dst_id]))
  // linked agents first, then the busiest others
  const agents = yield* sql<{ agent_id: string }>`
    SELECT agent_id FROM agents ORDER BY (agent_id = ANY(${[...linked]}::text[])) DESC, decision_count DESC, agent_id
    LIMIT ${options.limit}`
  const nodes = yield* labelNodes(agents.map((a) => ({ type: "agent" as const, id: a.agent_id, depth: 0 })))
  const keys = new Set(nodes.map((n) => n.key))
  const edges = links.flatMap((l): Array<GraphEdge> => {
    const source = key("agent", l.src_id)
    const target = key("agent", l.dst_id)
    if (!keys.has(source) || !keys.has(target)) return []
    if (SYMMETRIC.has(l.edge_type) && source > target) return []
    return [{ type: l.edge_type, source, target, weight: l.weight, label: edgeLabel(l.edge_type, l.weight) }]
  })
  return {
    mode: "agent_network",
    start: null,
    edge_types: types,
    direction: "both",
    depth: 1,
    nodes,
    edges,
    truncated: linked.size > nodes.length
  } satisfies GraphResult
})
