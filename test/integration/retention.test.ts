/**
 * The capture retention on a real file: batches kept in publish order and dropped as the committed frontier passes
 * them, read back whole, bounded, surviving a reopen (a gateway restart), and a batch cut short by a crash dropped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import { batchIds } from "../../src/capture/CaptureStream.ts"
import { Retention } from "../../src/capture/Retention.ts"
import { spoolDir } from "../../src/capture/Spool.ts"
import { tempDir } from "../support/stack.ts"

const capture = (n: number, size = 20) => JSON.stringify({ n, pad: "x".repeat(size) })
const MB = 1024 * 1024

describe("Retention", () => {
  it.effect("keeps batches until the frontier passes their newest entry; reads them back whole; empties its file", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = Retention.open(dir, MB)
      const next = batchIds()
      const [a, b, c] = [next(), next(), next()]
      retention.add(a, "100-0", [capture(1), capture(2)])
      retention.add(b, "100-5", [capture(3)])
      retention.add(c, "205-1", [capture(4), capture(5), capture(6)])
      assert.deepStrictEqual({ ...retention.stats, bytes: retention.stats.bytes > 0 }, { batches: 3, entries: 6, bytes: true })
      assert.deepStrictEqual([...retention.highestSeqs()], [[a.producer, 3]])

      assert.strictEqual(retention.committedBefore("100-0"), 0, "an entry at the frontier is not committed")
      assert.strictEqual(retention.committedBefore("100-1"), 2)
      assert.strictEqual(retention.committedBefore("99-0"), 0, "the frontier never goes back")
      assert.strictEqual(retention.committedBefore("200-0"), 1)
      assert.strictEqual(retention.stats.entries, 3)

      const taken = retention.takeAll()
      assert.deepStrictEqual(taken.map((kept) => kept.batch), [c])
      assert.deepStrictEqual(taken[0]!.payloads.map((p) => JSON.parse(p).n), [4, 5, 6])
      assert.isTrue(retention.isEmpty)
      assert.strictEqual(Fs.statSync(retention.path).size, 0, "nothing kept, nothing on disk")
      retention.close()
    }))

  it.effect("survives a reopen; a batch cut short by a crash is dropped", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const next = batchIds()
      const first = Retention.open(dir, MB)
      first.add(next(), "1-0", [capture(1)])
      first.add(next(), "2-0", [capture(2), capture(3)])
      first.close()
      // a crash half-way through writing a batch: its header and one of its two lines
      Fs.appendFileSync(first.path, `@${next().producer}:9 3-0 2\n${capture(4)}\n`)

      const reopened = Retention.open(dir, MB)
      assert.isAbove(reopened.droppedTornBytes, 0)
      assert.strictEqual(reopened.stats.entries, 3)
      assert.deepStrictEqual(reopened.takeAll().flatMap((kept) => kept.payloads.map((p) => JSON.parse(p).n)), [1, 2, 3])
      reopened.close()
    }))

  it.effect("past its bound it forgets the oldest batches, and says how many captures", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = Retention.open(dir, 10_000)
      const next = batchIds()
      let forgotten = 0
      for (let n = 0; n < 20; n++) forgotten += retention.add(next(), `${n}-0`, [capture(n, 1_000)])
      assert.isAtMost(retention.stats.bytes, 10_000)
      assert.strictEqual(forgotten + retention.stats.entries, 20)
      assert.deepStrictEqual(retention.takeAll().map((kept) => JSON.parse(kept.payloads[0]!).n), Array.from({ length: 20 - forgotten }, (_, i) => forgotten + i))
      retention.close()
    }))
})
