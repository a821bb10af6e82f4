/**
 * The capture spool: an append-only file that holds captures the stream could not take (docs/ARCHITECTURE.md, "The
 * promises": no capture is lost), until the publisher replays them, oldest first, one batch per publish.
 *
 * Layout under `<dataDir>/spool/`:
 *   captures.ndjson  one capture per line, appended: `<producer>:<seq> <JSON text>`, the id of the batch the
 *                    capture is published in (see BatchId); JSON text never contains a raw newline
 *   captures.cursor  byte offset of the first line not yet replayed (absent = 0)
 * When everything has been replayed the file is truncated to empty. A line cut short by a crash (no trailing
 * newline) is dropped when the spool is opened, with a warning: it was never fully written.
 *
 * Batches keep their ids in the file so that replaying a batch whose publish may have reached the stream (the
 * reply was lost) sends the same id again, and the stream appends it at most once — across restarts too:
 * - `appendPublished` spools a batch whose publish failed, under the id it was published with.
 * - `append` spools captures never published: they join the spool's open batch (its own producer, numbered in
 *   file order), up to the batch limits. A batch is closed once `read` hands it out or a published batch is
 *   appended behind it, so what is replayed under an id never changes, and batches are replayed in the order
 *   they were numbered.
 *
 * All operations are synchronous: appends happen on the gateway's hot path when the in-process queue is full
 * (a page-cache write, far cheaper than waiting), and JavaScript's single thread makes each call atomic with
 * respect to the others. Only one process may use a spool directory at a time (one gateway per data dir).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type BatchId, batchIds } from "./CaptureStream.ts"
import { syncAndClose, writeAll } from "./files.ts"

const FILE = "captures.ndjson"
const CURSOR = "captures.cursor"
const NEWLINE = 0x0a
const SPACE = 0x20
const TAG = /^([\w-]+):([1-9]\d{0,15})$/
const READ_CHUNK = 1024 * 1024
const EMPTY = Buffer.alloc(0)

export const spoolDir = (dataDir: string) => Path.join(dataDir, "spool")

const SPOOL_DIR = /^(?:worker-(\d{1,4}))?(?:-?shard-(\d{1,4}))?$/

/**
 * The spool directory of gateway worker `worker` (`ledger serve --gateway-workers N`) for capture stream shard `shard`
 * (LEDGER_CAPTURE_SHARDS): worker 0's shard 0 is a single gateway's, `<dataDir>/spool`; the others sit beside it in
 * `<dataDir>/spool/worker-<w>`, `spool/shard-<s>` and `spool/worker-<w>-shard-<s>` (one publisher per spool).
 */
export const shardSpoolDir = (dataDir: string, worker: number, shard: number) => {
  if (worker === 0 && shard === 0) return spoolDir(dataDir)
  const name = [worker > 0 ? `worker-${worker}` : "", shard > 0 ? `shard-${shard}` : ""].filter((part) => part !== "").join("-")
  return Path.join(spoolDir(dataDir), name)
}

/** The spool directory of gateway worker `index`'s first shard. */
export const workerSpoolDir = (dataDir: string, index: number) => shardSpoolDir(dataDir, index, 0)

export interface SpoolPlace {
  readonly worker: number
  readonly shard: number
  readonly dir: string
}

/** The spool directories present under `dataDir` (worker 0's shard 0 first, when it exists). */
export const spoolDirs = (dataDir: string): ReadonlyArray<SpoolPlace> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(spoolDir(dataDir))
  } catch {
    return []
  }
  const places: Array<SpoolPlace> = [{ worker: 0, shard: 0, dir: spoolDir(dataDir) }]
  for (const name of names) {
    const match = SPOOL_DIR.exec(name)
    if (match === null || name === "") continue
    const worker = Number(match[1] ?? 0)
    const shard = Number(match[2] ?? 0)
    // `worker-0`, `shard-0` and a bare `-shard-1` are not names this module gives
    if ((worker === 0 && shard === 0) || shardSpoolDir(dataDir, worker, shard) !== Path.join(spoolDir(dataDir), name)) continue
    places.push({ worker, shard, dir: Path.join(spoolDir(dataDir), name) })
  }
  return places.sort((a, b) => a.worker - b.worker || a.shard - b.shard)
}

export interface SpoolStats {
  /** captures waiting to be replayed */
  readonly entries: number
  /** bytes waiting to be replayed */
  readonly bytes: number
}

/** Bounds of the batches the spool forms from captures never published. */
export interface SpoolLimits {
  readonly maxEntries: number
  /** about this much text (UTF-16 code units); a larger capture makes a batch of its own */
  readonly maxBytes: number
}

export interface SpoolBatch {
  /** the id to publish the batch under */
  readonly batch: BatchId
  readonly payloads: ReadonlyArray<string>
  /** offset just after the batch: pass it to `commit` once the batch is published */
  readonly end: number
}

