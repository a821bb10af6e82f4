/**
 * The capture spool on a real file: order, batches (their ids, limits, and that a batch never changes once handed
 * out), lines longer than a read, the replay cursor and the batch ids surviving a reopen, a torn last line, and
 * the figures `ledger status` reads from another process, and the spools of gateway workers (those of workers gone are
 * taken over).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type BatchId, batchIds } from "../../src/capture/CaptureStream.ts"
import { adoptSpool, orphanSpoolDirs } from "../../src/capture/adoptSpools.ts"
import { PublishedRetention } from "../../src/capture/PublishedRetention.ts"
import { readSpoolStats, shardSpoolDir, Spool, type SpoolBatch, spoolDir, type SpoolLimits, workerSpoolDir } from "../../src/capture/Spool.ts"
import { tempDir } from "../support/stack.ts"

const entry = (n: number, size = 20) => JSON.stringify({ n, pad: "x".repeat(size) })
const numbers = (batch: SpoolBatch | undefined) => (batch?.payloads ?? []).map((p) => JSON.parse(p).n as number)
const LIMITS: SpoolLimits = { maxEntries: 1_000, maxBytes: 1_000_000 }

/** Reads the next batch, which must exist, and commits it. */
const take = (spool: Spool): SpoolBatch => {
  const batch = spool.read()
  assert.isDefined(batch)
  spool.commit(batch!.end, batch!.payloads.length)
  return batch!
}

const sameId = (a: BatchId, b: BatchId) => assert.deepStrictEqual(a, b)

