/**
 * One process at a time on a data directory's embedded database: PGlite has no lock of its own, and two processes on
 * one directory lose each other's writes or abort inside it. Whoever opens it holds `<dataDir>/ledger.lock` (mode
 * 0600) while it runs: the holder's pid and command, and for `ledger serve` the endpoint the command line's
 * `admin` commands reach it on (src/ops/ServeControl.ts). A lock whose holder is gone is taken over.
 */
import { Effect, Option, Schema } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** Where `ledger serve` runs the command line's `admin` commands, and the secret they must present. */
export interface ControlEndpoint {
  readonly port: number
  readonly secret: string
}

export interface LockHolder {
  readonly pid: number
  /** e.g. `ledger serve` */
  readonly command: string
  readonly control?: ControlEndpoint
}

interface LockRecord extends LockHolder {
  readonly nonce: string
  /** the kernel's boot and the process's start time, when /proc tells them: a pid alone may be reused */
  readonly boot?: string
  readonly started?: string
}

export class DataDirBusy extends Schema.TaggedError<DataDirBusy>()("DataDirBusy", {
  dataDir: Schema.String,
  message: Schema.String
}) {}

/** The one-line refusal for a command that needs the directory `holder` has. */
const busy = (dataDir: string, holder: LockHolder) =>
  new DataDirBusy({
    dataDir,
    message: holder.command === "ledger serve"
      ? `ledger serve (pid ${holder.pid}) holds the data directory ${dataDir}: stop it first (only \`ledger admin\` commands run beside it)`
      : `${holder.command} (pid ${holder.pid}) holds the data directory ${dataDir}: wait for it to end`
  })

export const lockPath = (dataDir: string) => Path.join(dataDir, "ledger.lock")

/** The locks this process holds, by path: a lock naming this pid that is not here was left by an earlier process. */
const held = new Map<string, LockRecord>()

const readProc = (file: string) => {
  try {
    return Fs.readFileSync(file, "utf8").trim()
  } catch {
    return undefined
  }
}

const bootId = () => readProc("/proc/sys/kernel/random/boot_id")

/** Field 22 of /proc/PID/stat; the command name before it may hold spaces and parentheses. */
const startTime = (pid: number) => {
  const stat = readProc(`/proc/${pid}/stat`)
  return stat?.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
}

const commandLine = () => {
  const entry = Path.basename(process.argv[1] ?? "node")
  if (!entry.startsWith("ledger")) return entry
  const words = process.argv.slice(2)
  const end = words.findIndex((word) => word.startsWith("-"))
  return ["ledger", ...(end < 0 ? words : words.slice(0, end)).slice(0, 3)].join(" ")
}

const alive = (path: string, record: LockRecord) => {
  if (record.pid === process.pid) return held.get(path)?.nonce === record.nonce
  try {
    process.kill(record.pid, 0)
  } catch (error) {
    // EPERM: alive, someone else's
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
  }
  if (record.boot !== undefined && bootId() !== undefined && record.boot !== bootId()) return false
  const started = startTime(record.pid)
  return record.started === undefined || started === undefined || record.started === started
}

const readRecord = (path: string): Option.Option<LockRecord> => {
  try {
    const record = JSON.parse(Fs.readFileSync(path, "utf8")) as LockRecord
    return Number.isInteger(record.pid) && typeof record.nonce === "string" ? Option.some(record) : Option.none()
  } catch {
    return Option.none()
  }
}

/** Writes `record` to a file of its own beside `path` (0600, complete before anyone can see it at `path`). */
const writeTemp = (path: string, record: LockRecord) => {
  const temp = `${path}.${record.nonce}.${Crypto.randomBytes(4).toString("hex")}`
  Fs.writeFileSync(temp, JSON.stringify(record) + "\n", { mode: 0o600 })
  return temp
}

const removeQuietly = (file: string) => Fs.rmSync(file, { force: true })

/**
 * Moves a lock judged stale out of the way. Only a file that still holds what was judged is removed: another process
 * may have taken the lock over meanwhile, and its lock is put back.
 */
const clearStale = (path: string, judged: Option.Option<LockRecord>) => {
  const aside = `${path}.stale.${Crypto.randomBytes(8).toString("hex")}`
  try {
    Fs.renameSync(path, aside)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return
    throw error
  }
  const moved = readRecord(aside)
  const same = Option.isNone(judged) ? Option.isNone(moved) : Option.isSome(moved) && moved.value.nonce === judged.value.nonce
  if (!same) {
    try {
      Fs.linkSync(aside, path)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
  }
  removeQuietly(aside)
}

/** The live process holding the directory, if any. */
export const holder = (dataDir: string): Effect.Effect<Option.Option<LockHolder>> =>
  Effect.sync(() => {
    const path = lockPath(dataDir)
    return Option.filter(readRecord(path), (record) => alive(path, record))
  })

/** Holds the directory for the scope's lifetime, or fails at once with who holds it. */
export const lockDataDir = Effect.fn("DataDirLock.lock")(function*(dataDir: string) {
  const path = lockPath(dataDir)
  const mine = yield* Effect.try({
    try: () => {
      Fs.mkdirSync(dataDir, { recursive: true })
      const record: LockRecord = {
        pid: process.pid,
        command: commandLine(),
        nonce: Crypto.randomBytes(16).toString("hex"),
        boot: bootId(),
        started: startTime(process.pid)
      }
      const temp = writeTemp(path, record)
      try {
        // a few rounds: each either takes the lock, finds it live, or clears a stale one
        for (let round = 0; round < 5; round++) {
          try {
            Fs.linkSync(temp, path)
            held.set(path, record)
            return Option.some(record)
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
          }
          const existing = readRecord(path)
          if (Option.isSome(existing) && alive(path, existing.value)) throw busy(dataDir, existing.value)
          clearStale(path, existing)
        }
        return Option.none<LockRecord>()
      } finally {
        removeQuietly(temp)
      }
    },
    catch: (error) =>
      error instanceof DataDirBusy
        ? error
        : new DataDirBusy({ dataDir, message: `cannot lock the data directory ${dataDir}: ${(error as Error).message}` })
  })
  if (Option.isNone(mine)) {
    return yield* new DataDirBusy({ dataDir, message: `cannot lock the data directory ${dataDir}: other processes keep taking it` })
  }
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      held.delete(path)
      if (Option.exists(readRecord(path), (record) => record.nonce === mine.value.nonce)) removeQuietly(path)
    })
  )
})

/** Publishes this process's control endpoint in the lock it holds on `dataDir`. */
export const advertiseControl = Effect.fn("DataDirLock.advertiseControl")(function*(dataDir: string, control: ControlEndpoint) {
  const path = lockPath(dataDir)
  const record = held.get(path)
  if (record === undefined) return yield* Effect.die(new Error(`this process does not hold the data directory ${dataDir}`))
  yield* Effect.sync(() => {
    const next = { ...record, control }
    Fs.renameSync(writeTemp(path, next), path)
    held.set(path, next)
  })
})
