/**
 * The transcripts the watcher follows: found under the directories named (Claude Code's `*.jsonl`, Codex's
 * `rollout-*.jsonl`), read as they grow, line by line, through a reader per file — and, per file, the position up to
 * which every turn it completed has been taken by the service, kept in a small state file so a restart resumes there.
 *
 * - A line still being written (no newline yet) is left for the next read; a corrupt line is skipped and counted.
 * - A file replaced or cut shorter than what was read is read again from its start; a file deleted is forgotten.
 * - After a restart, or when a file that had gone quiet grows again, it is read from its start (a turn's request is
 *   the conversation before it) and only turns completing past its position are sent.
 * - Readers of files quiet for a while are dropped, so memory follows the sessions under way, not the history.
 *
 * Synchronous reads: the watcher has nothing else to do meanwhile, and a read is a page-cache copy.
 */
import { Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { WatchedClient } from "../domain/capture.ts"
import { ClaudeCodeTranscript } from "./claudeCode.ts"
import { CodexRollout } from "./codex.ts"
import { ReadTurn } from "../domain/transcript.ts"
import type { SkippedLines, TranscriptReader } from "./transcript.ts"

/** A file whose last write is older than this is taken as finished for now: its waiting turns are complete. */
export const QUIET_MS = 5_000
/** A reader is dropped after its file has been quiet this long (it is rebuilt from the file if it grows). */
const DROP_READER_AFTER_MS = 10 * 60_000
/** How much of a file is read at a time. */
const CHUNK_BYTES = 4 * 1024 * 1024
/** How deep under a root transcripts are looked for (Codex: YYYY/MM/DD; Claude Code: project/session/subagents). */
const MAX_DEPTH = 6

export interface Root {
  readonly client: WatchedClient
  readonly dir: string
}

/** A turn read, and where in which file it completed. */
export interface FoundTurn {
  readonly turn: ReadTurn
  readonly path: string
  readonly completedAt: number
}

export interface FileCounts extends SkippedLines {
  /** turns read that the service would refuse (an id too long, a field out of shape): not sent */
  invalid: number
  /** files being followed */
  files: number
  /** files replaced or cut shorter than what was read, read again from the start */
  restarted: number
  /** files deleted while followed */
  deleted: number
  /** files ending in a line still without its newline at the last read */
  partial: number
}

interface Followed {
  readonly client: WatchedClient
  readonly dev: number
  readonly ino: number
  /** every turn completing at or before this offset has been taken by the service */
  committed: number
  /** where the turns found and not yet taken completed, in order */
  readonly unsent: Array<number>
  reader: TranscriptReader | undefined
  /** offset of the first byte not yet read into the reader (the start of a line) */
  readTo: number
  /** the reader has been told the file went quiet at `readTo` */
  quietAt: number | undefined
  lastGrowth: number
  skipped: SkippedLines
}

interface SavedFile {
  readonly dev: number
  readonly ino: number
  /** every turn completing at or before this offset has been taken by the service */
  readonly offset: number
  /** the file was read to here, quiet, with nothing left to send: unchanged, it need not be read again */
  readonly settled?: number
}

interface StateFile {
  readonly version: 1
  readonly files: Record<string, SavedFile>
}

const isReadTurn = Schema.is(ReadTurn)

const readerFor = (client: WatchedClient): TranscriptReader => (client === "claude-code" ? new ClaudeCodeTranscript() : new CodexRollout())

const isTranscript = (client: WatchedClient, name: string) =>
  name.endsWith(".jsonl") && (client === "claude-code" || name.startsWith("rollout-"))

/** The transcripts under a root, depth-first; a directory that cannot be read is passed over. */
const listTranscripts = (root: Root): Array<string> => {
  const found: Array<string> = []
  const walk = (dir: string, depth: number) => {
    let entries: Array<Fs.Dirent>
    try {
      entries = Fs.readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      const path = Path.join(dir, entry.name)
      if (entry.isDirectory() && depth < MAX_DEPTH) walk(path, depth + 1)
      else if (entry.isFile() && isTranscript(root.client, entry.name)) found.push(path)
    }
  }
  walk(root.dir, 0)
  return found
}

export class TranscriptFiles {
  private readonly roots: ReadonlyArray<Root>
  private readonly statePath: string
  private readonly followed = new Map<string, Followed>()
  private readonly saved: StateFile["files"]
  /** counts of what is gone (deleted files' skipped lines stay counted) */
  private readonly gone: FileCounts = { files: 0, restarted: 0, deleted: 0, partial: 0, corrupt: 0, unknown: 0, invalid: 0 }

  constructor(roots: ReadonlyArray<Root>, statePath: string) {
    this.roots = roots
    this.statePath = statePath
    this.saved = TranscriptFiles.load(statePath)
  }

  private static load(statePath: string): StateFile["files"] {
    try {
      const state = JSON.parse(Fs.readFileSync(statePath, "utf8")) as Partial<StateFile>
      return state.version === 1 && typeof state.files === "object" && state.files !== null ? { ...state.files } : {}
    } catch {
      return {}
    }
  }

  /**
   * Reads what the transcripts added since the last scan, up to `limit` turns (the rest stays on disk for the next
   * scan), and returns the turns that completed. `now` decides which files have gone quiet.
   */
  scan(now: number, limit: number): Array<FoundTurn> {
    const turns: Array<FoundTurn> = []
    const seen = new Set<string>()
    for (const root of this.roots) {
      for (const path of listTranscripts(root)) {
        seen.add(path)
        if (turns.length < limit) this.readFile(path, root.client, now, turns, limit)
      }
    }
    for (const [path, file] of this.followed) {
      if (seen.has(path)) continue
      this.followed.delete(path)
      delete this.saved[path]
      this.gone.deleted++
      this.gone.corrupt += file.skipped.corrupt
      this.gone.unknown += file.skipped.unknown
    }
    return turns
  }

  /** The service has taken these turns (accepted, or refused for good): they are not sent again. */
  taken(turns: ReadonlyArray<FoundTurn>): void {
    for (const { path, completedAt } of turns) {
      const file = this.followed.get(path)
      if (file === undefined) continue
      const at = file.unsent.indexOf(completedAt)
      if (at !== -1) file.unsent.splice(at, 1)
      // turns are taken in the order they were found: nothing before it is still unsent
      if (completedAt > file.committed && (file.unsent.length === 0 || file.unsent[0]! > completedAt)) file.committed = completedAt
    }
  }

  /** Writes the state file (atomically: a crash leaves the old one or the new one). */
  save(): void {
    for (const [path, file] of this.followed) {
      const settled = file.unsent.length === 0 && file.quietAt !== undefined && file.quietAt === file.readTo
      this.saved[path] = { dev: file.dev, ino: file.ino, offset: file.committed, ...(settled ? { settled: file.readTo } : {}) }
    }
    const temporary = `${this.statePath}.${process.pid}.tmp`
    Fs.mkdirSync(Path.dirname(this.statePath), { recursive: true })
    Fs.writeFileSync(temporary, JSON.stringify({ version: 1, files: this.saved } satisfies StateFile), { mode: 0o600 })
    Fs.renameSync(temporary, this.statePath)
  }

  get counts(): FileCounts {
    const counts = { ...this.gone, files: this.followed.size, partial: 0 }
    for (const [path, file] of this.followed) {
      counts.corrupt += file.skipped.corrupt
      counts.unknown += file.skipped.unknown
      try {
        if (Fs.statSync(path).size > file.readTo && file.quietAt !== undefined) counts.partial++
      } catch {
        // gone since: counted at the next scan
      }
    }
    return counts
  }

  private readFile(path: string, client: WatchedClient, now: number, turns: Array<FoundTurn>, limit: number): void {
    let stat: Fs.Stats
    try {
      stat = Fs.statSync(path)
    } catch {
      return
    }
    let file = this.followed.get(path)
    if (file !== undefined && (file.dev !== stat.dev || file.ino !== stat.ino || stat.size < file.readTo)) {
      // replaced, or cut shorter than what was read: its turns so far are not this file's
      this.gone.restarted++
      this.followed.delete(path)
      delete this.saved[path]
      file = undefined
    }
    if (file === undefined) {
      const saved = this.saved[path]
      const same = saved !== undefined && saved.dev === stat.dev && saved.ino === stat.ino && saved.offset <= stat.size
      // settled and unchanged since: nothing to read until it grows
      const settled = same && saved.settled === stat.size ? stat.size : undefined
      file = {
        client,
        dev: stat.dev,
        ino: stat.ino,
        committed: same ? saved.offset : 0,
        unsent: [],
        reader: undefined,
        readTo: settled ?? 0,
        quietAt: settled,
        lastGrowth: stat.mtimeMs,
        skipped: { corrupt: 0, unknown: 0 }
      }
      this.followed.set(path, file)
    }
    const quiet = now - stat.mtimeMs >= QUIET_MS
    if (stat.size === file.readTo) {
      if (file.reader !== undefined && quiet && file.quietAt !== file.readTo) {
        file.quietAt = file.readTo
        this.found(path, file, file.reader.idle(file.readTo), turns)
      }
      if (file.reader !== undefined && now - file.lastGrowth > DROP_READER_AFTER_MS) this.dropReader(file)
      return
    }
    if (file.reader === undefined) {
      // (re)built from the start: the turns need the conversation before them
      file.reader = readerFor(client)
      file.readTo = 0
      file.skipped = file.reader.skipped
    }
    file.lastGrowth = now
    file.quietAt = undefined
    const fd = Fs.openSync(path, "r")
    try {
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES)
      while (file.readTo < stat.size && turns.length < limit) {
        const length = Fs.readSync(fd, buffer, 0, Math.min(CHUNK_BYTES, stat.size - file.readTo), file.readTo)
        if (length === 0) break
        const lastNewline = buffer.lastIndexOf(0x0a, length - 1)
        if (lastNewline === -1) {
          // a line longer than a chunk, or one still being written: wait for its end (read whole next time)
          if (length === CHUNK_BYTES) this.readLongLine(fd, path, file, stat.size, turns)
          break
        }
        let start = 0
        while (start <= lastNewline) {
          const newline = buffer.indexOf(0x0a, start)
          const end = file.readTo + newline + 1
          if (newline > start) this.found(path, file, file.reader!.line(buffer.toString("utf8", start, newline), end), turns)
          start = newline + 1
        }
        file.readTo += lastNewline + 1
      }
    } finally {
      Fs.closeSync(fd)
    }
    if (quiet && file.readTo === stat.size) {
      file.quietAt = file.readTo
      this.found(path, file, file.reader.idle(file.readTo), turns)
    }
  }

  /** A line longer than a chunk (an image pasted into a prompt): read whole, if its end is there. */
  private readLongLine(fd: number, path: string, file: Followed, size: number, turns: Array<FoundTurn>): void {
    const rest = Buffer.allocUnsafe(size - file.readTo)
    const length = Fs.readSync(fd, rest, 0, rest.length, file.readTo)
    const newline = rest.subarray(0, length).indexOf(0x0a)
    if (newline === -1) return
    const end = file.readTo + newline + 1
    this.found(path, file, file.reader!.line(rest.toString("utf8", 0, newline), end), turns)
    file.readTo = end
  }

  private found(path: string, file: Followed, completed: ReadonlyArray<{ readonly turn: ReadTurn; readonly completedAt: number }>, turns: Array<FoundTurn>): void {
    for (const { turn, completedAt } of completed) {
      // what completes at or before `committed` was taken by the service before a restart
      if (completedAt <= file.committed) continue
      if (!isReadTurn(turn)) {
        this.gone.invalid++
        continue
      }
      file.unsent.push(completedAt)
      turns.push({ turn, path, completedAt })
    }
  }

  /** Lets go of a quiet file's reader (its conversation); it is read again from the start if the file grows. */
  private dropReader(file: Followed): void {
    if (file.unsent.length > 0) return
    file.reader = undefined
    this.gone.corrupt += file.skipped.corrupt
    this.gone.unknown += file.skipped.unknown
    file.skipped = { corrupt: 0, unknown: 0 }
  }
}
