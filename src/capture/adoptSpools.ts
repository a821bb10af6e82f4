/**
 * Spools left by gateway workers that no longer run (`--gateway-workers` lowered, e.g. 4 → 2) or by capture stream
 * shards no longer published to (LEDGER_CAPTURE_SHARDS lowered): worker `i` of `count` takes over, when it starts, the
 * spool directories of workers `j >= count` with `j mod count = i`, and its own of shards `s >= shards`; shard `s`'s
 * go to its shard `s mod shards`. Nothing they held is lost; a capture may reach the builders through another shard
 * than its agent's, which costs only parallelism (every builder locks the agents it writes).
 *
 * A spool directory holds two things, and both move into the adopting worker's spool under their batch ids:
 * - what was never published (or whose publish failed): replayed like any spooled batch;
 * - what was published and not yet committed by the builders (the retention): published again under its id, so the
 *   stream appends it only if it lost it (BatchId), and the builders drop what they had built (`ledger_id`).
 * The adopter's spool is flushed to disk before the old directory is removed: a crash in between leaves both, and
 * the next start adopts the old one again — duplicates at worst, never a loss.
 */
import * as Fs from "node:fs"
import { PublishedRetention } from "./PublishedRetention.ts"
import { Spool, type SpoolLimits, spoolDirs } from "./Spool.ts"

/** A spool directory to take over, and the shard of the adopting worker that takes it. */
export interface OrphanSpool {
  readonly dir: string
  readonly shard: number
}

/** The spool directories worker `index` of `count`, publishing to `shards` shards, takes over. */
export const orphanSpoolDirs = (dataDir: string, index: number, count: number, shards = 1): ReadonlyArray<OrphanSpool> =>
  spoolDirs(dataDir)
    .filter(({ shard, worker }) => (worker >= count || shard >= shards) && worker % count === index)
    .map(({ dir, shard }) => ({ dir, shard: shard % shards }))

/** Moves what `dir` holds into `into` and removes `dir`; returns the captures moved. */
export const adoptSpool = (dir: string, into: Spool, limits: SpoolLimits): number => {
  let moved = 0
  // no size bound: everything kept there is read back (the bound applied when it was written)
  const retention = PublishedRetention.open(dir, Number.MAX_SAFE_INTEGER)
  for (const { batch, payloads } of retention.takeAll()) {
    into.appendPublished(batch, payloads)
    moved += payloads.length
  }
  retention.close()
  const spool = Spool.open(dir, limits)
  for (let batch = spool.read(); batch !== undefined; batch = spool.read()) {
    into.appendPublished(batch.batch, batch.payloads)
    spool.commit(batch.end, batch.payloads.length)
    moved += batch.payloads.length
  }
  spool.close()
  into.sync()
  Fs.rmSync(dir, { recursive: true, force: true })
  return moved
}
