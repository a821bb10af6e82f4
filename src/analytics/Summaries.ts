/**
 * Session summaries (written into `sessions.summary`): deterministic by default — what the agent worked on, what it
 * concluded, its outcome mix and cost — and written by LEDGER_SUMMARY_MODEL when one is configured, from the same
 * facts, falling back to the deterministic text when the model call fails.
 */
import { Effect, Option } from "effect"
import { collapseWhitespace, truncate } from "../derive/text.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { ModelCalls } from "./ModelCalls.ts"

export interface SessionFacts {
  readonly session_id: string
  readonly decision_count: number
  readonly total_cost_usd: number
  readonly started_at: Date
  readonly ended_at: Date
  readonly outcomes: Readonly<Record<string, number>>
  readonly first_title: string
  /** the newest decision's findings; "" when it states none */
  readonly conclusion: string
  /** the newest decision's title */
  readonly last_title: string
  /** most mentioned work subjects, labels */
  readonly subjects: ReadonlyArray<string>
}

const TITLE_CHARS = 100
const CONCLUSION_CHARS = 160
/** a model summary is rewritten once the session has grown by this many decisions */
const MODEL_SUMMARY_EVERY = 10

const span = (ms: number): string => {
  const minutes = Math.round(ms / 60_000)
  if (minutes < 1) return "under a minute"
  if (minutes < 60) return `${minutes} min`
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`
}

/** Outcomes, most frequent first, ties by name: `5 success, 1 error`. */
const outcomeMix = (outcomes: Readonly<Record<string, number>>): string =>
  Object.entries(outcomes).sort(([a, x], [b, y]) => y - x || a.localeCompare(b)).map(([outcome, n]) => `${n} ${outcome}`).join(", ")

export const deterministicSummary = (facts: SessionFacts): string => {
  const about = facts.subjects.length > 0 ? `Worked on ${facts.subjects.join(", ")}: ` : ""
  const opened = truncate(collapseWhitespace(facts.first_title), TITLE_CHARS)
  const concluded = truncate(collapseWhitespace(facts.conclusion), CONCLUSION_CHARS)
  const last = collapseWhitespace(facts.last_title)
  // what it ended with: its conclusions, else its last ask when that is not the one it opened with
  const ending = concluded !== ""
    ? ` — concluded: ${concluded}`
    : last !== "" && last !== collapseWhitespace(facts.first_title)
    ? ` — last: ${truncate(last, TITLE_CHARS)}`
    : ""
  const figures = `${facts.decision_count} decision${facts.decision_count === 1 ? "" : "s"} (${outcomeMix(facts.outcomes)}), ` +
    `$${facts.total_cost_usd.toFixed(4)}, ${span(facts.ended_at.getTime() - facts.started_at.getTime())}`
  return `${about}${opened}${ending} (${figures})`
}

const MODEL_INSTRUCTION =
  "You summarise one AI agent session for an audit log. In at most two sentences say what the agent worked on and " +
  "what it concluded. Use only the facts given; no preamble."

export interface SummaryState {
  readonly facts: SessionFacts
  /** decisions the session had when a model last summarised it; null when it never did */
  readonly modelSummarizedAt: number | null
}

/**
 * Reads the facts of sessions and writes their deterministic summaries — except, when `keepModelSummaries`, over a
 * summary the model wrote (it is refreshed by `modelSummaries` instead). Yields each session's state.
 */
export const writeDeterministicSummaries = Effect.fnUntraced(function*(sessionIds: ReadonlyArray<string>, keepModelSummaries: boolean) {
  if (sessionIds.length === 0) return []
  const sql = yield* ScopedSql
  const rows = yield* sql<{
    session_id: string
    decision_count: number
    total_cost_usd: number
    started_at: Date
    ended_at: Date
    outcomes: Record<string, number> | null
    first_title: string | null
    last_title: string | null
    last_findings: Array<{ text?: string }> | null
    subjects: Array<string> | null
    model_summarized: number | null
  }>`SELECT s.session_id::text AS session_id, s.decision_count::int AS decision_count, s.total_cost_usd,
      s.started_at, s.ended_at,
      (SELECT jsonb_object_agg(o.outcome, o.n) FROM (SELECT outcome, count(*)::int AS n FROM decisions
        WHERE session_id = s.session_id GROUP BY outcome) o) AS outcomes,
      s.first_title,
      l.title AS last_title, l.derivation->'findings' AS last_findings,
      (SELECT array_agg(x.label ORDER BY x.n DESC, x.label) FROM (SELECT sj.label, ss.decision_count AS n
        FROM session_subjects ss JOIN subjects sj ON sj.tenant_id = ss.tenant_id AND sj.workspace_id = ss.workspace_id
          AND sj.subject_id = ss.subject_id
        WHERE ss.tenant_id = s.tenant_id AND ss.workspace_id = s.workspace_id AND ss.session_id = s.session_id
          AND sj.kind <> 'tool' ORDER BY ss.decision_count DESC, sj.label LIMIT 3) x) AS subjects,
      (SELECT a.summarized_decisions::int FROM analytics_sessions a WHERE a.tenant_id = s.tenant_id
        AND a.workspace_id = s.workspace_id AND a.session_id = s.session_id AND a.summary_source LIKE 'model:%') AS model_summarized
    FROM sessions s
    LEFT JOIN LATERAL (SELECT title, derivation FROM decisions WHERE session_id = s.session_id
      ORDER BY created_at DESC, ledger_id DESC LIMIT 1) l ON true
    WHERE s.session_id = ANY(${sessionIds}::uuid[])`
  const states = rows.map((row): SummaryState => {
    const findings = (row.last_findings ?? []).flatMap((finding) => typeof finding?.text === "string" ? [finding.text] : [])
    const facts: SessionFacts = {
      session_id: row.session_id,
      decision_count: row.decision_count,
      total_cost_usd: row.total_cost_usd,
      started_at: row.started_at,
      ended_at: row.ended_at,
      outcomes: row.outcomes ?? {},
      first_title: row.first_title ?? "",
      conclusion: findings.slice(0, 2).join(" "),
      last_title: row.last_title ?? "",
      subjects: row.subjects ?? []
    }
    return { facts, modelSummarizedAt: row.model_summarized }
  })
  const rewritten = states.filter((state) => !keepModelSummaries || state.modelSummarizedAt === null).map((state) => state.facts)
  if (rewritten.length > 0) {
    yield* sql`UPDATE sessions s SET summary = t.summary, summary_by_analytics = true
      FROM UNNEST(${rewritten.map((f) => f.session_id)}::uuid[], ${rewritten.map(deterministicSummary)}::text[]) AS t(session_id, summary)
      WHERE s.session_id = t.session_id`
  }
  return states
})

/**
 * With a summary model: sessions whose model summary is missing or ${MODEL_SUMMARY_EVERY}+ decisions old get one
 * (the model call runs outside any transaction; the caller writes the result). Without one: nothing.
 */
export const modelSummaries = Effect.fnUntraced(function*(states: ReadonlyArray<SummaryState>) {
  const models = yield* ModelCalls
  if (Option.isNone(models.summaryModel)) return []
  const due = states.filter((state) =>
    state.modelSummarizedAt === null || state.facts.decision_count - state.modelSummarizedAt >= MODEL_SUMMARY_EVERY
  ).map((state) => state.facts)
  const written: Array<{ session_id: string; summary: string; decisions: number }> = []
  for (const f of due) {
    const input = [
      `Opened with: ${f.first_title}`,
      `Subjects: ${f.subjects.join(", ") || "none detected"}`,
      `Last conclusion: ${f.conclusion || f.last_title}`,
      `Decisions: ${f.decision_count} (${outcomeMix(f.outcomes)}), cost $${f.total_cost_usd.toFixed(4)}, ` +
      `span ${span(f.ended_at.getTime() - f.started_at.getTime())}`
    ].join("\n")
    const summary = yield* models.summarize(MODEL_INSTRUCTION, input).pipe(
      Effect.tapError((error) => Effect.logWarning("model summary failed; keeping the deterministic one", { error: error.message })),
      Effect.option
    )
    if (Option.isSome(summary)) {
      written.push({ session_id: f.session_id, summary: truncate(collapseWhitespace(summary.value), 600), decisions: f.decision_count })
    }
  }
  return written
})

/** Stores model summaries (and who wrote them) after the model answered. */
export const writeModelSummaries = Effect.fnUntraced(function*(model: string, written: ReadonlyArray<{ session_id: string; summary: string; decisions: number }>) {
  if (written.length === 0) return
  const sql = yield* ScopedSql
  const ids = written.map((w) => w.session_id)
  yield* sql`UPDATE sessions s SET summary = t.summary, summary_by_analytics = true
    FROM UNNEST(${ids}::uuid[], ${written.map((w) => w.summary)}::text[]) AS t(session_id, summary)
    WHERE s.session_id = t.session_id`
  yield* sql`UPDATE analytics_sessions a SET summary_source = ${`model:${model}`}, summarized_decisions = t.n, summarized_at = now()
    FROM UNNEST(${ids}::uuid[], ${written.map((w) => w.decisions)}::int[]) AS t(session_id, n)
    WHERE a.session_id = t.session_id`
})
