/**
 * What the gateway has published and the builders have not yet committed (docs/ARCHITECTURE.md, "The promises": no
 * capture is lost): kept on disk beside the spool until the builders' committed frontier passes it, so that a Redis
 * that comes back without it (restarted without persistence, a crash between fsyncs, a failover to a replica that was
 * behind) can be given it again.
 *
 * Layout: segment files `<dataDir>/spool/published.<n>.ndjson`, n counting up; per batch a header line
 * `@<producer>:<seq> <head> <count>` — `head` the stream's newest id once the batch was in (none of its entries is
 * newer) — then its `count` captures, one a line. Batches are appended in the order they were published, so their
 * heads only grow and what the frontier passes is always a prefix. A segment takes batches until it holds
 * SEGMENT_BYTES; once the frontier has passed every batch in a segment that is no longer written to, the segment is
 * deleted.
 *
 * Appends are synchronous (the page cache: microseconds). Nothing that frees disk blocks runs on the caller's
 * thread: on a filesystem mounted with `discard` (common on cloud disks) freeing blocks waits for the device, and an
 * `ftruncate` of this file on the gateway's event loop stalled calls for 5–13 ms (bench/notes/serve.md, "Planner statistics
 * and the retention's truncate"). So a
 * passed segment is closed and unlinked in libuv's thread pool, and a file is never truncated while it is in use.
 * A batch cut short by a crash is dropped when the files are opened.
 *
 * Bounded: past `maxBytes` the oldest batches are forgotten (they are then protected by Redis alone), and counted.
 * One process per data directory.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type BatchId, captureBytes, type CapturePayload, compareIds } from "./CaptureStream.ts"
import { syncAndClose, writeAll, writeAllParts } from "./files.ts"

const LEGACY_FILE = "published.ndjson"
const SEGMENT = /^published\.(\d{1,12})\.ndjson$/
const HEADER = /^@([\w-]+):(\d{1,16}) (\S+) (\d+)$/
/** A segment takes batches until it is this large; then the next batch starts a new one. */
const SEGMENT_BYTES = 16 * 1024 * 1024
const NEWLINE = Buffer.from("\n")

interface Segment {
  readonly number: number
  readonly path: string
  readonly fd: number
  size: number
  /** its batches the frontier has not passed yet */
  live: number
}

interface Kept {
  readonly batch: BatchId
  readonly head: string
  readonly entries: number
  readonly segment: Segment
  /** file offsets of the header line's start and of the end of the batch's last line */
  readonly start: number
  readonly end: number
}

export interface RetentionStats {
  readonly batches: number
  readonly entries: number
  readonly bytes: number
}

export interface RetainedBatch {
  readonly batch: BatchId
  readonly payloads: ReadonlyArray<string>
}

/** Closes and deletes a segment in the thread pool (freeing its blocks can wait for the disk). */
const dispose = (segment: Segment) => Fs.close(segment.fd, () => Fs.unlink(segment.path, () => {}))

/** Replaces a (closed) file by what it holds from `start` on, durably. */
const rewriteFrom = (path: string, start: number) => {
  const rest = Fs.readFileSync(path).subarray(start)
  const temporary = `${path}.tmp`
  const fd = Fs.openSync(temporary, "w")
  writeAll(fd, rest, 0)
  syncAndClose(fd)
  Fs.renameSync(temporary, path)
}

export class PublishedRetention {
  readonly dir: string
  private readonly maxBytes: number
  private readonly segmentBytes: number
  private kept: Array<Kept> = []
  /** index of the first batch still kept */
  private first = 0
  private entries = 0
  private bytes = 0
  /** the segment batches are appended to (null: none yet, or closed) */
  private current: Segment | null = null
  private nextNumber = 0
  /** bytes of batches cut short by a crash, dropped when the files were opened */
  readonly droppedTornBytes: number = 0

  private constructor(dir: string, maxBytes: number, segmentBytes: number) {
    this.dir = dir
    this.maxBytes = maxBytes
    this.segmentBytes = segmentBytes
    Fs.mkdirSync(dir, { recursive: true })
    // the single file of earlier versions is the first segment
    const legacy = Path.join(dir, LEGACY_FILE)
    if (Fs.existsSync(legacy)) Fs.renameSync(legacy, Path.join(dir, "published.0.ndjson"))
    const numbers = Fs.readdirSync(dir).flatMap((name) => {
      const match = SEGMENT.exec(name)
      return match === null ? [] : [Number(match[1])]
    }).sort((a, b) => a - b)
    for (const number of numbers) {
      const segment = this.openSegment(number)
      const data = Fs.readFileSync(segment.path)
      const complete = this.load(segment, data)
      if (complete < data.length) {
        // only the segment being written when the process died can end in a torn batch: cut it (at start-up, off
        // the hot path) so the next batch appended to it begins on a line of its own
        this.droppedTornBytes += data.length - complete
        Fs.ftruncateSync(segment.fd, complete)
      }
      segment.size = complete
      if (segment.live === 0) dispose(segment)
      else this.current = segment
      this.nextNumber = number + 1
    }
  }

  /** Opens (creating if needed) the retention in `dir`, with what a previous run left in it. */
  static open(dir: string, maxBytes: number, segmentBytes = SEGMENT_BYTES): PublishedRetention {
    return new PublishedRetention(dir, maxBytes, segmentBytes)
  }

  get stats(): RetentionStats {
    return { batches: this.kept.length - this.first, entries: this.entries, bytes: this.bytes }
  }

