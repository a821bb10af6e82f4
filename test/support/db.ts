/**
 * A database of its own for each test suite on the local PostgreSQL (TEST_DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres): created before, dropped after — never a mock.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as Crypto from "node:crypto"

export const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const adminClient = PgClient.layer({ url: Redacted.make(ADMIN_URL), maxConnections: 1 })

const withAdmin = <A, E>(f: (sql: PgClient.PgClient) => Effect.Effect<A, E>) =>
  PgClient.PgClient.use(f).pipe(Effect.provide(adminClient))

/** Creates a fresh database; yields its URL and drops it (with its connections) when the scope closes. */
export const testDatabase = Effect.acquireRelease(
  Effect.gen(function*() {
    const name = `ledger_test_${Crypto.randomBytes(5).toString("hex")}`
    yield* withAdmin((sql) => sql.unsafe(`CREATE DATABASE ${name}`))
    const url = new URL(ADMIN_URL)
    url.pathname = `/${name}`
    return { name, url: url.toString() }
  }),
  ({ name }) => withAdmin((sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).pipe(Effect.ignore)
)
