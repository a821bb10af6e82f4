/**
 * All settings of the service, read once through Effect `Config` (docs/configuration.md).
 * Nothing else in the code reads the environment.
 */
import { Config, ConfigProvider, Context, Effect, Layer, Option, Redacted } from "effect"
import * as Path from "node:path"
import type { Intent } from "../domain/decision.ts"

/**
 * A setting that cannot be used, found while the settings are assembled; `settingsConfig` turns it into the
 * `ConfigError` the service fails to start with (one line naming the variable).
 */
class SettingProblem extends Error {}

export interface Upstream {
  readonly name: string
  readonly baseUrl: string
}

export interface LedgerSettings {
  readonly host: string
  readonly apiPort: number
  readonly gatewayPort: number
  /**
   * gateway worker threads sharing the gateway port (`SO_REUSEPORT`; the kernel spreads connections over them), each
   * with its own event loop, provider pools, capture publisher and spool; 1 runs the gateway on the main thread
   */
  readonly gatewayWorkers: number
  readonly publicUrl: string
  /**
   * the gateway as callers reach it (LEDGER_GATEWAY_URL, which `ledger watch` also reads), for the app's setup
   * snippets; unset → the public URL's host with the gateway's port
   */
  readonly gatewayUrl: Option.Option<string>
  readonly dataDir: string
  /** unset → embedded PGlite in the data directory */
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  /** a streaming replica of DATABASE_URL for the API's reads (REST, MCP, the app); unset → DATABASE_URL */
  readonly databaseReadUrl: Option.Option<Redacted.Redacted>
  /** unset → in-process capture stream */
  readonly redisUrl: Option.Option<Redacted.Redacted>
  /**
   * the nodes of a Redis Cluster to start from (LEDGER_REDIS_CLUSTER, `host:port,host:port` or URLs), as URLs; when
   * set the capture stream runs on the cluster, and REDIS_URL defaults to its first node. A REDIS_URL naming a
   * cluster node is found to be one at start.
   */
  readonly redisCluster: ReadonlyArray<Redacted.Redacted>
  readonly providers: {
    readonly openaiBaseUrl: string
    readonly azureBaseUrl: Option.Option<string>
    readonly azureApiVersion: string
    readonly anthropicBaseUrl: string
    readonly geminiBaseUrl: string
    readonly bedrockBaseUrl: string
    readonly bedrockRegion: string
    /** named OpenAI-compatible upstreams (LEDGER_UPSTREAMS) */
    readonly upstreams: ReadonlyArray<Upstream>
  }
  readonly sessionGapMinutes: number
  readonly logLevel: string
  /** Redis stream key of captures, its consumer group and dead-letter stream (prefix for per-run isolation) */
  readonly streamKey: string
  /** shards of the capture stream (LEDGER_CAPTURE_SHARDS): captures spread over them by workspace */
  readonly captureShards: number
  readonly streamGroup: string
  /** deliveries after which a capture that keeps failing moves to the dead letters */
  readonly maxDeliveries: number
  /** decision builder: consumer fibers per process, captures per batch (one transaction), and how long an entry
   * may stay pending before another consumer reclaims it (its consumer is presumed dead) */
  readonly builderConsumers: number
  readonly builderBatchSize: number
  /**
   * the most capture payload a builder reads at once and one transaction carries (LEDGER_BUILDER_BATCH_MB): after
   * large captures it reads fewer, and a batch over it commits in several transactions (a larger capture goes alone)
   */
  readonly builderBatchBytes: number
  /**
   * how long a consumer waits after a batch smaller than `builderBatchSize` before it reads again: captures gather
   * into fewer, larger transactions (the database's work per decision falls), decisions appear at most this much later
   */
  readonly builderLingerMs: number
  readonly reclaimIdleMs: number
  /** largest gateway request body accepted, bytes */
  readonly gatewayMaxBodyBytes: number
  /**
   * the most of an answer a capture keeps, bytes (LEDGER_CAPTURE_MAX_ANSWER_BYTES): the caller gets the whole answer,
   * the capture its beginning and end, marked truncated with the full size
   */
  readonly captureMaxAnswerBytes: number
  /**
   * slow clients, on both ports: how long a request's headers, and the whole request, may take to arrive, and the
   * connections a port (each gateway worker) holds at once — beyond it new connections are dropped
   */
  readonly httpHeadersTimeoutMs: number
  readonly httpRequestTimeoutMs: number
  readonly httpMaxConnections: number
  /**
   * how long the gateway keeps accepting a Gateway Key the credential store last accepted, while the store does not
   * answer (a database outage), ms; revocation still takes effect within seconds whenever the store answers
   */
  readonly gatewayAuthStaleMs: number
  /** connections in the pool to DATABASE_URL (the embedded database always uses one) */
  readonly databasePoolSize: number
  /**
   * memory the gateway gives the conversations of Responses chains it keeps itself (translated providers store
   * nothing; WebSocket turns send only their new input), bytes; the least recently continued are forgotten first
   */
  readonly responsesStateBytes: number
  /** provider timeout, ms */
  readonly upstreamTimeoutMs: number
  /** most open connections to one provider origin (the gateway's undici pool per origin) */
  readonly upstreamConnections: number
  /** captures the gateway holds in memory for the publisher; beyond it they spill to the spool */
  readonly captureQueueCapacity: number
  /** captures per stream publish (one round trip) */
  readonly captureBatchSize: number
  /**
   * most the gateway keeps on disk of what it published and the builders have not committed yet, bytes — to publish
   * again if Redis comes back without it; past it the oldest is forgotten (then protected by Redis alone)
   */
  readonly captureRetainBytes: number
  /** how long Redis remembers a capture publisher's last batch (one small key per publisher, not per batch): a
   * publish retried later than that after an outage may append its batch twice */
  readonly captureDedupTtlSeconds: number
  /** REST API: requests per second each credential may make (bursts up to twice that); 0 = unlimited */
  readonly apiRateLimit: number
  /** an external OpenID Connect provider for the MCP OAuth sign-in (SSO), beside Personal Access Tokens */
  readonly oidc: Option.Option<OidcSettings>
  /**
   * who may sign up in the app (LEDGER_SIGNUP): `open` (anyone creates an organisation; invitations work), `invite`
   * (only through an invitation link; the default), `closed` (no sign-up in the app at all)
   */
  readonly signup: SignupPolicy
  /**
   * the keys of the decision chain (LEDGER_INTEGRITY_KEY: `SECRET` or `ID:SECRET,ID:SECRET`, base64url of 32 bytes);
   * unset → `<data dir>/integrity.key`, created on first use
   */
  readonly integrityKey: Option.Option<Redacted.Redacted>
  /** LEDGER_RETENTION_DAYS: decisions older than this are pruned by whole partitions; unset keeps everything */
  readonly retentionDays: Option.Option<number>
  readonly analytics: AnalyticsSettings
}

