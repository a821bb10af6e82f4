/**
 * The whole pipeline for a workload, in process: fake providers → gateway (Redis capture stream) → decision builder
 * (reading retimed captures) → analytics materialiser and detectors → the analytics read model. Each workload runs
 * in a tenant of its own, so a planted and a control workload share one database and never see each other.
 *
 *   const pipeline = yield* workloadPipeline()
 *   const planted = yield* pipeline.run(planWorkload("planted"), "planted")
 *
 * By default analytics runs when `run` asks (catch-up after the builder is done, deterministic for tests); with
 * `fibers: true` the supervised fibers of `AnalyticsLive` run on their own instead.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import * as Crypto from "node:crypto"
import { BuilderLive, DecisionBuildersLive } from "../../layers/Builder.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import { AnalyticsQuery } from "../../src/analytics/AnalyticsQuery.ts"
import { Detectors } from "../../src/analytics/Detectors.ts"
import { Embedder } from "../../src/analytics/Embedder.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { ModelCalls } from "../../src/analytics/ModelCalls.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import type { LedgerSettings } from "../../src/config/LedgerConfig.ts"
import type { MemberRole, Principal } from "../../src/domain/principal.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { type GatewayStack, gatewayStack, type StackServices } from "../../test/support/gateway-stack.ts"
import type { Backend } from "../../test/support/stack.ts"
import { type CallResult, RetimedCaptureStream, runWorkload } from "./run.ts"
import type { Workload } from "./scenario.ts"

const Services = Layer.mergeAll(Materializer.layer, Detectors.layer, Embedder.layer, AnalyticsQuery.layer).pipe(Layer.provide(ModelCalls.layer))

/** The stream the builders read (through CaptureShards): the in-process one, retimed. */
const RetimedShards = CaptureShards.single.pipe(Layer.provideMerge(RetimedCaptureStream))

/** The decision builders and the analytics services; analytics is driven by `run`. */
const PipelineLive = Layer.mergeAll(DecisionBuildersLive.pipe(Layer.provide(RetimedShards)), Services)
/** The builder role as deployed (its analytics fibers running), and the services. */
const PipelineFibersLive = Layer.mergeAll(BuilderLive.pipe(Layer.provide(RetimedShards)), Services)

export interface WorkloadTenant {
  readonly workload: Workload
  /** the tenant's name (workspace `main`) */
  readonly tenant: string
  /** the member who reads it (PAT) */
  readonly principal: Principal
  readonly pat: string
  readonly results: ReadonlyArray<CallResult>
  /** ledger ids of the calls with a given key prefix (e.g. `loop`, `feature-y/plan`) */
  ledgerIds(keyPrefix: string): ReadonlyArray<string>
}

export interface RunOptions {
  /** run analytics to completion before returning (default true; false leaves it to the fibers) */
  readonly analyse?: boolean
  /** an existing tenant to send the calls into (default: a new one) */
  readonly into?: string
  /** the member whose gateway key sends the calls (default `owner@<tenant>.test`, a member) */
  readonly member?: { readonly email: string; readonly role: MemberRole }
}

export interface WorkloadPipeline {
  readonly stack: GatewayStack<Layer.Success<typeof PipelineLive>>
  readonly query: AnalyticsQuery["Service"]
  /** Sends the workload through the gateway, waits until it is built (and, by default, analysed). */
  run(workload: Workload, tenant: string, options?: RunOptions): Effect.Effect<WorkloadTenant, unknown>
  /** Every decision of the principal's workspace materialised and looked at by the detectors. */
  readonly analysed: (principal: Principal) => Effect.Effect<boolean, unknown>
}

export interface WorkloadPipelineOptions {
  /** a fresh PostgreSQL database (default), or embedded PGlite — or any database `settings.databaseUrl` names */
  readonly backend?: Backend
  readonly settings?: Partial<LedgerSettings>
  /** more roles on the same services, e.g. the API server */
  readonly layer?: Layer.Layer<never, unknown, StackServices>
  /** run the analytics fibers (AnalyticsLive) instead of driving analytics from `run` */
  readonly fibers?: boolean
}

export const workloadPipeline = (options: WorkloadPipelineOptions = {}): Effect.Effect<WorkloadPipeline, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const roles = options.fibers === true ? PipelineFibersLive : PipelineLive
    const stack = yield* gatewayStack({
      layer: options.layer === undefined ? roles : Layer.merge(roles, options.layer),
      backend: options.backend ?? "postgres",
      ...(options.settings === undefined ? {} : { settings: options.settings })
    })
    const credentials = Context.get(stack.context, Credentials)
    const authenticator = Context.get(stack.context, Authenticator)
    const tenantSql = Context.get(stack.context, TenantSql)
    const materializer = Context.get(stack.context, Materializer)
    const detectors = Context.get(stack.context, Detectors)
    const embedder = Context.get(stack.context, Embedder)

    const analysed = (principal: Principal) =>
      tenantSql.read(principal, ScopedSql.use((sql) =>
        sql<{ done: boolean }>`SELECT
          (SELECT count(*) FROM decisions) = (SELECT count(*) FROM decision_search)
          AND coalesce((SELECT detected_seq FROM analytics_progress), 0) >= coalesce((SELECT max(seq) FROM decision_search), 0)
          AND NOT EXISTS (SELECT 1 FROM analytics_sessions WHERE dirty) AS done`
      )).pipe(Effect.map((rows) => rows[0]!.done))

    const run = (workload: Workload, tenant: string, runOptions: RunOptions = {}) =>
      Effect.gen(function*() {
        const name = runOptions.into ?? `${tenant}-${Crypto.randomBytes(4).toString("hex")}`
        const owner = yield* credentials.bootstrap({ tenant: name, workspace: "main", email: `owner@${tenant}.test`, role: "member" })
        const sender = runOptions.member === undefined
          ? owner
          : yield* credentials.bootstrap({ tenant: name, workspace: "main", ...runOptions.member })
        const principal = yield* authenticator.authenticate(owner.pat, "pat")
        const [before] = yield* tenantSql.read(principal, ScopedSql.use((sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions`))
        const results = yield* runWorkload(workload, { baseURL: stack.baseURL, gatewayKey: sender.gateway_key, providerKey: "sk-provider-test" })
        yield* stack.settled
        // every call is a decision once the builder has caught up
        for (;;) {
          const [row] = yield* tenantSql.read(principal, ScopedSql.use((sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions`))
          if (row!.n >= before!.n + results.length) break
          yield* Effect.sleep(100)
        }
        if (runOptions.analyse ?? true) {
          yield* materializer.catchUp
          yield* detectors.catchUp
          yield* embedder.catchUp
        }
        return {
          workload,
          tenant: name,
          principal,
          pat: owner.pat,
          results,
          ledgerIds: (prefix: string) => results.filter((r) => r.call.key.startsWith(prefix)).map((r) => r.ledger_id)
        } satisfies WorkloadTenant
      })

    return { stack, query: Context.get(stack.context, AnalyticsQuery), run, analysed }
  })
