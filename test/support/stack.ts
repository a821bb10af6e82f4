/**
 * Layers for integration tests: the real store (migrated) on a fresh PostgreSQL database, or on embedded PGlite
 * in a temporary data directory — the same code path as production.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { StoreLive } from "../../layers/Store.ts"
import { IntegrityKeys } from "../../src/chain/IntegrityKeys.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { DatabaseLive } from "../../src/store/Database.ts"
import { PlannerStatistics } from "../../src/store/PlannerStatistics.ts"
import { TenantSql } from "../../src/store/TenantSql.ts"
import { LedgerConfig, type LedgerSettings } from "../../src/config/LedgerConfig.ts"
import { testDatabase } from "./db.ts"
import { testSettings } from "./settings.ts"

export type Backend = "postgres" | "pglite"

/** A temporary directory removed when the scope closes. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-test-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Settings pointing at a fresh database of the backend (dropped / deleted with the scope). */
export const backendSettings = (backend: Backend, overrides: Partial<LedgerSettings> = {}) =>
  Effect.gen(function*() {
    const dataDir = yield* tempDir
    const databaseUrl = backend === "postgres"
      ? Option.some(Redacted.make((yield* testDatabase).url))
      : Option.none<Redacted.Redacted>()
    return testSettings({ dataDir, databaseUrl, ...overrides })
  })

/** Config + store for a backend. */
export const storeLayer = (backend: Backend, overrides: Partial<LedgerSettings> = {}) =>
  Layer.unwrap(Effect.map(backendSettings(backend, overrides), (settings) =>
    StoreLive.pipe(Layer.provideMerge(LedgerConfig.layerFrom(settings)))
  ))

/** Like `storeLayer`, plus the owner's raw pool — only for tests that inspect what the pool sees. */
export const storeWithPoolLayer = (backend: Backend, overrides: Partial<LedgerSettings> = {}) =>
  Layer.unwrap(Effect.map(backendSettings(backend, overrides), (settings) =>
    Authenticator.layer.pipe(
      Layer.provideMerge(Credentials.layer),
      Layer.provideMerge(Layer.mergeAll(TenantSql.layer, PlannerStatistics.layer, IntegrityKeys.layer)),
      Layer.provideMerge(DatabaseLive),
      Layer.provideMerge(LedgerConfig.layerFrom(settings))
    )
  ))