export const SIGNUP_POLICIES = ["open", "invite", "closed"] as const
export type SignupPolicy = typeof SIGNUP_POLICIES[number]

/** The ledger as a client of an OpenID Connect provider (LEDGER_OIDC_*). */
export interface OidcSettings {
  /** issuer URL; its `/.well-known/openid-configuration` names the endpoints */
  readonly issuer: string
  readonly clientId: string
  /** none: a public client (PKCE only) */
  readonly clientSecret: Option.Option<Redacted.Redacted>
  /** email domains (lower case) whose users may sign in through the provider; empty: any */
  readonly allowedDomains: ReadonlyArray<string>
}

/** Analytics (src/analytics): materialiser and detector fibers, optional model calls, ROI estimates. */
export interface AnalyticsSettings {
  /** how often the analytics fibers look for newly built decisions, ms */
  readonly intervalMs: number
  /**
   * Analytics yields to ingest: while more captures than this wait for the builders (stream lag + pending), the
   * analytics fibers skip their rounds (at most a minute in a row); 0 = never yield
   */
  readonly yieldBacklog: number
  /**
   * Analytics yields to ingest also while the oldest capture not yet committed arrived more than this long ago, ms
   * (a materialiser round stops between its batches); 0 = not by age
   */
  readonly yieldAgeMs: number
  /** `provider/model` for embeddings (OpenAI wire: `openai/`, `azure/`, named upstreams); none → local vectors */
  readonly embeddingsModel: Option.Option<string>
  /** `provider/model` that writes session summaries; none → deterministic summaries */
  readonly summaryModel: Option.Option<string>
  /** the provider key for those two models' calls */
  readonly modelApiKey: Option.Option<Redacted.Redacted>
  /** ROI default (a workspace may override it): value of one hour of the work agents take over, USD */
  readonly roiHourlyRateUsd: number
  /** ROI default: minutes of human work one successful decision saves, by intent */
  readonly roiMinutesSaved: Readonly<Record<Intent, number>>
}

