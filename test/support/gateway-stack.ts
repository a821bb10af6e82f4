/**
 * An in-process gateway for end-to-end tests: the real store on a fresh database, the capture stream (Redis
 * under a unique key prefix, or in-process), the fake providers behind every provider prefix, and GatewayLive
 * listening on a free port. Everything is released with the scope.
 *
 *   const stack = yield* gatewayStack()
 *   const client = new OpenAI({ baseURL: stack.baseURL, apiKey: stack.gatewayKey, defaultQuery: { agent_id: "a1" },
 *     defaultHeaders: { "x-service-provider-api-key": "sk-provider" } })
 *
 * Provider prefixes: `openai/`, `azure/`, `anthropic/`, `gemini/`, `bedrock/`, and the named OpenAI-compatible
 * upstream `compat/` (all served by the one fake provider server). Pass `layer` to run more roles (a builder, the
 * API) on the same services.
 */
import { Context, Effect, Layer, Option, Redacted, References, Schedule, type Scope, Semaphore } from "effect"
import type { LogLevel } from "effect/LogLevel"
import * as Crypto from "node:crypto"
import { createClient } from "redis"
import { GatewayLive } from "../../layers/Gateway.ts"
import { coreWith } from "../../layers/Serve.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import { CapturePublisher } from "../../src/capture/CapturePublisher.ts"
import { CaptureStream } from "../../src/capture/CaptureStream.ts"
import { LedgerConfig, type LedgerSettings, type Upstream } from "../../src/config/LedgerConfig.ts"
import { type Capture, decodeCapture } from "../../src/domain/capture.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { GatewayServer } from "../../src/gateway/GatewayServer.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { type FakeProviderOptions, type FakeProviders, startFakeProviders } from "./fake-providers.ts"
import { TEST_REDIS_URL, testKeyPrefix } from "./redis.ts"
import { type Backend, backendSettings } from "./stack.ts"

/** The named OpenAI-compatible upstream every stack configures (served by the fake provider). */
export const COMPAT_UPSTREAM = "compat"

/** What the gateway runs on; `layer` may use any of it. */
export type StackServices = Layer.Success<ReturnType<typeof coreWith>>

export interface GatewayStackOptions<A = never, E = never> {
  /** database: a fresh PostgreSQL database (default) or embedded PGlite */
  readonly backend?: Backend
  /** capture stream: Redis (default) or in-process */
  readonly stream?: "redis" | "memory"
  /** Redis to use (default the test Redis); point it at a `tcpProxy` to cut the connection */
  readonly redisUrl?: string
  readonly fake?: FakeProviderOptions
  /** more named OpenAI-compatible upstreams, next to `compat` */
  readonly upstreams?: ReadonlyArray<Upstream>
  /** applied last, over the stack's own settings (a function receives them, e.g. to edit `providers`) */
  readonly settings?: Partial<LedgerSettings> | ((settings: LedgerSettings) => Partial<LedgerSettings>)
  /** default Warn, to keep test output readable */
  readonly logLevel?: LogLevel
  /** more layers to run alongside the gateway (a builder, the API) */
  readonly layer?: Layer.Layer<A, E, StackServices>
}

export interface GatewayStack<A = never> {
  /** `http://127.0.0.1:PORT` */
  readonly gatewayUrl: string
  /** `{gatewayUrl}/v1`, the openai client's baseURL */
  readonly baseURL: string
  readonly gatewayKey: string
  readonly pat: string
  /** what the gateway key resolves to (its `token_id` is the captures' `key_id`) */
  readonly principal: Principal
  readonly fake: FakeProviders
  readonly settings: LedgerSettings
  readonly context: Context.Context<StackServices | CapturePublisher | GatewayServer | A>
  /** Waits until every capture offered so far is in the stream (queue empty, spool replayed). */
  readonly settled: Effect.Effect<void>
  /**
   * Every capture in the stream, oldest first. Redis: every entry the stream has held since the stack started,
   * including those the builders trimmed since (nothing is consumed). In-process stream:
   * read through the consumer group (each capture is returned once).
   */
  readonly captures: Effect.Effect<ReadonlyArray<Capture>>
  /** The capture with this ledger id, waiting up to `timeoutMs` for it to arrive. */
  capture(ledgerId: string, timeoutMs?: number): Effect.Effect<Capture>
  /**
   * The newest capture that `matches`, waiting up to `timeoutMs` for one: a capture is offered just after the caller
   * has its answer, so it may not be there yet when the caller is done.
   */
  captureWhere(matches: (capture: Capture) => boolean, timeoutMs?: number): Effect.Effect<Capture>
}

/**
 * Every payload the Redis stream `key` has held, in stream order, from the scope's start: a log kept by polling every
 * 10 ms from the last id seen. Reading the stream back is not enough — builders trim what they acknowledged (every
 * 10 s), so a test that counts entries would see them vanish.
 */
