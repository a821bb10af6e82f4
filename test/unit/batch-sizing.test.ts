/**
 * How the builder sizes its batches by their captures' size (LEDGER_BUILDER_BATCH_SIZE, LEDGER_BUILDER_BATCH_MB): the
 * count it reads next, and the transactions a batch read is cut into.
 */
import { assert, describe, it } from "@effect/vitest"
import { byPayloadBytes, nextBatchCount } from "../../src/builder/batchSizing.ts"
import type { StreamEntry } from "../../src/capture/CaptureStream.ts"

const entry = (id: string, chars: number) => ({ id, payload: "x".repeat(chars), deliveries: 1 }) as StreamEntry
const pending = (id: string, chars: number) => ({ entry: entry(id, chars) })
const ids = (parts: ReadonlyArray<ReadonlyArray<{ readonly entry: StreamEntry }>>) => parts.map((part) => part.map((item) => item.entry.id))

describe("builder batch sizing", () => {
  it("cuts a batch into consecutive parts within the budget; a capture larger than it goes alone", () => {
    const items = [pending("a", 40), pending("b", 40), pending("c", 30), pending("d", 250), pending("e", 10), pending("f", 90), pending("g", 5)]
    assert.deepStrictEqual(ids(byPayloadBytes(items, 100)), [["a", "b"], ["c"], ["d"], ["e", "f"], ["g"]])
    assert.deepStrictEqual(ids(byPayloadBytes(items, 10_000)), [["a", "b", "c", "d", "e", "f", "g"]])
    assert.deepStrictEqual(byPayloadBytes([], 100), [])
  })

  it("reads as many captures as the budget holds at the last read's mean size, within the batch size", () => {
    const settings = { builderBatchSize: 2_000, builderBatchBytes: 32 * 1024 * 1024 }
    // small captures: the batch size
    assert.strictEqual(nextBatchCount([entry("a", 1_500), entry("b", 1_700)], 2_000, settings), 2_000)
    // 100 KiB captures: 327 in 32 MiB
    assert.strictEqual(nextBatchCount([entry("a", 100 * 1024), entry("b", 100 * 1024)], 2_000, settings), 327)
    // one capture larger than the budget: one at a time
    assert.strictEqual(nextBatchCount([entry("a", 40 * 1024 * 1024)], 327, settings), 1)
    // an empty read keeps the count; small captures again bring it back up
    assert.strictEqual(nextBatchCount([], 327, settings), 327)
    assert.strictEqual(nextBatchCount([entry("a", 2_000)], 1, settings), 2_000)
  })
})
