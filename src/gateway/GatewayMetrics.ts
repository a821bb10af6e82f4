/**
 * Gateway metrics (docs/ARCHITECTURE.md, "Surfaces"): requests and latency per route, and the gateway's own overhead
 * (time spent outside the provider call). Updated synchronously from the request handlers with the layer's context,
 * so the hot path runs no Effect for them.
 */
import type { Context } from "effect"
import { Metric } from "effect"

const LATENCY_BOUNDARIES_MS = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000]
const OVERHEAD_BOUNDARIES_MS = [0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 25, 50, 100]

const REQUESTS = "ledger_gateway_requests_total"
const REQUESTS_DESCRIPTION = "gateway requests answered, by route and HTTP status"
const DURATION = "ledger_gateway_request_duration_ms"
const DURATION_DESCRIPTION = "gateway request latency (until the last byte of the answer), by route"
const overhead = Metric.histogram("ledger_gateway_overhead_ms", {
  description: "time a provider call spent in the gateway itself: total time minus time waiting on the provider",
  boundaries: OVERHEAD_BOUNDARIES_MS
})

export interface GatewayMetrics {
  /** one answered request: its route (`METHOD path`, or `other`), status and duration */
  request(route: string, status: number, ms: number): void
  /** the gateway's share of one provider call */
  overhead(ms: number): void
}

/**
 * Metric series bound to `context`; series per route and status are created once and reused, each with its
 * attributes built in: a series made with `Metric.withAttributes` adds them to a new context on every update, a
 * cost on every gateway call.
 */
export const gatewayMetrics = (context: Context.Context<never>): GatewayMetrics => {
  const routes = new Map<string, { readonly duration: Metric.Metric<number, unknown>; readonly requests: Map<number, Metric.Metric<number, unknown>> }>()
  return {
    request(route, status, ms) {
      let series = routes.get(route)
      if (series === undefined) {
        series = {
          duration: Metric.histogram(DURATION, { description: DURATION_DESCRIPTION, boundaries: LATENCY_BOUNDARIES_MS, attributes: { route } }),
          requests: new Map()
        }
        routes.set(route, series)
      }
      let counter = series.requests.get(status)
      if (counter === undefined) {
        counter = Metric.counter(REQUESTS, { description: REQUESTS_DESCRIPTION, incremental: true, attributes: { route, status: String(status) } })
        series.requests.set(status, counter)
      }
      counter.updateUnsafe(1, context)
      series.duration.updateUnsafe(ms, context)
    },
    overhead(ms) {
      overhead.updateUnsafe(ms, context)
    }
  }
}