/** Documented ROI defaults: minutes a person would spend on the task one successful decision completes. */
export const DEFAULT_MINUTES_SAVED: Readonly<Record<Intent, number>> = {
  question: 5,
  code_generation: 20,
  code_change: 15,
  debugging: 30,
  review: 15,
  planning: 20,
  summarization: 10,
  extraction: 5,
  classification: 2,
  translation: 5,
  tool_use: 3,
  conversation: 0,
  other: 2
}

export const defaultAnalyticsSettings: AnalyticsSettings = {
  intervalMs: 2_000,
  yieldBacklog: 5_000,
  yieldAgeMs: 300,
  embeddingsModel: Option.none(),
  summaryModel: Option.none(),
  modelApiKey: Option.none(),
  roiHourlyRateUsd: 60,
  roiMinutesSaved: DEFAULT_MINUTES_SAVED
}

/** `debugging=45,classification=1`: overrides of the default minutes per intent. */
const parseMinutesSaved = (raw: string): Readonly<Record<Intent, number>> => {
  const minutes: Record<string, number> = { ...DEFAULT_MINUTES_SAVED }
  for (const part of raw.split(",").map((item) => item.trim()).filter((item) => item.length > 0)) {
    const [intent, value] = part.split("=").map((item) => item.trim())
    const parsed = Number(value)
    if (intent === undefined || !(intent in DEFAULT_MINUTES_SAVED) || !Number.isFinite(parsed) || parsed < 0) {
      throw new SettingProblem(`LEDGER_ROI_MINUTES_SAVED: expected intent=minutes with a known intent, got "${part}"`)
    }
    minutes[intent] = parsed
  }
  return minutes as Record<Intent, number>
}

const parseUpstreams = (raw: string): ReadonlyArray<Upstream> =>
  raw.split(",").map((part) => part.trim()).filter((part) => part.length > 0).map((part) => {
    const eq = part.indexOf("=")
    if (eq <= 0) throw new SettingProblem(`LEDGER_UPSTREAMS: expected name=url, got "${part}"`)
    return { name: part.slice(0, eq).trim(), baseUrl: part.slice(eq + 1).trim().replace(/\/+$/, "") }
  })

const trimSlash = (url: string) => url.replace(/\/+$/, "")

/** The nodes of LEDGER_REDIS_CLUSTER (`host:port`, or Redis URLs) as URLs. */
const clusterNodes = (list: string): ReadonlyArray<string> =>
  list.split(",").map((node) => node.trim()).filter((node) => node.length > 0).map((node) => node.includes("://") ? node : `redis://${node}`)

/** The most gateway workers: more threads than cores only add switching. */
export const MAX_GATEWAY_WORKERS = 64

/** A number of gateway workers, or the reason it is not one (`source` names the setting). */
export const checkedGatewayWorkers = (workers: number, source: string): number => {
  if (!Number.isInteger(workers) || workers < 1 || workers > MAX_GATEWAY_WORKERS) {
    throw new SettingProblem(`${source} must be a whole number from 1 to ${MAX_GATEWAY_WORKERS}, not ${workers}`)
  }
  return workers
}

