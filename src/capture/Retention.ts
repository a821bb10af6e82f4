/**
 * What the gateway has published and the builders have not yet committed (DESIGN §3 promise 2): kept on disk beside
 * the spool until the builders' committed frontier passes it, so that a Redis that comes back without it (restarted
 * without persistence, a crash between fsyncs, a failover to a replica that was behind) can be given it again.
 *
 * Layout: `<dataDir>/spool/published.ndjson`, per batch a header line `@<producer>:<seq> <head> <count>` — `head`
 * the stream's newest id once the batch was in (none of its entries is newer) — then its `count` captures, one a
 * line. Batches are kept in the order they were published, so their heads only grow and what the frontier passes
 * is always a prefix: it is dropped by moving a start offset, and the file is emptied once nothing is left (or
 * rewritten when the dropped prefix is large). A batch cut short by a crash is dropped when the file is opened.
 *
 * Bounded: past `maxBytes` the oldest batches are forgotten (they are then protected by Redis alone), and counted.
 * Synchronous like the spool; one process per data directory.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type BatchId, compareIds } from "./CaptureStream.ts"
import { syncAndClose, writeAll } from "./files.ts"

const FILE = "published.ndjson"
const HEADER = /^@([\w-]+):(\d{1,16}) (\S+) (\d+)$/
/** rewrite the file when this much at its start is already committed */
const COMPACT_AFTER_BYTES = 64 * 1024 * 1024

interface Kept {
  readonly batch: BatchId
  readonly head: string
  readonly entries: number
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

export class Retention {
  readonly path: string
  private fd: number
  private readonly maxBytes: number
  private kept: Array<Kept> = []
  /** index of the first batch still kept */
  private first = 0
  private size: number
  private entries = 0
  /** bytes of a batch cut short by a crash, dropped when the file was opened */
  readonly droppedTornBytes: number

  private constructor(dir: string, maxBytes: number) {
    this.maxBytes = maxBytes
    this.path = Path.join(dir, FILE)
    Fs.mkdirSync(dir, { recursive: true })
    this.fd = Fs.openSync(this.path, "a+")
    const data = Fs.readFileSync(this.path)
    const complete = this.load(data)
    this.droppedTornBytes = data.length - complete
    if (complete < data.length) Fs.ftruncateSync(this.fd, complete)
    this.size = complete
  }

  /** Opens (creating if needed) the retention file in `dir`, with what a previous run left in it. */
  static open(dir: string, maxBytes: number): Retention {
    return new Retention(dir, maxBytes)
  }

  get stats(): RetentionStats {
    return {
      batches: this.kept.length - this.first,
      entries: this.entries,
      bytes: this.first < this.kept.length ? this.size - this.kept[this.first]!.start : 0
    }
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
  add(batch: BatchId, head: string, payloads: ReadonlyArray<string>): number {
    let text = `@${batch.producer}:${batch.seq} ${head} ${payloads.length}\n`
    for (const payload of payloads) text += payload + "\n"
    this.ensureOpen()
    const bytes = writeAll(this.fd, text, this.size)
    this.kept.push({ batch, head, entries: payloads.length, start: this.size, end: this.size + bytes })
    this.size += bytes
    this.entries += payloads.length
    let forgotten = 0
    while (this.stats.bytes > this.maxBytes && this.kept.length - this.first > 1) forgotten += this.drop()
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

  /** Every batch kept, read back from the file, oldest first; the retention is empty afterwards. */
  takeAll(): Array<RetainedBatch> {
    if (this.isEmpty) return []
    const from = this.kept[this.first]!.start
    const data = Buffer.allocUnsafe(this.size - from)
    Fs.readSync(this.fd, data, 0, data.length, from)
    const batches: Array<RetainedBatch> = []
    for (let i = this.first; i < this.kept.length; i++) {
      const kept = this.kept[i]!
      const lines = data.toString("utf8", kept.start - from, kept.end - from).split("\n")
      batches.push({ batch: kept.batch, payloads: lines.slice(1, 1 + kept.entries) })
    }
    this.first = this.kept.length
    this.entries = 0
    this.tidy()
    return batches
  }

  /** Flushes to disk and closes; a later add reopens the file. */
  close(): void {
    if (this.fd < 0) return
    const fd = this.fd
    this.fd = -1
    syncAndClose(fd)
  }

  /** Reads the batches a previous run left; returns the length of the complete ones. */
  private load(data: Buffer): number {
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
      this.kept.push({ batch: { producer: header[1]!, seq: Number(header[2]) }, head: header[3]!, entries, start: at, end })
      this.entries += entries
      at = end
    }
    return at
  }

  private drop(): number {
    const kept = this.kept[this.first++]!
    this.entries -= kept.entries
    return kept.entries
  }

  /** Empties the file when nothing is kept; rewrites it when much of its start is no longer needed. */
  private tidy(): void {
    if (this.isEmpty) {
      this.kept = []
      this.first = 0
      this.entries = 0
      if (this.size > 0) {
        this.ensureOpen()
        Fs.ftruncateSync(this.fd, 0)
        this.size = 0
      }
      return
    }
    const from = this.kept[this.first]!.start
    if (from < COMPACT_AFTER_BYTES || from < this.size / 2) return
    const rest = Buffer.allocUnsafe(this.size - from)
    Fs.readSync(this.fd, rest, 0, rest.length, from)
    const temporary = `${this.path}.tmp`
    Fs.writeFileSync(temporary, rest)
    Fs.renameSync(temporary, this.path)
    Fs.closeSync(this.fd)
    this.fd = Fs.openSync(this.path, "a+")
    this.kept = this.kept.slice(this.first).map((kept) => ({ ...kept, start: kept.start - from, end: kept.end - from }))
    this.first = 0
    this.size = rest.length
  }

  private ensureOpen(): void {
    if (this.fd < 0) this.fd = Fs.openSync(this.path, "a+")
  }
}
