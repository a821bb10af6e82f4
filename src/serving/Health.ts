/**
 * Liveness, readiness and metrics for operators (docs/ARCHITECTURE.md, "Surfaces"), served on both ports.
 * `/healthz`: the process answers. `/readyz`: the database and every shard of the capture stream are reachable (on a
 * Redis Cluster the shards live on different nodes, so one can be down while shard 0 answers).
 */
import { Context, Duration, Effect, Layer, type Scope } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { CaptureShards } from "../capture/CaptureShards.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { mergeExpositions } from "./exposition.ts"

export interface Readiness {
  readonly ready: boolean
  readonly database: "ok" | "unavailable"
  readonly stream: "ok" | "unavailable"
  /** which shards did not answer, when the stream is sharded and some did not */
  readonly unavailable_shards?: ReadonlyArray<number>
}

const PROBE_TIMEOUT = Duration.seconds(2)

const make = Effect.fnUntraced(function*(processMetrics?: Effect.Effect<string>) {
  const tenantSql = yield* TenantSql
  const shards = yield* CaptureShards
  const probe = (effect: Effect.Effect<unknown, unknown>) =>
    effect.pipe(
      Effect.timeout(PROBE_TIMEOUT),
      Effect.as("ok" as const),
      Effect.catchCause(() => Effect.succeed("unavailable" as const))
    )
  const readiness = Effect.gen(function*() {
    const [database, streams] = yield* Effect.all([
      probe(tenantSql.control(ScopedSql.use((sql) => sql`SELECT 1`))),
      Effect.forEach(shards.streams, (stream) => probe(stream.stats), { concurrency: "unbounded" })
    ], { concurrency: 2 })
    const unavailable = streams.flatMap((state, index) => state === "ok" ? [] : [index])
    const stream = unavailable.length === 0 ? "ok" as const : "unavailable" as const
    return {
      ready: database === "ok" && stream === "ok",
      database,
      stream,
      ...(shards.streams.length > 1 && unavailable.length > 0 ? { unavailable_shards: unavailable } : {})
    }
  }).pipe(Effect.withSpan("Health.readiness"))
  const sources = new Set<Effect.Effect<string>>()
  const metrics = Effect.gen(function*() {
    const own = yield* PrometheusMetrics.format()
    if (sources.size === 0) return own
    // a thread that does not answer in time is left out of this scrape
    const others = yield* Effect.forEach(sources, (source) => source.pipe(Effect.timeout(PROBE_TIMEOUT), Effect.orElseSucceed(() => "")), {
      concurrency: "unbounded"
    })
    return mergeExpositions([own, ...others])
  })
  const addSource = (source: Effect.Effect<string>) =>
    Effect.acquireRelease(Effect.sync(() => sources.add(source)), () => Effect.sync(() => sources.delete(source))).pipe(Effect.asVoid)
  return Health.of({ readiness, metrics: processMetrics ?? metrics, addSource })
})

export class Health extends Context.Service<Health, {
  readonly readiness: Effect.Effect<Readiness>
  /** Prometheus exposition text of every metric in the process: this thread's and those of its role threads. */
  readonly metrics: Effect.Effect<string>
  /** Adds another thread's metrics (its exposition) to `metrics` while the scope lasts. */
  addSource(source: Effect.Effect<string>): Effect.Effect<void, never, Scope.Scope>
}>()("ledger/serving/Health") {
  static readonly layer = Layer.effect(Health, make())

  /**
   * The Health of a role thread whose `/metrics` answers with the whole process's metrics, which `processMetrics`
   * asks the main thread for (a gateway worker's gateway port).
   */
  static readonly layerInThread = (processMetrics: Effect.Effect<string>) => Layer.effect(Health, make(processMetrics))
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
