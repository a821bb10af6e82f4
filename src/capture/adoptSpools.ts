/**
 * Spools left by gateway workers that no longer run (`--gateway-workers` lowered, e.g. 4 → 2): worker `i` of `count`
 * takes over the spool directories of workers `j >= count` with `j mod count = i` when it starts, so nothing they
 * held is lost.
 *
 * A spool directory holds two things, and both move into the adopting worker's spool under their batch ids:
 * - what was never published (or whose publish failed): replayed like any spooled batch;
 * - what was published and not yet committed by the builders (the retention): published again under its id, so the
 *   stream appends it only if it lost it (BatchId), and the builders drop what they had built (`ledger_id`).
 * The adopter's spool is flushed to disk before the old directory is removed: a crash in between leaves both, and
 * the next start adopts the old one again — duplicates at worst, never a loss.
 */
import * as Fs from "node:fs"
import { Retention } from "./Retention.ts"
import { Spool, type SpoolLimits, workerSpoolDirs } from "./Spool.ts"

/** The spool directories worker `index` of `count` takes over. */
export const orphanSpoolDirs = (dataDir: string, index: number, count: number): ReadonlyArray<string> =>
  [...workerSpoolDirs(dataDir)].filter(([worker]) => worker >= count && worker % count === index).map(([, dir]) => dir)

/** Moves what `dir` holds into `into` and removes `dir`; returns the captures moved. */
export const adoptSpool = (dir: string, into: Spool, limits: SpoolLimits): number => {
  let moved = 0
  // no size bound: everything kept there is read back (the bound applied when it was written)
  const retention = Retention.open(dir, Number.MAX_SAFE_INTEGER)
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