describe("Spool", () => {
  it.effect("replays in order, a batch at a time; captures never published are batched up to the limits", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      const spool = Spool.open(dir, { maxEntries: 3, maxBytes: 1_000_000 })
      assert.isTrue(spool.isEmpty)
      assert.isUndefined(spool.read())
      spool.append([entry(1), entry(2)])
      spool.append([entry(3)])
      spool.append([entry(4), entry(5), entry(6), entry(7)])
      assert.strictEqual(spool.stats.entries, 7)
      assert.strictEqual(spool.stats.bytes, Fs.statSync(spool.path).size)

      const first = spool.read()!
      assert.deepStrictEqual(numbers(first), [1, 2, 3])
      // nothing moves until commit: reading again gives the same batch, under the same id
      const again = spool.read()!
      assert.deepStrictEqual(again.payloads, first.payloads)
      sameId(again.batch, first.batch)
      spool.commit(first.end, first.payloads.length)
      assert.strictEqual(spool.stats.entries, 4)

      const second = take(spool)
      assert.deepStrictEqual(numbers(second), [4, 5, 6])
      assert.strictEqual(second.batch.producer, first.batch.producer, "the spool's own producer")
      assert.strictEqual(second.batch.seq, first.batch.seq + 1, "numbered in file order")
      assert.deepStrictEqual(numbers(take(spool)), [7])
      assert.isTrue(spool.isEmpty)
      // fully replayed: the file is emptied and the cursor removed
      assert.strictEqual(Fs.statSync(spool.path).size, 0)
      assert.isFalse(Fs.existsSync(Path.join(dir, "captures.cursor")))
      assert.isUndefined(spool.read())
      spool.close()
    }))

  it.effect("a batch is cut at the byte limit; a capture larger than it makes a batch of its own", () =>
    Effect.gen(function*() {
      const spool = Spool.open(spoolDir(yield* tempDir), { maxEntries: 100, maxBytes: entry(1).length * 2 + 1 })
      spool.append([entry(1), entry(2), entry(3), entry(4, 500), entry(5)])
      assert.deepStrictEqual(numbers(take(spool)), [1, 2])
      assert.deepStrictEqual(numbers(take(spool)), [3])
      assert.deepStrictEqual(numbers(take(spool)), [4])
      assert.deepStrictEqual(numbers(take(spool)), [5])
      assert.isTrue(spool.isEmpty)
      spool.close()
    }))

  it.effect("a published batch keeps its id and its captures; nothing joins it or a batch handed out", () =>
    Effect.gen(function*() {
      const spool = Spool.open(spoolDir(yield* tempDir), LIMITS)
      const published = batchIds()()
      spool.append([entry(1)])
      spool.appendPublished(published, [entry(2), entry(3)])
      spool.append([entry(4)])

      const first = take(spool)
      assert.deepStrictEqual(numbers(first), [1])
      const second = spool.read()!
      assert.deepStrictEqual(numbers(second), [2, 3])
      sameId(second.batch, published)
      spool.commit(second.end, 2)

      // [4] is handed out: what is appended now is a later batch, even though [4] was not published yet
      const third = spool.read()!
      assert.deepStrictEqual(numbers(third), [4])
      spool.append([entry(5)])
      const retried = spool.read()!
      assert.deepStrictEqual(numbers(retried), [4], "the batch did not grow")
      sameId(retried.batch, third.batch)
      spool.commit(retried.end, 1)
      const fourth = take(spool)
      assert.deepStrictEqual(numbers(fourth), [5])
      assert.isAbove(fourth.batch.seq, third.batch.seq)
      assert.notStrictEqual(fourth.batch.producer, published.producer)
      spool.close()
    }))

  it.effect("entries larger than one read (several MB) come back whole", () =>
    Effect.gen(function*() {
      const spool = Spool.open(spoolDir(yield* tempDir), { maxEntries: 10, maxBytes: 100 * 1024 * 1024 })
      const big = entry(2, 3 * 1024 * 1024 + 17)
      spool.append([entry(1), big, entry(3)])
      const batch = take(spool)
      assert.strictEqual(batch.payloads.length, 3)
      assert.strictEqual(batch.payloads[1], big)
      assert.strictEqual(JSON.parse(batch.payloads[2]!).n, 3)
      assert.isTrue(spool.isEmpty)
      spool.close()
    }))

  it.effect("the replay cursor and the batch ids survive a reopen; later appends start a batch of their own", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const first = Spool.open(spoolDir(dataDir), { maxEntries: 2, maxBytes: 1_000_000 })
      first.append([entry(1), entry(2), entry(3)])
      const published = batchIds()()
      first.appendPublished(published, [entry(4)])
      const replayedFirst = take(first)
      assert.deepStrictEqual(numbers(replayedFirst), [1, 2])
      const open = first.read()!
      first.close()
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 2, bytes: Fs.statSync(first.path).size - replayedFirst.end })

      const second = Spool.open(spoolDir(dataDir), { maxEntries: 2, maxBytes: 1_000_000 })
      assert.strictEqual(second.stats.entries, 2)
      second.append([entry(5)])
      const replayed = take(second)
      assert.deepStrictEqual(numbers(replayed), [3])
      sameId(replayed.batch, open.batch)
      const again = take(second)
      assert.deepStrictEqual(numbers(again), [4])
      sameId(again.batch, published)
      const fresh = take(second)
      assert.deepStrictEqual(numbers(fresh), [5])
      assert.notStrictEqual(fresh.batch.producer, open.batch.producer, "a new spool numbers with a producer of its own")
      second.close()
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
    }))

  it.effect("a last line cut short by a crash is dropped on open, the rest is kept", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const dir = spoolDir(dataDir)
      const spool = Spool.open(dir, LIMITS)
      spool.append([entry(1), entry(2)])
      spool.close()
      const torn = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b:9 {\"n\":3,\"pad\":\"xx"
      Fs.appendFileSync(Path.join(dir, "captures.ndjson"), torn)
      const reopened = Spool.open(dir, LIMITS)
      assert.strictEqual(reopened.droppedTornBytes, torn.length)
      assert.strictEqual(reopened.stats.entries, 2)
      reopened.append([entry(4)])
      assert.deepStrictEqual(numbers(take(reopened)), [1, 2])
      assert.deepStrictEqual(numbers(take(reopened)), [4])
      reopened.close()
    }))

  it.effect("an untagged line (not written by this spool) is replayed as a batch of its own", () =>
    Effect.gen(function*() {
      const dir = spoolDir(yield* tempDir)
      Fs.mkdirSync(dir, { recursive: true })
      Fs.writeFileSync(Path.join(dir, "captures.ndjson"), `${entry(1)}\n${entry(2)}\n`)
      const spool = Spool.open(dir, LIMITS)
      assert.strictEqual(spool.stats.entries, 2)
      const first = take(spool)
      assert.deepStrictEqual(first.payloads, [entry(1)])
      assert.deepStrictEqual(take(spool).payloads, [entry(2)])
      spool.close()
    }))

  it.effect("refuses entries with a newline (they would split); stats are zero without a spool", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      assert.deepStrictEqual(readSpoolStats(dataDir), { entries: 0, bytes: 0 })
      const spool = Spool.open(spoolDir(dataDir), LIMITS)
      assert.throws(() => spool.append(["a\nb"]), /newline/)
      assert.throws(() => spool.appendPublished(batchIds()(), ["a\nb"]), /newline/)
      assert.isTrue(spool.isEmpty)
      spool.close()
      // closed: a late append reopens the file
      spool.append([entry(9)])
      assert.strictEqual(readSpoolStats(dataDir).entries, 1)
      spool.close()
    }))

  it.effect("gateway workers: a spool directory each; the spools of workers gone move, ids and all, to worker j mod count", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      assert.strictEqual(workerSpoolDir(dataDir, 0), spoolDir(dataDir))
      const published = batchIds()
      const batches = new Map<number, BatchId>()
      for (const worker of [0, 1, 2, 3, 4]) {
        const spool = Spool.open(workerSpoolDir(dataDir, worker), LIMITS)
        const batch = published()
        batches.set(worker, batch)
        spool.appendPublished(batch, [entry(worker * 10), entry(worker * 10 + 1)])
        spool.close()
      }
      // what `ledger status` reads covers every worker's spool
      assert.strictEqual(readSpoolStats(dataDir).entries, 10)
      // retention (published, not committed) of worker 3 goes too
      const retention = PublishedRetention.open(workerSpoolDir(dataDir, 3), 1_000_000)
      const retained = published()
      retention.add(retained, "1-0", [entry(99)])
      retention.close()

      // two workers now: worker 0 takes 2 and 4, worker 1 takes 3
      assert.deepStrictEqual(orphanSpoolDirs(dataDir, 0, 2), [{ dir: workerSpoolDir(dataDir, 2), shard: 0 }, { dir: workerSpoolDir(dataDir, 4), shard: 0 }])
      assert.deepStrictEqual(orphanSpoolDirs(dataDir, 1, 2), [{ dir: workerSpoolDir(dataDir, 3), shard: 0 }])
      const one = Spool.open(workerSpoolDir(dataDir, 1), LIMITS)
      assert.strictEqual(adoptSpool(workerSpoolDir(dataDir, 3), one, LIMITS), 3)
      assert.isFalse(Fs.existsSync(workerSpoolDir(dataDir, 3)))
      const replayed = [take(one), take(one), take(one)]
      sameId(replayed[0]!.batch, batches.get(1)!)
      // the retained batch first (it was published before anything still spooled), then the spooled one
      sameId(replayed[1]!.batch, retained)
      assert.deepStrictEqual(replayed[1]!.payloads, [entry(99)])
      sameId(replayed[2]!.batch, batches.get(3)!)
      assert.deepStrictEqual(numbers(replayed[2]), [30, 31])
      assert.isTrue(one.isEmpty)
      one.close()
      assert.strictEqual(readSpoolStats(dataDir).entries, 6, "workers 0, 2 and 4 left")
    }))

  it.effect("capture stream shards: a spool directory per worker and shard; lowering the shard count moves shard s to s mod count", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      assert.strictEqual(shardSpoolDir(dataDir, 0, 0), spoolDir(dataDir))
      assert.strictEqual(shardSpoolDir(dataDir, 0, 2), Path.join(spoolDir(dataDir), "shard-2"))
      assert.strictEqual(shardSpoolDir(dataDir, 3, 1), Path.join(spoolDir(dataDir), "worker-3-shard-1"))
      // two workers wrote four shards each, and a third worker one
      const places: Array<[number, number]> = [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2], [1, 3], [2, 3]]
      for (const [worker, shard] of places) {
        const spool = Spool.open(shardSpoolDir(dataDir, worker, shard), LIMITS)
        spool.append([entry(worker * 10 + shard)])
        spool.close()
      }
      // a directory that is not a spool's is left alone
      Fs.mkdirSync(Path.join(spoolDir(dataDir), "shard-x"))
      assert.strictEqual(readSpoolStats(dataDir).entries, places.length)

      // now two workers and two shards: each worker takes its own shards 2 and 3, and worker 0 also worker 2's shard 3
      const dirs = (index: number) => orphanSpoolDirs(dataDir, index, 2, 2).map(({ dir, shard }) => [Path.basename(dir), shard])
      assert.deepStrictEqual(dirs(0), [["shard-2", 0], ["shard-3", 1], ["worker-2-shard-3", 1]])
      assert.deepStrictEqual(dirs(1), [["worker-1-shard-2", 0], ["worker-1-shard-3", 1]])

      const into = Spool.open(shardSpoolDir(dataDir, 0, 1), LIMITS)
      for (const { dir, shard } of orphanSpoolDirs(dataDir, 0, 2, 2)) {
        if (shard === 1) assert.strictEqual(adoptSpool(dir, into, LIMITS), 1)
      }
      const replayed: Array<number> = []
      for (let batch = into.read(); batch !== undefined; batch = into.read()) {
        replayed.push(...numbers(batch))
        into.commit(batch.end, batch.payloads.length)
      }
      into.close()
      assert.deepStrictEqual(replayed.sort((a, b) => a - b), [1, 3, 23])
      assert.isFalse(Fs.existsSync(shardSpoolDir(dataDir, 2, 3)))
      assert.isTrue(Fs.existsSync(Path.join(spoolDir(dataDir), "shard-x")))
    }))
})