  get isEmpty(): boolean {
    return this.first >= this.kept.length
  }

  /** The highest batch number kept per producer: the stream must still hold at least that much of each. */
  highestSeqs(): Map<string, number> {
    const highest = new Map<string, number>()
    for (let i = this.first; i < this.kept.length; i++) {
      const { batch } = this.kept[i]!
      if (batch.seq > (highest.get(batch.producer) ?? 0)) highest.set(batch.producer, batch.seq)
    }
    return highest
  }

  /**
   * Keeps a batch the stream has taken, in one write; returns how many captures the bound made it forget (the
   * oldest). Throws when the disk refuses.
   */
  add(batch: BatchId, head: string, payloads: ReadonlyArray<CapturePayload>): number {
    // the payloads' bytes as they are, not one string of the whole batch: flattened and encoded, that string cost a
    // batch of long calls tens of megabytes of copies
    const parts: Array<Uint8Array> = [Buffer.from(`@${batch.producer}:${batch.seq} ${head} ${payloads.length}\n`)]
    for (const payload of payloads) parts.push(captureBytes(payload), NEWLINE)
    const segment = this.writable()
    const bytes = writeAllParts(segment.fd, parts, segment.size)
    this.kept.push({ batch, head, entries: payloads.length, segment, start: segment.size, end: segment.size + bytes })
    segment.size += bytes
    segment.live++
    this.entries += payloads.length
    this.bytes += bytes
    let forgotten = 0
    while (this.bytes > this.maxBytes && this.kept.length - this.first > 1) forgotten += this.drop()
    this.tidy()
    return forgotten
  }

  /** Forgets the batches whose entries are all below `frontier` (committed); returns how many captures. */
  committedBefore(frontier: string): number {
    let dropped = 0
    while (!this.isEmpty && compareIds(this.kept[this.first]!.head, frontier) < 0) dropped += this.drop()
    this.tidy()
    return dropped
  }

  /** Every batch kept, read back from its segment, oldest first; the retention is empty afterwards. */
  takeAll(): Array<RetainedBatch> {
    const batches: Array<RetainedBatch> = []
    while (!this.isEmpty) {
      const kept = this.kept[this.first]!
      const data = Buffer.allocUnsafe(kept.end - kept.start)
      Fs.readSync(kept.segment.fd, data, 0, data.length, kept.start)
      const lines = data.toString("utf8").split("\n")
      batches.push({ batch: kept.batch, payloads: lines.slice(1, 1 + kept.entries) })
      this.drop()
    }
    this.tidy()
    return batches
  }

  /**
   * Flushes to disk and closes the files; a later add starts a new segment. What the frontier has passed does not
   * outlive the process (a later start must not take it for uncommitted): a segment holding nothing kept is
   * deleted, and the oldest one is rewritten without its committed batches.
   */
  close(): void {
    const live = new Set(this.kept.slice(this.first).map((kept) => kept.segment))
    if (this.current !== null && !live.has(this.current)) {
      Fs.closeSync(this.current.fd)
      Fs.rmSync(this.current.path, { force: true })
    }
    for (const segment of live) {
      if (segment === this.current) syncAndClose(segment.fd)
      else Fs.closeSync(segment.fd)
    }
    if (!this.isEmpty) {
      const oldest = this.kept[this.first]!
      if (oldest.start > 0) rewriteFrom(oldest.segment.path, oldest.start)
    }
    this.current = null
    this.kept = []
    this.first = 0
    this.entries = 0
    this.bytes = 0
  }

  /** Reads the batches a previous run left in a segment; returns the length of the complete ones. */
  private load(segment: Segment, data: Buffer): number {
    let at = 0
    while (at < data.length) {
      const newline = data.indexOf(0x0a, at)
      if (newline === -1) break
      const header = HEADER.exec(data.toString("utf8", at, newline))
      if (header === null) break
      const entries = Number(header[4])
      let end = newline + 1
      for (let n = 0; n < entries && end !== 0; n++) end = data.indexOf(0x0a, end) + 1
      if (end === 0) break
      this.kept.push({ batch: { producer: header[1]!, seq: Number(header[2]) }, head: header[3]!, entries, segment, start: at, end })
      segment.live++
      this.entries += entries
      this.bytes += end - at
      at = end
    }
    return at
  }

  /** The segment to append to: the current one until it is full, then a new one. */
  private writable(): Segment {
    const current = this.current
    if (current !== null && current.size < this.segmentBytes) return current
    const segment = this.openSegment(this.nextNumber++)
    this.current = segment
    if (current !== null && current.live === 0) dispose(current)
    return segment
  }

  private openSegment(number: number): Segment {
    const path = Path.join(this.dir, `published.${number}.ndjson`)
    return { number, path, fd: Fs.openSync(path, "a+"), size: 0, live: 0 }
  }

  private drop(): number {
    const kept = this.kept[this.first++]!
    this.entries -= kept.entries
    this.bytes -= kept.end - kept.start
    // a segment no longer written to goes once the frontier has passed all of it
    if (--kept.segment.live === 0 && kept.segment !== this.current) dispose(kept.segment)
    return kept.entries
  }

  /** Lets go of the records of dropped batches once they are most of the list. */
  private tidy(): void {
    if (this.first > 1024 && this.first * 2 > this.kept.length) {
      this.kept = this.kept.slice(this.first)
      this.first = 0
    }
  }
}
