/**
 * Session assignment, as pure planning over one agent's calls and the sessions already stored.
 *
 * - A call with an `execution_id` belongs to the one session of that execution (per tenant, workspace and agent).
 * - A call that continues another (a `previous_response_id` chain) belongs to that call's session.
 * - Other calls are grouped by inactivity: two calls are in the same session when the gap between them (end of
 *   one to start of the other) is at most the configured gap, transitively. A session spans [first start, last
 *   end] of its calls, so a call joins every stored session it comes within the gap of — extending one, or
 *   merging several when it bridges them (a late capture landing between two sessions).
 *
 * Sessions are therefore the connected components of the calls under "within the gap", which do not depend on the
 * order captures arrive in: late, out-of-order and redelivered captures end up where in-order ones would have.
 * The caller holds the agent's lock while it plans and writes, so nothing else changes these sessions meanwhile.
 */
import type { SessionRollup } from "../domain/sessionSummary.ts"

export interface PlannedCall {
  readonly ledger_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  /** epoch ms */
  readonly start: number
  readonly end: number
  /** the call this one continues, of the same agent: a stored decision's session, or a call planned with this one */
  readonly follows?: { readonly session_id: string } | { readonly ledger_id: string } | undefined
}

/** A stored session the batch's calls may touch. */
export interface KnownSession {
  readonly session_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly start: number
  readonly end: number
}

export interface SessionPlan {
  /** ledger_id → session_id */
  readonly assignment: ReadonlyMap<string, string>
  /** new sessions: id → agent and execution */
  readonly created: ReadonlyMap<string, { readonly agent_id: string; readonly execution_id: string | null }>
  /** stored sessions folded into another (their decisions move to it, then they are deleted) */
  readonly merged: ReadonlyMap<string, string>
}

interface Span {
  readonly id: string
  /** already in the database: preferred as the survivor of a merge, so ids clients have seen keep working */
  readonly stored: boolean
  start: number
  end: number
}

const touches = (span: Span, call: PlannedCall, gapMs: number) => call.start <= span.end + gapMs && call.end >= span.start - gapMs

/** The survivor of a merge: a stored session before a new one, then the earliest, then by id. */
const survives = (a: Span, b: Span) =>
  a.stored !== b.stored ? a.stored : a.start < b.start || (a.start === b.start && a.id < b.id)

export const planSessions = (
  calls: ReadonlyArray<PlannedCall>,
  known: ReadonlyArray<KnownSession>,
  options: { readonly gapMs: number; readonly newId: () => string }
): SessionPlan => {
  const assignment = new Map<string, string>()
  const created = new Map<string, { agent_id: string; execution_id: string | null }>()
  /** every session folded into another, stored or new: id → the one it went into */
  const foldedInto = new Map<string, string>()
  const executions = new Map<string, string>()
  const spansByAgent = new Map<string, Array<Span>>()
  const executionKey = (agent: string, execution: string) => `${agent}\u0000${execution}`

  for (const session of known) {
    if (session.execution_id !== null) {
      executions.set(executionKey(session.agent_id, session.execution_id), session.session_id)
    } else {
      const spans = spansByAgent.get(session.agent_id) ?? []
      spans.push({ id: session.session_id, stored: true, start: session.start, end: session.end })
      spansByAgent.set(session.agent_id, spans)
    }
  }

  const ordered = [...calls].sort((a, b) => a.start - b.start || (a.ledger_id < b.ledger_id ? -1 : a.ledger_id > b.ledger_id ? 1 : 0))
  for (const call of ordered) {
    if (call.execution_id !== null) {
      const key = executionKey(call.agent_id, call.execution_id)
      let id = executions.get(key)
      if (id === undefined) {
        id = options.newId()
        executions.set(key, id)
        created.set(id, { agent_id: call.agent_id, execution_id: call.execution_id })
      }
      assignment.set(call.ledger_id, id)
      continue
    }
    const spans = spansByAgent.get(call.agent_id) ?? []
    spansByAgent.set(call.agent_id, spans)
    const followed = call.follows === undefined
      ? undefined
      : "session_id" in call.follows
      ? call.follows.session_id
      : assignment.get(call.follows.ledger_id)
    if (followed !== undefined) {
      // the predecessor's session, followed through any merge so far; a gap session's span grows to the call
      let id = followed
      for (let next = foldedInto.get(id); next !== undefined; next = foldedInto.get(id)) id = next
      const span = spans.find((candidate) => candidate.id === id)
      if (span !== undefined) {
        span.start = Math.min(span.start, call.start)
        span.end = Math.max(span.end, call.end)
      }
      assignment.set(call.ledger_id, id)
      continue
    }
    const reached = spans.filter((span) => touches(span, call, options.gapMs))
    if (reached.length === 0) {
      const span = { id: options.newId(), stored: false, start: call.start, end: call.end }
      spans.push(span)
      created.set(span.id, { agent_id: call.agent_id, execution_id: null })
      assignment.set(call.ledger_id, span.id)
      continue
    }
    const keep = reached.reduce((a, b) => (survives(b, a) ? b : a))
    for (const span of reached) {
      if (span === keep) continue
      keep.start = Math.min(keep.start, span.start)
      keep.end = Math.max(keep.end, span.end)
      foldedInto.set(span.id, keep.id)
      spans.splice(spans.indexOf(span), 1)
    }
    keep.start = Math.min(keep.start, call.start)
    keep.end = Math.max(keep.end, call.end)
    assignment.set(call.ledger_id, keep.id)
  }

  /** Follows folds to the session that survived. */
  const surviving = (id: string): string => {
    let current = id
    for (let next = foldedInto.get(current); next !== undefined; next = foldedInto.get(current)) current = next
    return current
  }
  const merged = new Map<string, string>()
  for (const id of foldedInto.keys()) {
    if (created.has(id)) created.delete(id)
    else merged.set(id, surviving(id))
  }
  for (const [ledgerId, id] of assignment) assignment.set(ledgerId, surviving(id))
  return { assignment, created, merged }
}

/** The earlier of two first decisions, by time then id (the order `ledger rebuild` uses in SQL). */
export const earlierFirst = (a: SessionRollup["first"], b: SessionRollup["first"]): SessionRollup["first"] =>
  a.at < b.at || (a.at === b.at && a.ledger_id <= b.ledger_id) ? a : b
