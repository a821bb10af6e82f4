/**
 * How big a builder's batches are (docs/ARCHITECTURE.md, step 4): up to LEDGER_BUILDER_BATCH_SIZE captures — large
 * batches cost less a decision (bench/notes/ingest.md, "Batch size") — and no more payload than LEDGER_BUILDER_BATCH_MB
 * in memory at once or in one transaction.
 */
import type { StreamEntry } from "../capture/CaptureStream.ts"

/** All the sizing needs of an item: its stream entry. */
interface Sized {
  readonly entry: StreamEntry
}

/**
 * A batch cut into consecutive parts of at most `budget` payload characters (a capture larger than that is a part of
 * its own): one transaction's statements carry each part, so a batch of large captures does not make one of hundreds
 * of megabytes.
 */
export const byPayloadBytes = <A extends Sized>(items: ReadonlyArray<A>, budget: number): Array<ReadonlyArray<A>> => {
  const parts: Array<Array<A>> = []
  let part: Array<A> = []
  let size = 0
  for (const item of items) {
    const bytes = item.entry.payload.length
    if (part.length > 0 && size + bytes > budget) {
      parts.push(part)
      part = []
      size = 0
    }
    part.push(item)
    size += bytes
  }
  if (part.length > 0) parts.push(part)
  return parts
}

/**
 * How many captures to read next: `builderBatchSize`, or fewer after a read of large captures — as many as
 * `builderBatchBytes` holds at their mean size — so that a batch of large captures is not read (and read ahead) whole
 * into memory. An empty read keeps the last count.
 */
export const nextBatchCount = (
  entries: ReadonlyArray<StreamEntry>,
  last: number,
  settings: { readonly builderBatchSize: number; readonly builderBatchBytes: number }
): number => {
  if (entries.length === 0) return last
  let chars = 0
  for (const entry of entries) chars += entry.payload.length
  return Math.max(1, Math.min(settings.builderBatchSize, Math.floor(settings.builderBatchBytes / (chars / entries.length))))
}

/** Why a capture is dead-lettered rather than built: more payload than one batch may carry. */
export const tooLargeForABatch = (chars: number, budget: number) =>
  `the capture is ${(chars / 1024 / 1024).toFixed(1)} MB, more than one batch carries ` +
  `(LEDGER_BUILDER_BATCH_MB=${Math.round(budget / 1024 / 1024)}): it would hold a transaction for as long as it takes`
