import { run } from "./sql.ts"

/**
 * Each session keeps its first decision (by time, then id) — the one its summary opens with — beside its rollup. The
 * builder read it with every batch as a probe of the decisions per session, into every monthly partition (planning
 * and running it was ~1.5 ms a batch on two partitions, and grew with each month); now it writes it with the rollup,
 * under the agent's lock like the rest of the rollup. Erasure blanks the title when it erases that decision.
 *
 * The backfill probes each session's first decision by the session index. The owner reads both tables whole for it
 * (row-level security is forced on them for the runtime roles), then forces it again.
 */
export const sessionFirst = run([
  `ALTER TABLE sessions ADD COLUMN first_ledger_id uuid, ADD COLUMN first_at timestamptz, ADD COLUMN first_title text`,
  `ALTER TABLE sessions NO FORCE ROW LEVEL SECURITY`,
  `ALTER TABLE decisions NO FORCE ROW LEVEL SECURITY`,
  `UPDATE sessions s SET first_ledger_id = f.ledger_id, first_at = f.created_at, first_title = f.title
    FROM sessions k CROSS JOIN LATERAL (
      SELECT d.ledger_id, d.created_at, d.title FROM decisions d
      WHERE d.tenant_id = k.tenant_id AND d.workspace_id = k.workspace_id AND d.session_id = k.session_id
      ORDER BY d.created_at, d.ledger_id LIMIT 1) f
    WHERE s.session_id = k.session_id`,
  `ALTER TABLE decisions FORCE ROW LEVEL SECURITY`,
  `ALTER TABLE sessions FORCE ROW LEVEL SECURITY`
])
