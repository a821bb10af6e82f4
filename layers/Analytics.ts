/**
 * Analytics (src/analytics). `AnalyticsLive`: the materialiser, detector and (with an embeddings model) embedder fibers — compose it into the builder
 * role, next to the decision builders (one process or many: they split workspaces with advisory locks).
 * `AnalyticsQueryLive`: the read model behind the analytics MCP tools — compose it into the API role.
 */
import { Layer } from "effect"
import { AnalyticsQuery } from "../src/analytics/AnalyticsQuery.ts"
import { Detectors } from "../src/analytics/Detectors.ts"
import { Embedder } from "../src/analytics/Embedder.ts"
import { Materializer } from "../src/analytics/Materializer.ts"
import { ModelCalls } from "../src/analytics/ModelCalls.ts"

export const AnalyticsLive = Layer.mergeAll(Materializer.fiber, Detectors.fiber, Embedder.fiber).pipe(
  Layer.provideMerge(Layer.mergeAll(Materializer.layer, Detectors.layer, Embedder.layer)),
  Layer.provide(ModelCalls.layer)
)

export const AnalyticsQueryLive = AnalyticsQuery.layer.pipe(Layer.provide(ModelCalls.layer))
