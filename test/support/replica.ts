/**
 * A PostgreSQL primary and its streaming replica, both of their own, on free loopback ports, for tests of
 * `DATABASE_READ_URL`. The local server cannot be given a replica (its pg_hba has no replication entry, and tests
 * leave the machine's services as they are), so this cluster is made with that server's own binaries: `initdb`,
 * `pg_basebackup -R` and `pg_ctl`, run as the `postgres` user when the tests run as root. Both servers are stopped
 * and their directory deleted with the scope.
 *
 *   const cluster = yield* replicaCluster
 *   cluster.primaryUrl, cluster.replicaUrl, yield* cluster.caughtUp, cluster.pauseReplay / resumeReplay
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, Schedule, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { ADMIN_URL } from "./db.ts"
import { freePort } from "./ports.ts"

export interface ReplicaCluster {
  readonly primaryUrl: string
  readonly replicaUrl: string
  /** Waits until the replica has replayed everything the primary had written when it was called. */
  readonly caughtUp: Effect.Effect<void>
  /** Stops / restarts the replica's replay: what the primary writes meanwhile is not visible on the replica. */
  readonly pauseReplay: Effect.Effect<void>
  readonly resumeReplay: Effect.Effect<void>
  /** Runs a query on the replica (as the superuser, application name `ledger-test`). */
  readonly onReplica: <A extends object>(query: string) => Effect.Effect<ReadonlyArray<A>>
}

const asRoot = process.getuid?.() === 0

/**
 * Runs one of the server's programs, as `postgres` when this process is root (the server refuses root). From the
 * temporary directory: the checkout the tests run in may be closed to `postgres` (a clone in `mktemp -d`), and
 * `pg_ctl` will not start a server from a directory it cannot enter.
 */
const run = (program: string, args: ReadonlyArray<string>) => {
  const [command, ...rest] = asRoot ? ["runuser", "-u", "postgres", "--", program, ...args] : [program, ...args]
  ChildProcess.execFileSync(command!, rest, { stdio: "pipe", timeout: 60_000, cwd: Os.tmpdir() })
}

/** The directory of the local server's programs (pg_config's BINDIR, read through the admin connection). */
const serverBinaries = PgClient.PgClient.use((sql) => sql<{ setting: string }>`SELECT setting FROM pg_config WHERE name = 'BINDIR'`).pipe(
  Effect.provide(PgClient.layer({ url: Redacted.make(ADMIN_URL), maxConnections: 1 })),
  Effect.map((rows) => rows[0]!.setting),
  Effect.orDie
)

const urlOf = (port: number) => `postgres://postgres@127.0.0.1:${port}/postgres`

/** Queries a server of the cluster on a connection of its own. */
const query = <A extends object>(url: string, text: string) =>
  PgClient.PgClient.use((sql) => sql.unsafe<A>(text)).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1, applicationName: "ledger-test" })),
    Effect.orDie
  )

export const replicaCluster: Effect.Effect<ReplicaCluster, never, Scope.Scope> = Effect.gen(function*() {
  const bin = yield* serverBinaries
  const [primaryPort, replicaPort] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-replica-"))
      Fs.chmodSync(dir, 0o755)
      if (asRoot) {
        const id = (flag: string) => Number(ChildProcess.execFileSync("id", [flag, "postgres"]).toString().trim())
        Fs.chownSync(dir, id("-u"), id("-g"))
      }
      return dir
    }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const server = (name: string, port: number) =>
    Effect.acquireRelease(
      Effect.sync(() =>
        run(Path.join(bin, "pg_ctl"), [
          "-D", Path.join(dir, name), "-l", Path.join(dir, `${name}.log`), "-w", "-t", "60",
          "-o", `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c shared_buffers=16MB`, "start"
        ])
      ),
      () => Effect.sync(() => run(Path.join(bin, "pg_ctl"), ["-D", Path.join(dir, name), "-m", "immediate", "-w", "stop"])).pipe(Effect.ignore)
    )

  // the primary: initdb's pg_hba trusts local and loopback connections, replication included
  yield* Effect.sync(() => run(Path.join(bin, "initdb"), ["-D", Path.join(dir, "primary"), "-U", "postgres", "--auth=trust", "--no-sync"]))
  yield* server("primary", primaryPort)
  // the replica: a base backup that starts as a standby of the primary (-R writes primary_conninfo and standby.signal)
  yield* Effect.sync(() =>
    run(Path.join(bin, "pg_basebackup"), [
      "-h", "127.0.0.1", "-p", String(primaryPort), "-U", "postgres", "-D", Path.join(dir, "replica"), "-R", "-X", "stream", "-c", "fast", "--no-sync"
    ])
  )
  yield* server("replica", replicaPort)

  const primaryUrl = urlOf(primaryPort)
  const replicaUrl = urlOf(replicaPort)
  const caughtUp = Effect.gen(function*() {
    const [{ lsn }] = yield* query<{ lsn: string }>(primaryUrl, "SELECT pg_current_wal_lsn()::text AS lsn") as Effect.Effect<[{ lsn: string }]>
    yield* query<{ done: boolean }>(replicaUrl, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`).pipe(
      Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (rows) => rows[0]?.done === true, times: 400 })
    )
  })
  return {
    primaryUrl,
    replicaUrl,
    caughtUp,
    pauseReplay: Effect.asVoid(query(replicaUrl, "SELECT pg_wal_replay_pause()")),
    resumeReplay: Effect.asVoid(query(replicaUrl, "SELECT pg_wal_replay_resume()")),
    onReplica: (text) => query(replicaUrl, text)
  }
})
