/**
 * Liveness, readiness and metrics for operators (DESIGN §2.5), served on both ports.
 * `/healthz`: the process answers. `/readyz`: the database and the capture stream are reachable.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { CaptureStream } from "../capture/CaptureStream.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"

export interface Readiness {
  readonly ready: boolean
  readonly database: "ok" | "unavailable"
  readonly stream: "ok" | "unavailable"
}

const PROBE_TIMEOUT = Duration.seconds(2)

export class Health extends Context.Service<Health, {
  readonly readiness: Effect.Effect<Readiness>
  /** Prometheus exposition text of every metric in the process. */
  readonly metrics: Effect.Effect<string>
}>()("ledger/ops/Health") {
  static readonly layer = Layer.effect(
    Health,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const stream = yield* CaptureStream
      const probe = (effect: Effect.Effect<unknown, unknown>) =>
        effect.pipe(
          Effect.timeout(PROBE_TIMEOUT),
          Effect.as("ok" as const),
          Effect.catchCause(() => Effect.succeed("unavailable" as const))
        )
      const readiness = Effect.gen(function*() {
        const [database, streamState] = yield* Effect.all([probe(tenantSql.control(ScopedSql.use((sql) => sql`SELECT 1`))), probe(stream.stats)], {
          concurrency: 2
        })
        return { ready: database === "ok" && streamState === "ok", database, stream: streamState }
      }).pipe(Effect.withSpan("Health.readiness"))
      return Health.of({ readiness, metrics: PrometheusMetrics.format() })
    })
  )
}

/** `/healthz`, `/readyz`, `/metrics` as router routes (the API server). */
export const OpsRoutes = HttpRouter.use(Effect.fnUntraced(function*(router) {
  const health = yield* Health
  yield* router.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" }))
  yield* router.add(
    "GET",
    "/readyz",
    Effect.map(health.readiness, (r) => HttpServerResponse.jsonUnsafe(r, { status: r.ready ? 200 : 503 }))
  )
  yield* router.add(
    "GET",
    "/metrics",
    Effect.map(health.metrics, (text) => HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4" }))
  )
}))
