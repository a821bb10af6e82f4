/**
 * Long stretches of a batch's work hand the event loop back now and then. A batch's decoding and derivation are tens
 * of milliseconds of CPU; run in one go, they held up the transaction of another consumer of the same process, which
 * holds its agents' locks meanwhile, so every consumer waited longer for them (bench/notes/ingest.md, "Shorter
 * critical sections": lock waits 103 → 63 µs a decision, drain +15 %).
 */
import { Effect } from "effect"

/** Items between yields: ~1–2 ms of derivation, against ~5 µs a yield costs. */
const YIELD_EVERY = 20

/** Yields to the event loop after every YIELD_EVERY items of a loop (`index` counts from 0). */
export const yieldEvery = (index: number): Effect.Effect<void> =>
  index % YIELD_EVERY === YIELD_EVERY - 1 ? Effect.yieldNow : Effect.void
