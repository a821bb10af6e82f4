import { run } from "./sql.ts"

/**
 * The planner gets no statistics of the search rows' vectors. No statement filters, joins or groups by them (nearest
 * neighbours order by a distance, which no statistics estimate), yet ANALYZE computed element frequencies over the
 * 256 floats of every sampled row: 420–580 ms of the 30,000-row sample's ANALYZE, 160 ms without them — a cost the
 * builders' planner statistics pay every ten seconds while analytics catches up (bench/notes/analytics.md,
 * "Analytics catch-up").
 */
export const searchStatistics = run([
  `ALTER TABLE decision_search ALTER COLUMN local_vector SET STATISTICS 0, ALTER COLUMN embedding SET STATISTICS 0`
])
