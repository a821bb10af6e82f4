/**
 * `DATABASE_URL` naming a PostgreSQL on the same machine by its Unix socket (`?host=<socket directory>`), as the
 * docs/operations.md recommends over loopback TCP: the command line migrates and reports over the socket.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import type { PipelineReport } from "../../src/ops/Status.ts"
import { testDatabase } from "../support/db.ts"
import { runLedger } from "./builder-harness.ts"

describe("DATABASE_URL over a Unix socket", () => {
  it.effect("the ledger migrates and reports over the server's socket", () =>
    Effect.gen(function*() {
      const { name, url } = yield* testDatabase
      const tcp = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
      // where this server puts its socket (Debian: /var/run/postgresql)
      const [setting] = yield* SqlClient.SqlClient.use((sql) => sql<{ dirs: string }>`SELECT current_setting('unix_socket_directories') AS dirs`).pipe(Effect.provide(tcp))
      const directory = setting!.dirs.split(",")[0]!.trim()
      const port = new URL(url).port || "5432"
      const socketUrl = `postgres://postgres@localhost/${name}?host=${encodeURIComponent(directory)}&port=${port}`

      const migrated = yield* runLedger(["migrate"], { DATABASE_URL: socketUrl })
      assert.strictEqual(migrated.code, 0, migrated.stderr)
      const status = yield* runLedger(["status", "--json"], { DATABASE_URL: socketUrl, REDIS_URL: "" })
      assert.strictEqual((JSON.parse(status.stdout) as PipelineReport).builders?.source, "database", status.stderr)

      // the connection really is the socket: a backend over one has no client address
      const [row] = yield* SqlClient.SqlClient.use((sql) =>
        sql<{ over_socket: boolean; migrations: number }>`
          SELECT inet_client_addr() IS NULL AS over_socket, (SELECT count(*)::int FROM ledger_migrations) AS migrations`
      ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(socketUrl), maxConnections: 1 })))
      assert.isTrue(row!.over_socket)
      assert.isAbove(row!.migrations, 20)
    }), 60_000)
})
