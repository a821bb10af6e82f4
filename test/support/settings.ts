/** A complete LedgerSettings for tests: the defaults of LedgerConfig, embedded database and stream. */
import { Context, Effect, Layer, Option } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import { defaultAnalyticsSettings, LedgerConfig, type LedgerSettings } from "../../src/config/LedgerConfig.ts"

export const testSettings = (overrides: Partial<LedgerSettings> = {}): LedgerSettings => ({
  host: "127.0.0.1",
  apiPort: 8080,
  gatewayPort: 4000,
  gatewayWorkers: 1,
  publicUrl: "http://127.0.0.1:8080",
  gatewayUrl: Option.none(),
  dataDir: Path.join(Os.tmpdir(), "ledger-test"),
  databaseUrl: Option.none(),
  databaseReadUrl: Option.none(),
  redisUrl: Option.none(),
  redisCluster: [],
  providers: {
    openaiBaseUrl: "https://api.openai.com/v1",
    azureBaseUrl: Option.none(),
    azureApiVersion: "2024-10-21",
    anthropicBaseUrl: "https://api.anthropic.com",
    geminiBaseUrl: "https://generativelanguage.googleapis.com",
    bedrockBaseUrl: "https://bedrock-runtime.us-east-1.amazonaws.com",
    bedrockRegion: "us-east-1",
    upstreams: []
  },
  sessionGapMinutes: 30,
  logLevel: "info",
  streamKey: "ledger:captures",
  captureShards: 1,
  streamGroup: "ledger-builders",
  maxDeliveries: 5,
  builderConsumers: 2,
  builderBatchSize: 500,
  builderBatchBytes: 32 * 1024 * 1024,
  // builds show at once: tests wait for decisions one call at a time
  builderLingerMs: 0,
  reclaimIdleMs: 60_000,
  gatewayMaxBodyBytes: 10 * 1024 * 1024,
  captureMaxAnswerBytes: 4 * 1024 * 1024,
  httpHeadersTimeoutMs: 10_000,
  httpRequestTimeoutMs: 120_000,
  httpMaxConnections: 4_096,
  gatewayAuthStaleMs: 12 * 3_600_000,
  databasePoolSize: 16,
  responsesStateBytes: 256 * 1024 * 1024,
  upstreamTimeoutMs: 300_000,
  upstreamConnections: 512,
  captureQueueCapacity: 10_000,
  captureBatchSize: 256,
  captureRetainBytes: 1024 * 1024 * 1024,
  captureDedupTtlSeconds: 7 * 24 * 3600,
  apiRateLimit: 100,
  signup: "open",
  integrityKey: Option.none(),
  retentionDays: Option.none(),
  oidc: Option.none(),
  analytics: defaultAnalyticsSettings,
  ...overrides
})

/** A service built from its layer on `testSettings(overrides)`, for the scope: one process's instance of it. */
export const serviceOn = <I, S, E>(layer: Layer.Layer<I, E, LedgerConfig>, service: Context.Key<I, S>, overrides: Partial<LedgerSettings>) =>
  Layer.build(layer.pipe(Layer.provide(LedgerConfig.layerFrom(testSettings(overrides))))).pipe(Effect.map(Context.get(service)))