export const MAX_CAPTURE_SHARDS = 64

const checkedCaptureShards = (shards: number): number => {
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_CAPTURE_SHARDS) {
    throw new SettingProblem(`LEDGER_CAPTURE_SHARDS must be a whole number from 1 to ${MAX_CAPTURE_SHARDS}, not ${shards}`)
  }
  return shards
}

export const LOOPBACK_HOSTS = new Set(["127.0.0.1", "[::1]", "localhost"])

const parseOidc = (
  issuer: Option.Option<string>,
  clientId: Option.Option<string>,
  clientSecret: Option.Option<Redacted.Redacted>,
  allowedDomains: string
): Option.Option<OidcSettings> => {
  if (Option.isNone(issuer)) {
    if (Option.isSome(clientId) || Option.isSome(clientSecret) || allowedDomains !== "") {
      throw new SettingProblem("LEDGER_OIDC_CLIENT_ID, LEDGER_OIDC_CLIENT_SECRET and LEDGER_OIDC_ALLOWED_DOMAINS need LEDGER_OIDC_ISSUER")
    }
    return Option.none()
  }
  if (Option.isNone(clientId)) throw new SettingProblem("LEDGER_OIDC_CLIENT_ID is required when LEDGER_OIDC_ISSUER is set")
  let url: URL
  try {
    url = new URL(issuer.value)
  } catch {
    throw new SettingProblem(`LEDGER_OIDC_ISSUER is not a URL: "${issuer.value}"`)
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname))) {
    throw new SettingProblem("LEDGER_OIDC_ISSUER must use https (plain http only on loopback)")
  }
  return Option.some({
    // as written: discovery checks it against the issuer the provider names itself, and ID tokens against that
    issuer: issuer.value,
    clientId: clientId.value,
    clientSecret,
    allowedDomains: allowedDomains.split(",").map((domain) => domain.trim().toLowerCase()).filter((domain) => domain.length > 0)
  })
}

/** A URL setting: refused (ConfigError) unless it is an absolute URL; kept as its text in normal form. */
const urlSetting = (name: string) => Config.URL(name).pipe(Config.map((url) => url.href))

