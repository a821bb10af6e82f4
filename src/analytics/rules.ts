/**
 * The rules analytics applies, as constants with their wording: every payload that depends on a rule states it,
 * so a person can check a feature's status or a link between sessions against the figures shown beside it.
 */

/** Subjects that identify a piece of work; tools and plain URLs are shared by unrelated work. */
export const WORK_SUBJECT_KINDS = ["ticket", "issue", "file", "service", "table", "function", "topic"] as const
/** One shared ticket or issue is enough to say two sessions work on the same thing. */
export const STRONG_SUBJECT_KINDS = ["ticket", "issue"] as const
/** Other work subjects must coincide at least this often. */
export const MIN_SHARED_WEAK_SUBJECTS = 2
/** A subject mentioned in more sessions than this is background (a monorepo's index.ts), not a work item. */
export const MAX_SUBJECT_SESSIONS = 25
/**
 * A feature is grown to at most this many sessions per recomputation — a bound on one transaction's work; a
 * "unit of work" that links more sessions than this is a theme, and is left as the bound found it.
 */
export const MAX_FEATURE_SESSIONS = 500

export const LINKING_RULE =
  `Two sessions belong to the same feature when they share a ticket or issue, or at least ${MIN_SHARED_WEAK_SUBJECTS} other ` +
  `work subjects (files, services, tables, functions, topics); subjects seen in more than ${MAX_SUBJECT_SESSIONS} sessions ` +
  `are too common to link work. A feature is a connected group of at least 2 such sessions (grown to at most ` +
  `${MAX_FEATURE_SESSIONS} sessions at a time).`

/** Outcomes that count as work done. */
export const SUCCESS_OUTCOMES = ["success", "tool_call"] as const

/** Without activity for this long, a feature is done one way or the other. */
export const FEATURE_QUIET_HOURS = 24

export const STATUS_RULE =
  `in_progress: activity in the ${FEATURE_QUIET_HOURS} h before as_of; delivered: no activity for ${FEATURE_QUIET_HOURS} h and ` +
  `the newest decision succeeded (success or tool_call); stalled: no activity for ${FEATURE_QUIET_HOURS} h and the newest ` +
  `decision did not succeed.`

/** Merge suggestions: the weight of each signal, the score to reach, and the signal one of which must be strong. */
export const MERGE_WEIGHTS = { subject_overlap: 0.35, text_similarity: 0.35, shared_agents: 0.15, time_proximity: 0.15 } as const
export const MERGE_MIN_SCORE = 0.5
export const MERGE_MIN_SUBJECT_OVERLAP = 0.2
export const MERGE_MIN_TEXT_SIMILARITY = 0.5
/** Features further apart in time than this get no time signal. */
export const MERGE_TIME_HORIZON_HOURS = 72

export const MERGE_RULE =
  `score = ${MERGE_WEIGHTS.subject_overlap}×subject_overlap (Jaccard of subject-name tokens) + ` +
  `${MERGE_WEIGHTS.text_similarity}×text_similarity (cosine of the features' decision vectors) + ` +
  `${MERGE_WEIGHTS.shared_agents}×shared_agents (Jaccard) + ${MERGE_WEIGHTS.time_proximity}×time_proximity ` +
  `(1 when their spans overlap, falling to 0 at ${MERGE_TIME_HORIZON_HOURS} h apart); suggested when score ≥ ${MERGE_MIN_SCORE} ` +
  `and subject_overlap ≥ ${MERGE_MIN_SUBJECT_OVERLAP} or text_similarity ≥ ${MERGE_MIN_TEXT_SIMILARITY}.`
