/**
 * The API role's routes: ops, REST `/v1` and `/docs`, MCP `/mcp` with OAuth, and the app. The read model they share is
 * provided once, here.
 */
import { Layer } from "effect"
import { DocsRoute, RestRoutes } from "../src/api/RestRoutes.ts"
import { AppRoutes } from "../src/app/AppRoutes.ts"
import { McpRoutesLive } from "../src/mcp/McpRoutes.ts"
import { OpsRoutes } from "../src/ops/Health.ts"
import { LedgerQueryLive } from "../src/query/ReadModel.ts"
import { AnalyticsQueryLive } from "./Analytics.ts"

export const ApiRoutesLive = Layer.mergeAll(
  OpsRoutes,
  RestRoutes,
  DocsRoute,
  McpRoutesLive,
  AppRoutes
).pipe(Layer.provide(Layer.mergeAll(LedgerQueryLive, AnalyticsQueryLive)))
