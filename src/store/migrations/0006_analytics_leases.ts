import { run } from "./sql.ts"

/**
 * Analytics leases: each workspace's analytics (materialiser and detectors) runs in one builder process at a time.
 * Without one, every builder process read and analysed the same batches and all but one found them done.
 */
export const analyticsLeases = run([
  `ALTER TABLE analytics_progress ADD COLUMN lease_owner uuid`,
  `ALTER TABLE analytics_progress ADD COLUMN lease_until timestamptz`
])