const tagOf = (batch: BatchId) => `${batch.producer}:${batch.seq} `

/**
 * The batch id at the start of the line `data[start, newline)` and the length of its tag with the space; a line
 * without a valid tag gets a one-off id and length 0 (its replay, if retried, could append it twice: never lost).
 */
const parseTag = (data: Buffer, start: number, newline: number): { readonly batch: BatchId; readonly length: number } => {
  const space = data.indexOf(SPACE, start)
  const match = space === -1 || space > newline ? null : TAG.exec(data.toString("latin1", start, space))
  return match === null
    ? { batch: batchIds()(), length: 0 }
    : { batch: { producer: match[1]!, seq: Number(match[2]) }, length: space - start + 1 }
}

const checkLines = (payloads: ReadonlyArray<string>) => {
  for (const payload of payloads) {
    if (payload.includes("\n")) throw new Error("spool entries must not contain a newline")
  }
}

const sameBatch = (a: BatchId, b: BatchId) => a.producer === b.producer && a.seq === b.seq

const readCursor = (dir: string): number => {
  try {
    const value = Number(Fs.readFileSync(Path.join(dir, CURSOR), "utf8").trim())
    return Number.isSafeInteger(value) && value >= 0 ? value : 0
  } catch {
    return 0
  }
}

/** Counts newlines in `[from, to)` of an open file. */
const countLines = (fd: number, from: number, to: number): number => {
  const buffer = Buffer.allocUnsafe(READ_CHUNK)
  let lines = 0
  for (let position = from; position < to;) {
    const read = Fs.readSync(fd, buffer, 0, Math.min(READ_CHUNK, to - position), position)
    if (read === 0) break
    for (let at = buffer.indexOf(NEWLINE, 0); at !== -1 && at < read; at = buffer.indexOf(NEWLINE, at + 1)) lines++
    position += read
  }
  return lines
}

/**
 * What is waiting in the spools of a data directory (every gateway worker's, every shard's), read from the files (for `ledger
 * status` in another process). Zero when there are none.
 */
export const readSpoolStats = (dataDir: string): SpoolStats => {
  let entries = 0
  let bytes = 0
  for (const { dir } of spoolDirs(dataDir)) {
    const stats = readDirStats(dir)
    entries += stats.entries
    bytes += stats.bytes
  }
  return { entries, bytes }
}

const readDirStats = (dir: string): SpoolStats => {
  let fd: number
  try {
    fd = Fs.openSync(Path.join(dir, FILE), "r")
  } catch {
    return { entries: 0, bytes: 0 }
  }
  try {
    const size = Fs.fstatSync(fd).size
    const cursor = Math.min(readCursor(dir), size)
    return { entries: countLines(fd, cursor, size), bytes: size - cursor }
  } finally {
    Fs.closeSync(fd)
  }
}

export class Spool {
  readonly dir: string
  readonly path: string
  private readonly cursorPath: string
  private fd: number
  /** offset of the first line not yet replayed (persisted in the cursor file) */
  private cursor: number
  /** size of the file: where the next append lands */
  private size: number
  private lines: number
  private readonly limits: SpoolLimits
  /** ids for the batches of captures never published */
  private readonly nextBatch: () => BatchId
  /** the batch `append` adds to, while it may still grow */
  private open: { readonly batch: BatchId; readonly tag: string; entries: number; bytes: number } | null = null
  /** bytes of a torn line dropped when the spool was opened (reported once by the owner) */
  readonly droppedTornBytes: number

  private constructor(dir: string, limits: SpoolLimits) {
    this.dir = dir
    this.limits = limits
    this.nextBatch = batchIds()
    this.path = Path.join(dir, FILE)
    this.cursorPath = Path.join(dir, CURSOR)
    Fs.mkdirSync(dir, { recursive: true })
    this.fd = Fs.openSync(this.path, "a+")
    let size = Fs.fstatSync(this.fd).size
    const complete = this.lastNewlineEnd(size)
    this.droppedTornBytes = size - complete
    if (complete < size) {
      Fs.ftruncateSync(this.fd, complete)
      size = complete
    }
    this.size = size
    this.cursor = Math.min(readCursor(dir), size)
    this.lines = countLines(this.fd, this.cursor, size)
    if (this.lines === 0 && size > 0) this.reset()
  }

  /** Opens (creating if needed) the spool in `dir`. */
  static open(dir: string, limits: SpoolLimits): Spool {
    return new Spool(dir, limits)
  }

  get stats(): SpoolStats {
    return { entries: this.lines, bytes: this.size - this.cursor }
  }

  get isEmpty(): boolean {
    return this.lines === 0
  }

