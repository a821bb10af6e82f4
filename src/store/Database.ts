/**
 * The database connection: PostgreSQL from `DATABASE_URL`, or — when it is unset — embedded PGlite in the data
 * directory, served over a loopback socket to the same `@effect/sql-pg` client, so both run one code path.
 *
 * This layer provides the owner's pool. Only the store itself (migrations, the tenant-scoped client, the
 * control-plane repositories) is built on it; the query and builder code receives `TenantSql` instead.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { lockDataDir } from "./DataDirLock.ts"
import { migrations } from "./migrations/index.ts"

/**
 * Starts PGlite with its socket server for the lifetime of the scope, holding the data directory's lock (a second
 * process on the directory fails at once, DataDirLock.ts); yields the port it listens on.
 */
const startEmbedded = (dataDir: string) =>
  lockDataDir(dataDir).pipe(Effect.andThen(Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const dir = Path.join(dataDir, "pgdata")
      Fs.mkdirSync(dir, { recursive: true })
      const db = await PGlite.create(dir)
      // one connection: PGlite is a single backend, and the socket server interleaves the extended-protocol
      // messages of concurrent connections (another connection's Bind clobbers the unnamed portal)
      const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 })
      await server.start()
      const port = Number(server.getServerConn().split(":").pop())
      return { db, server, port }
    }),
    ({ db, server }) => Effect.promise(async () => {
      await server.stop()
      await db.close()
    })
  )), Effect.withSpan("Database.startEmbedded"))

/** The owner's PgClient (and SqlClient), embedded or external by configuration. */
export const PgLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* LedgerConfig
  if (Option.isSome(config.databaseUrl)) {
    return PgClient.layer({ url: config.databaseUrl.value, maxConnections: config.databasePoolSize, applicationName: "ledger" })
  }
  return Layer.unwrap(Effect.gen(function*() {
    const embedded = yield* startEmbedded(config.dataDir)
    yield* Effect.logInfo("embedded PostgreSQL (PGlite) started").pipe(
      Effect.annotateLogs({ data_dir: config.dataDir })
    )
    return PgClient.layer({
      host: "127.0.0.1",
      port: embedded.port,
      username: "postgres",
      database: "postgres",
      password: Redacted.make(""),
      // queries queue in the pool instead (see startEmbedded)
      maxConnections: 1,
      applicationName: "ledger"
    })
  }))
}))

/**
 * The pool of the API's reads: a streaming replica (`DATABASE_READ_URL`), or none when there is no replica. Only the
 * read model is built on it (layers/Api.ts); writers, authentication, the builders and the command line keep the
 * owner's pool, so nothing that writes decides from a replica's lagging state, and nothing migrates the replica.
 */
export const ReadReplicaPool = LedgerConfig.useSync((config) =>
  Option.map(config.databaseReadUrl, (url) =>
    PgClient.layer({ url, maxConnections: config.databasePoolSize, applicationName: "ledger-read" })
  )
)

/** Applies pending migrations (idempotent: the migrator records what ran). */
export const migrate = PgMigrator.run({ loader: PgMigrator.fromRecord(migrations), table: "ledger_migrations" }).pipe(
  Effect.provide(NodeServices.layer),
  Effect.withSpan("Database.migrate")
)

/** The owner's client with migrations applied before anything uses it. */
export const DatabaseLive = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(PgLive))