const redisStreamLog = (url: string, key: string) =>
  Effect.gen(function*() {
    // commands fail at once while Redis is away (fault tests take it away): the log then waits for the next poll
    const client = yield* Effect.acquireRelease(
      Effect.promise(() => createClient({ url, disableOfflineQueue: true }).on("error", () => {}).connect()),
      (client) => Effect.sync(() => client.destroy())
    )
    const log: Array<string> = []
    let last: string | undefined
    /** true when the stream was read to its end */
    const poll = Effect.tryPromise(async () => {
      for (const entry of (await client.xRange(key, last === undefined ? "-" : `(${last}`, "+")) ?? []) {
        log.push(String(entry.message.c))
        last = entry.id
      }
    }).pipe(Effect.timeout("1 second"), Effect.as(true), Effect.orElseSucceed(() => false))
    // one poll at a time: the loop's and a reader's (a semaphore keeps `last` and the log in step)
    const lock = yield* Semaphore.make(1)
    const step = lock.withPermits(1)(poll)
    yield* step.pipe(Effect.andThen(Effect.sleep("10 millis")), Effect.forever, Effect.forkScoped)
    // a reader gets the log up to the stream's end: after an outage the log's own client may still be reconnecting
    // (a CI run read the log before it had, and counted the captures made before the cut only), so wait for it
    return step.pipe(
      Effect.repeat({ until: (read) => read, schedule: Schedule.spaced("50 millis"), times: 200 }),
      Effect.map(() => [...log])
    )
  })

export const gatewayStack = <A = never, E = never>(
  options: GatewayStackOptions<A, E> = {}
): Effect.Effect<GatewayStack<A>, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const fake = yield* Effect.acquireRelease(
      Effect.promise(() => startFakeProviders(options.fake)),
      (fake) => Effect.promise(() => fake.close())
    )
    const useRedis = (options.stream ?? "redis") === "redis"
    const redisUrl = options.redisUrl ?? TEST_REDIS_URL
    const streamKey = useRedis ? `${yield* testKeyPrefix("gateway")}captures` : "ledger:captures"
    const defaults = yield* backendSettings(options.backend ?? "postgres", {
      gatewayPort: 0,
      redisUrl: useRedis ? Option.some(Redacted.make(redisUrl)) : Option.none(),
      streamKey,
      providers: {
        openaiBaseUrl: fake.baseUrls.openai,
        azureBaseUrl: Option.some(fake.baseUrls.azure),
        azureApiVersion: "2024-10-21",
        anthropicBaseUrl: fake.baseUrls.anthropic,
        geminiBaseUrl: fake.baseUrls.gemini,
        bedrockBaseUrl: fake.baseUrls.bedrock,
        bedrockRegion: "us-east-1",
        upstreams: [{ name: COMPAT_UPSTREAM, baseUrl: fake.baseUrls.openai_compatible }, ...(options.upstreams ?? [])]
      }
    })
    const settings: LedgerSettings = {
      ...defaults,
      ...(typeof options.settings === "function" ? options.settings(defaults) : options.settings)
    }
    const core = coreWith(LedgerConfig.layerFrom(settings))
    const roles = options.layer === undefined ? GatewayLive : Layer.mergeAll(GatewayLive, options.layer)
    const context = yield* Layer.build(
      (roles as typeof GatewayLive).pipe(
        Layer.provideMerge(core),
        Layer.provide(Layer.succeed(References.MinimumLogLevel, options.logLevel ?? "Warn"))
      )
    ) as Effect.Effect<GatewayStack<A>["context"], unknown, Scope.Scope>

    const credentials = Context.get(context, Credentials)
    const boot = yield* credentials.bootstrap({
      tenant: `gw-${Crypto.randomBytes(4).toString("hex")}`,
      workspace: "main",
      email: "agent-owner@gateway.test",
      role: "member"
    })
    const principal = yield* Context.get(context, Authenticator).authenticate(boot.gateway_key, "gateway")
    const gatewayUrl = `http://127.0.0.1:${Context.get(context, GatewayServer).port}`
    const stream = Context.get(context, CaptureStream)
    const publisher = Context.get(context, CapturePublisher)

    const decodeAll = (payloads: ReadonlyArray<string>) => Effect.forEach(payloads, (payload) => decodeCapture(payload).pipe(Effect.orDie))
    const redisLog = useRedis ? yield* redisStreamLog(redisUrl, streamKey) : undefined
    const captures = redisLog !== undefined
      ? Effect.flatMap(redisLog, decodeAll)
      : Effect.flatMap(
        stream.read("gateway-stack", { count: 100_000, blockMs: 0 }).pipe(Effect.orDie),
        (entries) => decodeAll(entries.map((entry) => entry.payload))
      )
    const seen = new Map<string, Capture>()
    const captureWhere = (matches: (capture: Capture) => boolean, timeoutMs = 5_000) =>
      Effect.gen(function*() {
        const deadline = Date.now() + timeoutMs
        while (true) {
          for (const found of yield* captures) seen.set(found.ledger_id, found)
          const found = [...seen.values()].findLast(matches)
          if (found !== undefined) return found
          if (Date.now() > deadline) return yield* Effect.die(new Error(`no capture as asked within ${timeoutMs} ms`))
          yield* Effect.sleep(20)
        }
      })
    const capture = (ledgerId: string, timeoutMs?: number) => captureWhere((found) => found.ledger_id === ledgerId, timeoutMs)

    return {
      gatewayUrl,
      baseURL: `${gatewayUrl}/v1`,
      gatewayKey: boot.gateway_key,
      pat: boot.pat,
      principal,
      fake,
      settings,
      context,
      settled: publisher.settled,
      captures,
      capture,
      captureWhere
    } satisfies GatewayStack<A>
  })
