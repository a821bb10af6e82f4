import { run } from "./sql.ts"

/**
 * Each session keeps its first decision (by time, then id) — the one its summary opens with — beside its rollup. The
 * builder read it with every batch as a probe of the decisions per session, into every monthly partition (planning
 * and running it was ~1.5 ms a batch on two partitions, and grew with each month); now it writes it with the rollup,
 * under the agent's lock like the rest of the rollup. Erasure blanks the title when it erases that decision.
 */
export const sessionFirst = run([
  `ALTER TABLE sessions ADD COLUMN first_ledger_id uuid, ADD COLUMN first_at timestamptz, ADD COLUMN first_title text`,
  `UPDATE sessions s SET first_ledger_id = f.ledger_id, first_at = f.created_at, first_title = f.title
    FROM (SELECT DISTINCT ON (session_id) session_id, ledger_id, created_at, title FROM decisions
      ORDER BY session_id, created_at, ledger_id) f
    WHERE f.session_id = s.session_id`
])