  /**
   * Appends captures never published, in order, as one write; they join the open batch, or start new ones at
   * the limits. Throws when the disk refuses (full, read-only).
   */
  append(payloads: ReadonlyArray<string>): void {
    checkLines(payloads)
    let text = ""
    for (const payload of payloads) {
      let open = this.open
      if (open === null || open.entries >= this.limits.maxEntries || (open.entries > 0 && open.bytes + payload.length > this.limits.maxBytes)) {
        const batch = this.nextBatch()
        open = { batch, tag: tagOf(batch), entries: 0, bytes: 0 }
        this.open = open
      }
      text += open.tag + payload + "\n"
      open.entries++
      open.bytes += payload.length
    }
    this.write(text, payloads.length)
  }

  /**
   * Appends a batch whose publish failed (the stream may have taken it), under the id it was published with, so
   * its replay cannot append it twice. Throws when the disk refuses (full, read-only).
   */
  appendPublished(batch: BatchId, payloads: ReadonlyArray<string>): void {
    checkLines(payloads)
    // what is appended next must not join the open batch across this one: a batch's lines stay together
    this.open = null
    const tag = tagOf(batch)
    let text = ""
    for (const payload of payloads) text += tag + payload + "\n"
    this.write(text, payloads.length)
  }

  /**
   * The oldest batch not yet replayed, whole; undefined when there is none. The spool does not move until
   * `commit`, and the batch no longer grows: reading it again returns the same batch.
   */
  read(): SpoolBatch | undefined {
    this.ensureOpen()
    const payloads: Array<string> = []
    let batch: BatchId | null = null
    /** the first line's tag, with its space: the batch ends at the first line without it */
    let tag = EMPTY
    let done = false
    const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK, Math.max(this.size - this.cursor, 1)))
    /** file offset of `data[0]`: the start of the first line not yet taken */
    let offset = this.cursor
    /** the start of a line that continues past the previous chunk */
    let carry = EMPTY
    while (!done && offset + carry.length < this.size) {
      const position = offset + carry.length
      const read = Fs.readSync(this.fd, chunk, 0, Math.min(chunk.length, this.size - position), position)
      if (read === 0) break
      const data = carry.length === 0 ? chunk.subarray(0, read) : Buffer.concat([carry, chunk.subarray(0, read)])
      let start = 0
      for (let newline = data.indexOf(NEWLINE); newline !== -1; newline = data.indexOf(NEWLINE, start)) {
        if (batch === null) {
          const head = parseTag(data, start, newline)
          batch = head.batch
          tag = Buffer.from(data.subarray(start, start + head.length))
          // an untagged line (not written by this spool) is a batch of its own
          done = head.length === 0
        } else if (newline - start < tag.length || data.compare(tag, 0, tag.length, start, start + tag.length) !== 0) {
          done = true
          break
        }
        payloads.push(data.toString("utf8", start + tag.length, newline))
        start = newline + 1
        if (done) break
      }
      offset += start
      // copied: `chunk` is reused by the next read
      carry = Buffer.from(data.subarray(start))
    }
    if (batch === null) return undefined
    if (this.open !== null && sameBatch(this.open.batch, batch)) this.open = null
    return { batch, payloads, end: offset }
  }

  /** Marks everything before `end` as replayed; empties the file when nothing is left. */
  commit(end: number, entries: number): void {
    this.cursor = Math.min(end, this.size)
    this.lines = Math.max(0, this.lines - entries)
    if (this.cursor >= this.size) this.reset()
    else this.writeCursor()
  }

  /** Flushes what was appended to disk. */
  sync(): void {
    if (this.fd >= 0) Fs.fsyncSync(this.fd)
  }

  /** Flushes to disk and closes; a later append reopens the file. */
  close(): void {
    if (this.fd < 0) return
    const fd = this.fd
    this.fd = -1
    syncAndClose(fd)
  }

  /** Appends `lines` lines of text as one write. */
  private write(text: string, lines: number): void {
    if (lines === 0) return
    this.ensureOpen()
    this.size += writeAll(this.fd, text, this.size)
    this.lines += lines
  }

  private ensureOpen(): void {
    if (this.fd < 0) this.fd = Fs.openSync(this.path, "a+")
  }

  private reset(): void {
    Fs.ftruncateSync(this.fd, 0)
    this.size = 0
    this.cursor = 0
    this.lines = 0
    Fs.rmSync(this.cursorPath, { force: true })
  }

  private writeCursor(): void {
    // write-then-rename: a crash leaves the old cursor or the new one, never a torn number
    const tmp = `${this.cursorPath}.tmp`
    Fs.writeFileSync(tmp, String(this.cursor))
    Fs.renameSync(tmp, this.cursorPath)
  }

  /** The end of the last complete line at or before `size`. */
  private lastNewlineEnd(size: number): number {
    if (size === 0) return 0
    const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK, size))
    for (let end = size; end > 0;) {
      const start = Math.max(0, end - buffer.length)
      const read = Fs.readSync(this.fd, buffer, 0, end - start, start)
      const at = buffer.subarray(0, read).lastIndexOf(NEWLINE)
      if (at !== -1) return start + at + 1
      end = start
    }
    return 0
  }
}
