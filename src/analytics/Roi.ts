/**
 * ROI of delivered work: the value of successful decisions — minutes a person would have spent on each, by intent,
 * at an hourly rate — over what the decisions cost. Defaults come from LedgerConfig (LEDGER_ROI_HOURLY_RATE_USD,
 * LEDGER_ROI_MINUTES_SAVED); a workspace may override either (`analytics_settings`). Every figure that enters the
 * result is in the result.
 */
import { Effect } from "effect"
import type { AnalyticsSettings } from "../config/LedgerConfig.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import type { Roi } from "./schema.ts"

export interface RoiSettings {
  readonly hourly_rate_usd: number
  readonly minutes_saved: Readonly<Record<string, number>>
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

/** The workspace's ROI settings: its overrides over the install defaults. */
export const workspaceRoiSettings = Effect.fnUntraced(function*(defaults: AnalyticsSettings) {
  const sql = yield* ScopedSql
  const [row] = yield* sql<{ hourly_rate_usd: number | null; minutes_saved: Record<string, number> }>`
    SELECT hourly_rate_usd, minutes_saved FROM analytics_settings`
  return {
    hourly_rate_usd: row?.hourly_rate_usd ?? defaults.roiHourlyRateUsd,
    minutes_saved: { ...defaults.roiMinutesSaved, ...row?.minutes_saved }
  } satisfies RoiSettings
})

export const computeRoi = (settings: RoiSettings, successesByIntent: Readonly<Record<string, number>>, costUsd: number): Roi => {
  const intents = Object.keys(successesByIntent).sort()
  const minutes = Object.fromEntries(intents.map((intent) => [intent, settings.minutes_saved[intent] ?? 0]))
  const savedMinutes = intents.reduce((sum, intent) => sum + successesByIntent[intent]! * minutes[intent]!, 0)
  const value = round((savedMinutes / 60) * settings.hourly_rate_usd, 4)
  const cost = round(costUsd, 6)
  return {
    roi: cost > 0 ? round(value / cost, 2) : null,
    value_usd: value,
    cost_usd: cost,
    hourly_rate_usd: settings.hourly_rate_usd,
    minutes_saved_by_intent: minutes,
    successful_decisions_by_intent: { ...successesByIntent },
    formula: "roi = value_usd / cost_usd; value_usd = Σ successful decisions × minutes_saved[intent] / 60 × hourly_rate_usd"
  }
}
