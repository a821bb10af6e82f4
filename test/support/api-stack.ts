/**
 * The API server for tests: the real store on a fresh database, the in-process capture stream, health, and
 * `ApiRoutesLive` (ops, REST, docs, and whatever else the API role serves) listening on a free port, with one
 * bootstrapped member and their Personal Access Token. Everything is released with the scope.
 *
 *   const stack = yield* apiStack()
 *   const response = yield* Effect.promise(() => fetch(`${stack.baseUrl}/v1/agents`, { headers: { authorization: `Bearer ${stack.pat}` } }))
 *
 * `stack.context` holds the services underneath (TenantSql, Credentials, ...) to seed data or make more members;
 * `ApiStack.layer(options)` provides the same as a layer for `layer(...)` suites.
 */
import { Context, Effect, Layer, Logger, References, type Scope } from "effect"
import type { LogLevel } from "effect/LogLevel"
import { ApiRoutesLive } from "../../layers/Api.ts"
import { StoreLive } from "../../layers/Store.ts"
import { serveApi } from "../../src/api/ApiServer.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import { LedgerConfig, type LedgerSettings } from "../../src/config/LedgerConfig.ts"
import type { MemberRole, Principal } from "../../src/domain/principal.ts"
import { Health } from "../../src/serving/Health.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { onFreePort } from "./ports.ts"
import { type Backend, backendSettings } from "./stack.ts"

export interface ApiStackOptions {
  /** a fresh PostgreSQL database (default) or embedded PGlite */
  readonly backend?: Backend
  /** applied last, over the stack's own settings */
  readonly settings?: Partial<LedgerSettings>
  /** default Warn, to keep test output readable (the access log is at Info) */
  readonly logLevel?: LogLevel
  /** receives every log entry's message and annotations (e.g. to check the access log) */
  readonly onLog?: (entry: { readonly message: unknown; readonly annotations: Record<string, unknown> }) => void
  /** the bootstrapped member (default tenant "acme", workspace "ops", ann@acme.test, member) */
  readonly member?: { readonly tenant?: string; readonly workspace?: string; readonly email?: string; readonly role?: MemberRole }
}

export type ApiStackServices = Layer.Success<typeof StoreLive> | LedgerConfig | Health

export interface ApiStackInfo {
  /** `http://127.0.0.1:PORT` */
  readonly baseUrl: string
  readonly pat: string
  readonly gatewayKey: string
  readonly principal: Principal
  readonly settings: LedgerSettings
  readonly context: Context.Context<ApiStackServices>
}

export class ApiStack extends Context.Service<ApiStack, ApiStackInfo>()("test/support/ApiStack") {
  static readonly layer = (options: ApiStackOptions = {}) => Layer.effect(ApiStack, apiStack(options))
}

export const apiStack = (options: ApiStackOptions = {}): Effect.Effect<ApiStackInfo, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const onLog = options.onLog
    const logging = Layer.mergeAll(
      Layer.succeed(References.MinimumLogLevel, options.logLevel ?? "Warn"),
      onLog === undefined ? Layer.empty : Logger.layer([
        Logger.make(({ fiber, message }) => {
          onLog({ message, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } })
        }),
        Logger.defaultLogger
      ])
    )
    // the port is chosen before the server binds it: the issuer URL names it
    const { context, port, settings } = yield* onFreePort((port) => Effect.gen(function*() {
      const settings = yield* backendSettings(options.backend ?? "postgres", {
        apiPort: port,
        publicUrl: `http://127.0.0.1:${port}`,
        ...options.settings
      })
      const core = Health.layer.pipe(
        Layer.provideMerge(Layer.mergeAll(StoreLive, CaptureShards.single.pipe(Layer.provideMerge(MemoryCaptureStream.layer)))),
        Layer.provideMerge(LedgerConfig.layerFrom(settings))
      )
      const context = yield* Layer.build(serveApi(ApiRoutesLive).pipe(Layer.provideMerge(core), Layer.provide(logging)))
      return { context, port, settings }
    }))
    const member = options.member ?? {}
    const boot = yield* Credentials.use((credentials) =>
      credentials.bootstrap({
        tenant: member.tenant ?? "acme",
        workspace: member.workspace ?? "ops",
        email: member.email ?? "ann@acme.test",
        role: member.role ?? "member"
      })
    ).pipe(Effect.provide(context))
    const principal = yield* Authenticator.use((auth) => auth.authenticate(boot.pat, "pat")).pipe(Effect.provide(context))
    return {
      baseUrl: `http://127.0.0.1:${port}`,
      pat: boot.pat,
      gatewayKey: boot.gateway_key,
      principal,
      settings,
      context: context as Context.Context<ApiStackServices>
    }
  })
