/**
 * The API role's routes: ops, REST `/v1` and `/docs`, MCP `/mcp` with OAuth, and the app. The read model they share is
 * provided once, here.
 */
import { Effect, Layer, Option } from "effect"
import { DocsRoute, RestRoutes } from "../src/api/RestRoutes.ts"
import { AppRoutes } from "../src/app/AppRoutes.ts"
import { McpRoutesLive } from "../src/mcp/McpRoutes.ts"
import { OpsRoutes } from "../src/serving/Health.ts"
import { CursorSecret } from "../src/query/cursor.ts"
import { ReadModelLive } from "../src/query/ReadModel.ts"
import { ReadReplicaPool } from "../src/store/Database.ts"
import { TenantSql } from "../src/store/TenantSql.ts"
import { AnalyticsQueryLive } from "./Analytics.ts"

/** The read models, on the read replica's pool when DATABASE_READ_URL names one (else on the store's TenantSql). */
const ReadModelsLive = Layer.unwrap(Effect.map(ReadReplicaPool, (replica) => {
  const readModels = Layer.mergeAll(ReadModelLive, AnalyticsQueryLive)
  return Option.match(replica, {
    onNone: () => readModels,
    // fresh: the same layer value elsewhere in the graph (the store's TenantSql) would otherwise be shared
    onSome: (pool) => readModels.pipe(Layer.provide(Layer.fresh(TenantSql.layer).pipe(Layer.provide(pool))))
  })
}))

export const ApiRoutesLive = Layer.mergeAll(
  OpsRoutes,
  RestRoutes,
  DocsRoute,
  McpRoutesLive,
  AppRoutes
).pipe(
  Layer.provide(ReadModelsLive),
  // the cursor secret is written once per install: on the owner's pool
  Layer.provide(CursorSecret.layer)
)
