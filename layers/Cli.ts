/**
 * What the `ledger` command line's commands other than `serve` run on (src/main.ts). Each command opens what it needs
 * itself; `serve` builds its own layers (layers/Serve.ts), so no command shares a database handle with another. Beside
 * an embedded `serve`, `admin` runs inside it instead (src/ops/ServeControl.ts).
 */
import { Effect, Layer, Option } from "effect"
import { ContentPolicies } from "../src/builder/ContentPolicies.ts"
import { Rebuilder } from "../src/builder/Rebuild.ts"
import { CaptureShards } from "../src/capture/CaptureShards.ts"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"
import { Eraser } from "../src/integrity/Eraser.ts"
import { Exporter } from "../src/integrity/Exporter.ts"
import { Verifier } from "../src/integrity/Verifier.ts"
import { PipelineStatus } from "../src/ops/Status.ts"
import { InvalidSetting } from "../src/domain/errors.ts"
import { DatabaseLive, PgLive } from "../src/store/Database.ts"
import { TenantSql } from "../src/store/TenantSql.ts"
import { PlatformLive } from "./Platform.ts"
import { StoreLive } from "./Store.ts"

/** `migrate`: the database, migrated. */
export const MigrateLive = DatabaseLive.pipe(Layer.provide(PlatformLive))

/** `admin …`: the store (credentials, tenants). */
export const AdminLive = StoreLive.pipe(Layer.provideMerge(PlatformLive))

/**
 * `status` reads the shared Redis stream and the external database when they are configured, and the serving
 * process's /metrics for what lives inside it otherwise (in-process stream, embedded database). It never migrates.
 */
export const StatusLive = Layer.unwrap(LedgerConfig.useSync((config) =>
  PipelineStatus.layer.pipe(Layer.provide(Layer.mergeAll(
    Option.isSome(config.redisUrl) ? CaptureShards.redis : Layer.empty,
    Option.isSome(config.databaseUrl) ? TenantSql.layer.pipe(Layer.provide(PgLive)) : Layer.empty
  )))
)).pipe(Layer.provideMerge(PlatformLive))

/** `dlq …`: the dead letters live in Redis; without REDIS_URL they are inside the serving process (and lost with it). */
export const DlqLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* LedgerConfig
  if (Option.isNone(config.redisUrl)) {
    return yield* new InvalidSetting({
      message: "dlq needs REDIS_URL: without it the capture stream is in-process and its dead letters exist only inside the serving process"
    })
  }
  return CaptureShards.redis
})).pipe(Layer.provideMerge(PlatformLive))

/** `checkpoint`, `verify`, `export` and `erase`: the verifier, the exporter and the eraser on the store (which holds the integrity keys). */
export const IntegrityLive = Layer.mergeAll(Verifier.layer, Exporter.layer, Eraser.layer).pipe(Layer.provideMerge(StoreLive), Layer.provideMerge(PlatformLive))

/** `admin content-policy`: the policies on the store. */
export const ContentPolicyLive = ContentPolicies.layer.pipe(Layer.provideMerge(StoreLive), Layer.provideMerge(PlatformLive))

/** `rebuild`: the rebuilder on the store. */
export const RebuildLive = Rebuilder.layer.pipe(Layer.provide(StoreLive), Layer.provideMerge(PlatformLive))
