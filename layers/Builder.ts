/**
 * The builder role: decision builder consumers (one consumer group across processes), the reclaimer, and the
 * analytics fibers (materialiser and detectors) that work on the decisions the builders commit, and the planner
 * statistics of the tables they write.
 */
import { Layer } from "effect"
import { BuilderWorkers } from "../src/builder/BuilderWorkers.ts"
import { ContentPolicies } from "../src/builder/ContentPolicies.ts"
import { ChainBackfill } from "../src/integrity/ChainBackfill.ts"
import { DecisionRetention } from "../src/integrity/DecisionRetention.ts"
import { PlannerStatistics } from "../src/store/PlannerStatistics.ts"
import { AnalyticsLive } from "./Analytics.ts"

/** The decision builder consumers and their reclaimer alone (tests that drive analytics themselves). */
export const DecisionBuildersLive = BuilderWorkers.pipe(Layer.provide(ContentPolicies.layer))

/** Decisions stored before chaining join their chains when the builder role starts. */
const ChainBackfillLive = ChainBackfill.atStart.pipe(Layer.provide(ChainBackfill.layer))

/**
 * Monthly partitions are made before any builder starts (an insert with no partition to land in would be refused as
 * bad data), then kept ahead, and expired ones dropped when LEDGER_RETENTION_DAYS is set.
 */
export const BuilderLive = Layer.mergeAll(DecisionBuildersLive, AnalyticsLive, PlannerStatistics.maintained, ChainBackfillLive).pipe(
  Layer.provide(DecisionRetention.maintained)
)
