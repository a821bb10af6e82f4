/**
 * The capture retention on real files: batches kept in publish order and dropped as the committed frontier passes
 * them, read back whole, bounded, split into segments that are deleted once passed, surviving a reopen (a gateway
 * restart) without what was committed, and a batch cut short by a crash dropped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { batchIds } from "../../src/capture/CaptureStream.ts"
import { PublishedRetention } from "../../src/capture/PublishedRetention.ts"
import { spoolDir } from "../../src/capture/Spool.ts"
import { tempDir } from "../support/stack.ts"

const capture = (n: number, size = 20) => JSON.stringify({ n, pad: "x".repeat(size) })
const MB = 1024 * 1024

/** The retention's segment files in `dir`, in order. */
const segments = (dir: string) =>
  Fs.readdirSync(dir).filter((name) => /^published\.\d+\.ndjson$/.test(name)).sort((a, b) => Number(a.split(".")[1]) - Number(b.split(".")[1]))

/** Waits for the thread pool to delete what the retention let go of. */
const settled = (dir: string, count: number) =>
  Effect.promise(async () => {
    for (let tries = 0; tries < 200 && segments(dir).length !== count; tries++) await new Promise((resolve) => setTimeout(resolve, 10))
    return segments(dir)
  })

const numbers = (batches: ReadonlyArray<{ readonly payloads: ReadonlyArray<string> }>) =>
  batches.flatMap((kept) => kept.payloads.map((p) => JSON.parse(p).n as number))

describe("Retention", () => {
  it.effect("keeps batches until the frontier passes their newest entry; reads them back whole; leaves no file once all is committed", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = PublishedRetention.open(dir, MB)
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
      assert.deepStrictEqual(numbers(taken), [4, 5, 6])
      assert.isTrue(retention.isEmpty)
      assert.deepStrictEqual(retention.stats, { batches: 0, entries: 0, bytes: 0 })
      retention.close()
      assert.deepStrictEqual(segments(dir), [], "nothing kept, nothing on disk")
    }))

  it.effect("keeps captures given as their UTF-8 bytes (as the publisher sends Redis) and reads them back as the same texts", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = PublishedRetention.open(dir, MB)
      const next = batchIds()
      const texts = [JSON.stringify({ n: 1, out: " ❯ test/a.test.ts → 2 failed" }), capture(2), JSON.stringify({ n: 3, emoji: "✅🚀" })]
      retention.add(next(), "100-0", texts.map((text) => Buffer.from(text)))
      retention.add(next(), "100-3", [capture(4)])
      const taken = retention.takeAll()
      assert.deepStrictEqual(taken.flatMap((kept) => kept.payloads), [...texts, capture(4)])
      retention.close()
    }))

  it.effect("starts a new segment when one is full and deletes a segment once the frontier has passed it", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = PublishedRetention.open(dir, MB, 200)
      const next = batchIds()
      // ~100 bytes a batch: two batches fill a segment
      for (let n = 0; n < 10; n++) retention.add(next(), `${n + 1}-0`, [capture(n, 40)])
      assert.strictEqual(segments(dir).length, 5)
      retention.committedBefore("5-0")
      assert.deepStrictEqual(yield* settled(dir, 3), ["published.2.ndjson", "published.3.ndjson", "published.4.ndjson"], "the passed segments went")
      retention.committedBefore("11-0")
      assert.deepStrictEqual(yield* settled(dir, 1), ["published.4.ndjson"], "the segment written to stays")
      retention.add(next(), "12-0", [capture(10, 40)])
      assert.deepStrictEqual(yield* settled(dir, 1), ["published.5.ndjson"], "and goes once the next one takes over")
      assert.deepStrictEqual(numbers(retention.takeAll()), [10])
      retention.close()
      assert.deepStrictEqual(segments(dir), [])
    }))

  it.effect("survives a reopen without what was committed; a batch cut short by a crash is dropped", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const next = batchIds()
      const first = PublishedRetention.open(dir, MB)
      for (let n = 1; n <= 4; n++) first.add(next(), `${n}-0`, [capture(n)])
      first.committedBefore("3-0")
      first.close()

      const second = PublishedRetention.open(dir, MB)
      assert.strictEqual(second.droppedTornBytes, 0)
      assert.strictEqual(second.stats.entries, 2, "the committed batches did not come back")
      second.add(next(), "5-0", [capture(5)])
      // a crash half-way through writing a batch: its header and one of its two lines
      const [file] = segments(dir)
      Fs.appendFileSync(Path.join(dir, file!), `@${next().producer}:9 6-0 2\n${capture(6)}\n`)

      const third = PublishedRetention.open(dir, MB)
      assert.isAbove(third.droppedTornBytes, 0)
      third.add(next(), "7-0", [capture(7)])
      assert.deepStrictEqual(numbers(third.takeAll()), [3, 4, 5, 7])
      third.close()
    }))

  it.effect("takes over the single file of earlier versions", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      Fs.mkdirSync(dir, { recursive: true })
      Fs.writeFileSync(Path.join(dir, "published.ndjson"), `@gw-old:1 1-0 2\n${capture(1)}\n${capture(2)}\n`)
      const retention = PublishedRetention.open(dir, MB)
      retention.add(batchIds()(), "2-0", [capture(3)])
      assert.deepStrictEqual(numbers(retention.takeAll()), [1, 2, 3])
      retention.close()
    }))

  it.effect("past its bound it forgets the oldest batches, and says how many captures", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const retention = PublishedRetention.open(dir, 10_000)
      const next = batchIds()
      let forgotten = 0
      for (let n = 0; n < 20; n++) forgotten += retention.add(next(), `${n}-0`, [capture(n, 1_000)])
      assert.isAtMost(retention.stats.bytes, 10_000)
      assert.strictEqual(forgotten + retention.stats.entries, 20)
      assert.deepStrictEqual(retention.takeAll().map((kept) => JSON.parse(kept.payloads[0]!).n), Array.from({ length: 20 - forgotten }, (_, i) => forgotten + i))
      retention.close()
    }))
})
