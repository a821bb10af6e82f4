/**
 * The builder role: decision builder consumers (one consumer group across processes), the reclaimer, and the
 * analytics fibers (materialiser and detectors) that work on the decisions the builders commit.
 */
import { Layer } from "effect"
import { BuilderWorkers, DecisionBuilder } from "../src/builder/DecisionBuilder.ts"
import { AnalyticsLive } from "./Analytics.ts"

export const BuilderLive = Layer.mergeAll(BuilderWorkers.pipe(Layer.provide(DecisionBuilder.layer)), AnalyticsLive)
