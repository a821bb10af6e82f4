/**
 * The data directory's lock (src/store/DataDirLock.ts): one process at a time on the embedded database. A live holder
 * refuses the next one in one line; a lock whose holder is gone (dead pid, a pid reused by another process, this pid
 * in an earlier life, a torn file) is taken over; the holder's control endpoint is published in the lock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { advertiseControl, holder, lockDataDir, lockPath } from "../../src/store/DataDirLock.ts"
import { tempDir } from "../support/stack.ts"

const writeLock = (dir: string, record: object) => Fs.writeFileSync(lockPath(dir), JSON.stringify(record))

const failureMessage = (exit: Exit.Exit<unknown, { readonly message: string }>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Option.map(Exit.findErrorOption(exit), (error) => error.message)) : undefined

/** A process that lives for the scope. */
const otherProcess = Effect.acquireRelease(
  Effect.sync(() => ChildProcess.spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], { stdio: "ignore" })),
  (child) => Effect.sync(() => child.kill("SIGKILL"))
)

const exitedPid = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, ["-e", ""], { stdio: "ignore" })
    child.once("exit", () => resolve(child.pid!))
  })
)

describe("DataDirLock", () => {
  it.effect("a live holder refuses the next one at once, and lets the directory go when its scope ends", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      yield* Effect.scoped(Effect.gen(function*() {
        yield* lockDataDir(dir)
        assert.strictEqual(Fs.statSync(lockPath(dir)).mode & 0o777, 0o600)
        assert.strictEqual(Option.getOrThrow(yield* holder(dir)).pid, process.pid)
        const again = yield* Effect.exit(Effect.scoped(lockDataDir(dir)))
        assert.match(failureMessage(again) ?? "", /\(pid \d+\) holds the data directory /)

        yield* advertiseControl(dir, { port: 4321, secret: "s" })
        assert.deepStrictEqual(Option.getOrThrow(yield* holder(dir)).control, { port: 4321, secret: "s" })
      }))
      assert.isFalse(Fs.existsSync(lockPath(dir)))
      assert.isTrue(Option.isNone(yield* holder(dir)))
    }))

  it.effect("names a live `ledger serve` and tells what to do", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const other = yield* otherProcess
      writeLock(dir, { pid: other.pid, command: "ledger serve", nonce: "n" })
      const refused = yield* Effect.exit(Effect.scoped(lockDataDir(dir)))
      assert.strictEqual(
        failureMessage(refused),
        `ledger serve (pid ${other.pid}) holds the data directory ${dir}: stop it first (only \`ledger admin\` commands run beside it)`
      )
      assert.strictEqual(JSON.parse(Fs.readFileSync(lockPath(dir), "utf8")).pid, other.pid, "the holder's lock is left alone")
    }))

  it.effect("takes over a lock whose holder is gone", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const other = yield* otherProcess
      const stale = [
        { pid: yield* exitedPid, command: "ledger serve", nonce: "dead" },
        // the pid now belongs to a process that started at another time
        { pid: other.pid, command: "ledger serve", nonce: "reused", started: "1" },
        // this very pid, in an earlier life (a container's pid 1 after a restart)
        { pid: process.pid, command: "ledger serve", nonce: "earlier" },
        { torn: true }
      ]
      for (const record of stale) {
        writeLock(dir, record)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* lockDataDir(dir)
          assert.strictEqual(Option.getOrThrow(yield* holder(dir)).pid, process.pid, JSON.stringify(record))
        }))
      }
      assert.deepStrictEqual(Fs.readdirSync(dir), [], "nothing left beside it")
    }))
})