const rawSettings = Config.all({
  host: Config.String("LEDGER_HOST").pipe(Config.withDefault("127.0.0.1")),
  apiPort: Config.Port("LEDGER_API_PORT").pipe(Config.withDefault(8080)),
  gatewayPort: Config.Port("LEDGER_GATEWAY_PORT").pipe(Config.withDefault(4000)),
  gatewayWorkers: Config.Int("LEDGER_GATEWAY_WORKERS").pipe(Config.withDefault(1)),
  publicUrl: Config.option(urlSetting("LEDGER_PUBLIC_URL")),
  gatewayUrl: Config.option(urlSetting("LEDGER_GATEWAY_URL")),
  dataDir: Config.String("LEDGER_DATA_DIR").pipe(Config.withDefault("./.ledger")),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  databaseReadUrl: Config.option(Config.Redacted("DATABASE_READ_URL")),
  redisUrl: Config.option(Config.Redacted("REDIS_URL")),
  redisCluster: Config.String("LEDGER_REDIS_CLUSTER").pipe(Config.withDefault("")),
  openaiBaseUrl: urlSetting("LEDGER_OPENAI_BASE_URL").pipe(Config.withDefault("https://api.openai.com/v1")),
  azureBaseUrl: Config.option(urlSetting("LEDGER_AZURE_BASE_URL")),
  azureApiVersion: Config.String("LEDGER_AZURE_API_VERSION").pipe(Config.withDefault("2024-10-21")),
  anthropicBaseUrl: urlSetting("LEDGER_ANTHROPIC_BASE_URL").pipe(Config.withDefault("https://api.anthropic.com")),
  geminiBaseUrl: urlSetting("LEDGER_GEMINI_BASE_URL").pipe(
    Config.withDefault("https://generativelanguage.googleapis.com")
  ),
  bedrockRegion: Config.String("LEDGER_BEDROCK_REGION").pipe(Config.withDefault("us-east-1")),
  bedrockBaseUrl: Config.option(urlSetting("LEDGER_BEDROCK_BASE_URL")),
  upstreams: Config.String("LEDGER_UPSTREAMS").pipe(Config.withDefault("")),
  sessionGapMinutes: Config.Number("LEDGER_SESSION_GAP_MINUTES").pipe(Config.withDefault(30)),
  logLevel: Config.String("LEDGER_LOG_LEVEL").pipe(Config.withDefault("info")),
  streamKey: Config.String("LEDGER_STREAM_KEY").pipe(Config.withDefault("ledger:captures")),
  captureShards: Config.Int("LEDGER_CAPTURE_SHARDS").pipe(Config.withDefault(1)),
  streamGroup: Config.String("LEDGER_STREAM_GROUP").pipe(Config.withDefault("ledger-builders")),
  maxDeliveries: Config.Int("LEDGER_MAX_DELIVERIES").pipe(Config.withDefault(5)),
  builderConsumers: Config.Int("LEDGER_BUILDER_CONSUMERS").pipe(Config.withDefault(1)),
  builderBatchSize: Config.option(Config.Int("LEDGER_BUILDER_BATCH_SIZE")),
  builderBatchMb: Config.Number("LEDGER_BUILDER_BATCH_MB").pipe(Config.withDefault(32)),
  builderLingerMs: Config.Int("LEDGER_BUILDER_LINGER_MS").pipe(Config.withDefault(100)),
  reclaimIdleMs: Config.Int("LEDGER_RECLAIM_IDLE_MS").pipe(Config.withDefault(60_000)),
  gatewayMaxBodyBytes: Config.Int("LEDGER_GATEWAY_MAX_BODY_BYTES").pipe(Config.withDefault(10 * 1024 * 1024)),
  captureMaxAnswerBytes: Config.Int("LEDGER_CAPTURE_MAX_ANSWER_BYTES").pipe(Config.withDefault(4 * 1024 * 1024)),
  httpHeadersTimeoutMs: Config.Int("LEDGER_HTTP_HEADERS_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
  httpRequestTimeoutMs: Config.Int("LEDGER_HTTP_REQUEST_TIMEOUT_MS").pipe(Config.withDefault(120_000)),
  httpMaxConnections: Config.Int("LEDGER_HTTP_MAX_CONNECTIONS").pipe(Config.withDefault(4_096)),
  gatewayAuthStaleHours: Config.Number("LEDGER_GATEWAY_AUTH_STALE_HOURS").pipe(Config.withDefault(12)),
  databasePoolSize: Config.Int("LEDGER_DATABASE_POOL_SIZE").pipe(Config.withDefault(16)),
  responsesStateMb: Config.Number("LEDGER_RESPONSES_STATE_MB").pipe(Config.withDefault(256)),
  upstreamTimeoutMs: Config.Int("LEDGER_UPSTREAM_TIMEOUT_MS").pipe(Config.withDefault(300_000)),
  upstreamConnections: Config.Int("LEDGER_UPSTREAM_CONNECTIONS").pipe(Config.withDefault(512)),
  captureQueueCapacity: Config.Int("LEDGER_CAPTURE_QUEUE_CAPACITY").pipe(Config.withDefault(10_000)),
  captureBatchSize: Config.Int("LEDGER_CAPTURE_BATCH_SIZE").pipe(Config.withDefault(256)),
  captureRetainMb: Config.Number("LEDGER_CAPTURE_RETAIN_MB").pipe(Config.withDefault(1024)),
  captureDedupTtlSeconds: Config.Int("LEDGER_CAPTURE_DEDUP_TTL_SECONDS").pipe(Config.withDefault(7 * 24 * 3600)),
  apiRateLimit: Config.Number("LEDGER_API_RATE_LIMIT").pipe(Config.withDefault(100)),
  oidcIssuer: Config.option(Config.String("LEDGER_OIDC_ISSUER")),
  oidcClientId: Config.option(Config.String("LEDGER_OIDC_CLIENT_ID")),
  oidcClientSecret: Config.option(Config.Redacted("LEDGER_OIDC_CLIENT_SECRET")),
  oidcAllowedDomains: Config.String("LEDGER_OIDC_ALLOWED_DOMAINS").pipe(Config.withDefault("")),
  signup: Config.Literals(SIGNUP_POLICIES, "LEDGER_SIGNUP").pipe(Config.withDefault("invite" as const)),
  integrityKey: Config.option(Config.Redacted("LEDGER_INTEGRITY_KEY")),
  retentionDays: Config.option(Config.Number("LEDGER_RETENTION_DAYS")),
  analyticsIntervalMs: Config.Int("LEDGER_ANALYTICS_INTERVAL_MS").pipe(Config.withDefault(defaultAnalyticsSettings.intervalMs)),
  analyticsYieldBacklog: Config.Int("LEDGER_ANALYTICS_YIELD_BACKLOG").pipe(Config.withDefault(defaultAnalyticsSettings.yieldBacklog)),
  analyticsYieldAgeMs: Config.Int("LEDGER_ANALYTICS_YIELD_AGE_MS").pipe(Config.withDefault(defaultAnalyticsSettings.yieldAgeMs)),
  embeddingsModel: Config.option(Config.String("LEDGER_EMBEDDINGS_MODEL")),
  summaryModel: Config.option(Config.String("LEDGER_SUMMARY_MODEL")),
  analyticsApiKey: Config.option(Config.Redacted("LEDGER_ANALYTICS_API_KEY")),
  roiHourlyRateUsd: Config.Number("LEDGER_ROI_HOURLY_RATE_USD").pipe(Config.withDefault(defaultAnalyticsSettings.roiHourlyRateUsd)),
  roiMinutesSaved: Config.String("LEDGER_ROI_MINUTES_SAVED").pipe(Config.withDefault(""))
})

/** The settings as the variables give them, before they are checked and combined. */
type RawSettings = Config.Success<typeof rawSettings>

const settingsOf = (c: RawSettings): LedgerSettings => ({
    host: c.host,
    apiPort: c.apiPort,
    gatewayPort: c.gatewayPort,
    gatewayWorkers: checkedGatewayWorkers(c.gatewayWorkers, "LEDGER_GATEWAY_WORKERS"),
    publicUrl: trimSlash(Option.getOrElse(c.publicUrl, () => `http://${c.host}:${c.apiPort}`)),
    gatewayUrl: Option.map(c.gatewayUrl, trimSlash),
    dataDir: Path.resolve(c.dataDir),
    databaseUrl: c.databaseUrl,
    // a replica of the embedded database cannot exist
    databaseReadUrl: Option.isSome(c.databaseUrl) ? c.databaseReadUrl : Option.none(),
    redisUrl: Option.orElse(c.redisUrl, () => Option.map(Option.fromNullishOr(clusterNodes(c.redisCluster)[0]), Redacted.make)),
    redisCluster: clusterNodes(c.redisCluster).map((url) => Redacted.make(url)),
    providers: {
      openaiBaseUrl: trimSlash(c.openaiBaseUrl),
      azureBaseUrl: Option.map(c.azureBaseUrl, trimSlash),
      azureApiVersion: c.azureApiVersion,
      anthropicBaseUrl: trimSlash(c.anthropicBaseUrl),
      geminiBaseUrl: trimSlash(c.geminiBaseUrl),
      bedrockBaseUrl: trimSlash(
        Option.getOrElse(c.bedrockBaseUrl, () => `https://bedrock-runtime.${c.bedrockRegion}.amazonaws.com`)
      ),
      bedrockRegion: c.bedrockRegion,
      upstreams: parseUpstreams(c.upstreams)
    },
    sessionGapMinutes: c.sessionGapMinutes,
    logLevel: c.logLevel,
    streamKey: c.streamKey,
    captureShards: checkedCaptureShards(c.captureShards),
    streamGroup: c.streamGroup,
    maxDeliveries: c.maxDeliveries,
    builderConsumers: c.builderConsumers,
    // embedded PGlite runs a statement on the serving thread: its batches stay short
    builderBatchSize: Option.getOrElse(c.builderBatchSize, () => (Option.isSome(c.databaseUrl) ? 4_000 : 500)),
    builderBatchBytes: Math.max(1, c.builderBatchMb * 1024 * 1024),
    builderLingerMs: Math.max(0, c.builderLingerMs),
    reclaimIdleMs: c.reclaimIdleMs,
    gatewayMaxBodyBytes: c.gatewayMaxBodyBytes,
    captureMaxAnswerBytes: Math.max(64 * 1024, c.captureMaxAnswerBytes),
    httpHeadersTimeoutMs: Math.max(1, c.httpHeadersTimeoutMs),
    // Node requires the request's timeout to be at least its headers'
    httpRequestTimeoutMs: Math.max(c.httpHeadersTimeoutMs, c.httpRequestTimeoutMs),
    httpMaxConnections: Math.max(1, c.httpMaxConnections),
    gatewayAuthStaleMs: Math.max(0, c.gatewayAuthStaleHours) * 3_600_000,
    databasePoolSize: c.databasePoolSize,
    responsesStateBytes: Math.max(0, c.responsesStateMb) * 1024 * 1024,
    upstreamTimeoutMs: c.upstreamTimeoutMs,
    upstreamConnections: c.upstreamConnections,
    captureQueueCapacity: c.captureQueueCapacity,
    captureBatchSize: c.captureBatchSize,
    captureRetainBytes: Math.max(0, c.captureRetainMb) * 1024 * 1024,
    captureDedupTtlSeconds: c.captureDedupTtlSeconds,
    apiRateLimit: c.apiRateLimit,
    oidc: parseOidc(c.oidcIssuer, c.oidcClientId, c.oidcClientSecret, c.oidcAllowedDomains),
    signup: c.signup,
    integrityKey: c.integrityKey,
    retentionDays: Option.map(c.retentionDays, (days) => {
      if (!(days > 0)) throw new SettingProblem(`LEDGER_RETENTION_DAYS must be a positive number of days, not ${days}`)
      return days
    }),
    analytics: {
      intervalMs: c.analyticsIntervalMs,
      yieldBacklog: c.analyticsYieldBacklog,
      yieldAgeMs: c.analyticsYieldAgeMs,
      embeddingsModel: c.embeddingsModel,
      summaryModel: c.summaryModel,
      modelApiKey: c.analyticsApiKey,
      roiHourlyRateUsd: c.roiHourlyRateUsd,
      roiMinutesSaved: parseMinutesSaved(c.roiMinutesSaved)
    }
  })

/** Every setting, checked: a variable that cannot be used fails with a ConfigError naming it. */
export const settingsConfig: Config.Config<LedgerSettings> = rawSettings.pipe(
  Config.mapEffect((raw) =>
    Effect.try({
      try: () => settingsOf(raw),
      catch: (problem) => new Config.ConfigError(new ConfigProvider.SourceError({ message: (problem as Error).message }))
    })
  )
)

export class LedgerConfig extends Context.Service<LedgerConfig, LedgerSettings>()("ledger/config/LedgerConfig") {
  /** Reads the environment (through the current ConfigProvider). */
  static readonly layer = Layer.effect(LedgerConfig, Effect.map(settingsConfig, LedgerConfig.of))
  /** Fixed settings, for tests and tools that build them themselves. */
  static readonly layerFrom = (settings: LedgerSettings) => Layer.succeed(LedgerConfig, settings)
}
