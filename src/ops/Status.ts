/**
 * `ledger status` (docs/ARCHITECTURE.md, "Surfaces"; docs/operations.md): the pipeline's figures for an operator,
 * from wherever they live.
 *
 * - Stream length, group lag, pending, oldest pending age, how far behind ingest runs, dead letters: from Redis when REDIS_URL is set. Without
 *   it the stream is in-process, inside the serving process: the figures come from its `/metrics`.
 * - Spool: the gateway's spool files under `<data dir>/spool/`.
 * - Decisions per second over the last minute: from the database's throughput record (a control-role query) when
 *   DATABASE_URL is set. The embedded database belongs to the serving process, so then the rate comes from two
 *   readings of its `ledger_decisions_built_total` a second apart.
 *
 * A source that cannot be reached leaves its figures empty and says why in `problems`; the report itself never fails.
 */
import { Context, Duration, Effect, Layer, Option } from "effect"
import { CaptureShards, shardStats, totalStats } from "../capture/CaptureShards.ts"
import type { DeadLetter, StreamPersistence, StreamStats } from "../capture/CaptureStream.ts"
import { readSpoolStats, type SpoolStats } from "../capture/Spool.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"

export interface StreamFigures {
  /** `redis`, or `metrics` when read from the serving process's /metrics (in-process stream) */
  readonly source: "redis" | "metrics"
  readonly length: number | null
  readonly lag: number | null
  readonly pending: number | null
  readonly oldest_pending_ms: number | null
  /** how long ago the oldest capture not yet committed was appended (see `StreamStats`) */
  readonly oldest_waiting_ms: number | null
  readonly dead_letters: number | null
  readonly consumers: number | null
  /** whether Redis keeps the stream across a restart (Redis source only) */
  readonly persistence: StreamPersistence | null
  /** each shard's figures when the stream has several (LEDGER_CAPTURE_SHARDS; Redis source only) */
  readonly shards?: ReadonlyArray<ShardFigures>
}

export interface ShardFigures extends Omit<StreamStats, "backend"> {
  readonly shard: number
}

export interface BuildFigures {
  readonly source: "database" | "metrics"
  readonly decisions_per_second: number
  /** decisions built in the last minute (database source only) */
  readonly decisions_last_minute: number | null
  /** builder consumers that committed decisions in the last minute (database source only) */
  readonly active_builders: number | null
}

export interface PipelineReport {
  /** ISO time of the report */
  readonly at: string
  readonly stream: StreamFigures | null
  readonly spool: SpoolStats | null
  readonly builders: BuildFigures | null
  /** mean time from a model call's end to its decision's commit, over this process's builders since they started */
  readonly build_latency_ms: number | null
  readonly problems: ReadonlyArray<string>
}

const PROBE_TIMEOUT = Duration.seconds(3)
const RATE_SAMPLE = Duration.seconds(1)

const messageOf = (error: unknown) => (error instanceof Error ? error.message : typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error))

/** Reads the unlabelled samples of a Prometheus exposition. */
export const parseMetrics = (text: string): ReadonlyMap<string, number> => {
  const values = new Map<string, number>()
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*) (\S+)$/.exec(line.trim())
    if (match !== null) values.set(match[1]!, Number(match[2]))
  }
  return values
}

export class PipelineStatus extends Context.Service<PipelineStatus, {
  readonly report: Effect.Effect<PipelineReport>
}>()("ledger/ops/PipelineStatus") {
  /** Uses the capture stream and the database when they are provided (shared Redis / external Postgres). */
  static readonly layer = Layer.effect(
    PipelineStatus,
    Effect.gen(function*() {
      const config = yield* LedgerConfig
      const shards = yield* Effect.serviceOption(CaptureShards)
      const tenantSql = yield* Effect.serviceOption(TenantSql)
      const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host
      const metricsUrl = `http://${host.includes(":") ? `[${host}]` : host}:${config.apiPort}/metrics`

      const scrape = Effect.tryPromise({
        try: async (signal) => {
          const response = await fetch(metricsUrl, { signal })
          if (!response.ok) throw new Error(`HTTP ${response.status}`)
          return parseMetrics(await response.text())
        },
        catch: (error) => `the serving process's ${metricsUrl} is not reachable (${messageOf(error)})`
      }).pipe(Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.fail(`${metricsUrl} did not answer`) }))

      const streamFigures: Effect.Effect<StreamFigures, string> = Option.match(shards, {
        onSome: (shards) =>
          Effect.all([shardStats(shards), shards.streams[0]!.persistence.pipe(Effect.orElseSucceed(() => null))]).pipe(
            Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.fail({ message: "Redis did not answer" }) }),
            Effect.map(([each, persistence]): StreamFigures => {
              const stats = totalStats(each)
              return {
                source: "redis",
                length: stats.length,
                lag: stats.lag,
                pending: stats.pending,
                oldest_pending_ms: stats.oldest_pending_ms,
                oldest_waiting_ms: stats.oldest_waiting_ms,
                dead_letters: stats.dead_letters,
                consumers: stats.consumers,
                persistence,
                ...(each.length > 1 ? { shards: each.map(({ shard, stats }): ShardFigures => ({
                  shard,
                  length: stats.length,
                  lag: stats.lag,
                  pending: stats.pending,
                  oldest_pending_ms: stats.oldest_pending_ms,
                  oldest_waiting_ms: stats.oldest_waiting_ms,
                  dead_letters: stats.dead_letters,
                  consumers: stats.consumers
                })) } : {})
              }
            }),
            Effect.mapError((error) => `stream: ${error.message}`)
          ),
        onNone: () =>
          scrape.pipe(
            Effect.map((metrics): StreamFigures => {
              const value = (name: string) => metrics.get(name) ?? null
              const ms = (name: string) => {
                const seconds = value(name)
                return seconds === null || seconds === 0 ? null : Math.round(seconds * 1000)
              }
              return {
                source: "metrics",
                length: value("ledger_stream_length"),
                lag: value("ledger_stream_group_lag"),
                pending: value("ledger_stream_pending"),
                oldest_pending_ms: ms("ledger_stream_oldest_pending_seconds"),
                oldest_waiting_ms: ms("ledger_stream_oldest_waiting_seconds"),
                dead_letters: value("ledger_dead_letters"),
                consumers: null,
                persistence: null
              }
            }),
            Effect.mapError((problem) => `stream (in-process, no REDIS_URL): ${problem}`)
          )
      })

      const buildFigures: Effect.Effect<BuildFigures, string> = Option.match(tenantSql, {
        onSome: (tenantSql) =>
          tenantSql.control(ScopedSql.use((sql) =>
            sql<{ decisions: number; builders: number }>`
              SELECT COALESCE(sum(decisions), 0)::int AS decisions, count(DISTINCT split_part(consumer, '/', 1))::int AS builders
              FROM pipeline_throughput
              WHERE second >= date_trunc('second', now()) - interval '60 seconds' AND second < date_trunc('second', now())`
          )).pipe(
            Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.fail({ message: "the database did not answer" }) }),
            Effect.map(([row]): BuildFigures => ({
              source: "database",
              decisions_per_second: Math.round((row!.decisions / 60) * 10) / 10,
              decisions_last_minute: row!.decisions,
              active_builders: row!.builders
            })),
            Effect.mapError((error) => `decisions/s: ${messageOf(error)}`)
          ),
        onNone: () =>
          Effect.gen(function*() {
            const counter = (metrics: ReadonlyMap<string, number>) => metrics.get("ledger_decisions_built_total") ?? 0
            const first = yield* scrape
            yield* Effect.sleep(RATE_SAMPLE)
            const second = yield* scrape
            return {
              source: "metrics" as const,
              decisions_per_second: Math.max(0, counter(second) - counter(first)) / Duration.toSeconds(RATE_SAMPLE),
              decisions_last_minute: null,
              active_builders: null
            }
          }).pipe(Effect.mapError((problem) => `decisions/s (embedded database): ${problem}`))
      })

      const buildLatency = scrape.pipe(
        Effect.map((metrics) => {
          const count = metrics.get("ledger_build_latency_seconds_count") ?? 0
          return count > 0 ? Math.round(((metrics.get("ledger_build_latency_seconds_sum") ?? 0) / count) * 1000) : null
        }),
        Effect.orElseSucceed(() => null)
      )

      const report = Effect.gen(function*() {
        const [streamResult, buildResult, build_latency_ms] = yield* Effect.all([Effect.result(streamFigures), Effect.result(buildFigures), buildLatency], {
          concurrency: 3
        })
        const problems: Array<string> = []
        const spool = yield* Effect.try({ try: () => readSpoolStats(config.dataDir), catch: messageOf }).pipe(
          Effect.catch((problem) => Effect.sync(() => problems.push(`spool: ${problem}`)).pipe(Effect.as(null)))
        )
        if (streamResult._tag === "Failure") problems.push(streamResult.failure)
        if (buildResult._tag === "Failure") problems.push(buildResult.failure)
        return {
          at: new Date().toISOString(),
          stream: streamResult._tag === "Success" ? streamResult.success : null,
          spool,
          builders: buildResult._tag === "Success" ? buildResult.success : null,
          build_latency_ms,
          problems
        }
      }).pipe(Effect.withSpan("PipelineStatus.report"))

      return PipelineStatus.of({ report })
    })
  )
}

// --- rendering for people

const number = (value: number | null | undefined) => (value === null || value === undefined ? "—" : value.toLocaleString("en-US"))

export const formatBytes = (bytes: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`
}

export const formatAge = (ms: number | null): string =>
  ms === null ? "—" : ms < 1_000 ? `${ms} ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : ms < 7_200_000 ? `${Math.round(ms / 60_000)} min` : `${(ms / 3_600_000).toFixed(1)} h`

/** Rows as a two-or-more column table: the first column padded, cells separated by two spaces. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows.reduce<Array<number>>((w, row) => row.map((cell, i) => Math.max(w[i] ?? 0, cell.length)), [])
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ").trimEnd()).join("\n")
}

export const renderReport = (report: PipelineReport): string => {
  const { builders, spool, stream } = report
  const rows: Array<Array<string>> = [
    ["stream length", number(stream?.length), stream === null ? "" : stream.source === "redis" ? "(Redis)" : "(in-process, from /metrics)"],
    ["group lag", number(stream?.lag), "captures not yet delivered to a builder"],
    ["pending", number(stream?.pending), stream?.oldest_pending_ms == null ? "" : `oldest ${formatAge(stream.oldest_pending_ms)}`],
    ["behind", stream?.oldest_waiting_ms == null ? "—" : formatAge(stream.oldest_waiting_ms), "since the oldest capture not yet committed arrived"],
    ["dead letters", number(stream?.dead_letters), (stream?.dead_letters ?? 0) > 0 ? "ledger dlq list" : ""],
    ["consumers", number(stream?.consumers), ""],
    ...(stream?.persistence == null ? [] : [[
      "persistence",
      stream.persistence.durable === null ? "unknown" : stream.persistence.durable ? "yes" : "NONE",
      stream.persistence.durable === false
        ? `${stream.persistence.detail}: a Redis restart loses what the stream holds (gateways publish again what they keep)`
        : stream.persistence.detail
    ]]),
    ...(stream?.shards ?? []).map((shard) => [
      `  shard ${shard.shard}`,
      `lag ${number(shard.lag)}`,
      `pending ${number(shard.pending)}${shard.oldest_pending_ms === null ? "" : ` (oldest ${formatAge(shard.oldest_pending_ms)})`}${
        shard.oldest_waiting_ms === null ? "" : `, behind ${formatAge(shard.oldest_waiting_ms)}`
      }, length ${
        number(shard.length)
      }, dead letters ${number(shard.dead_letters)}`
    ]),
    ["spool", spool === null ? "—" : `${number(spool.entries)} captures`, spool === null ? "" : formatBytes(spool.bytes)],
    [
      "decisions/s",
      builders === null ? "—" : builders.decisions_per_second.toFixed(1),
      builders === null
        ? ""
        : builders.source === "database"
        ? `last minute: ${number(builders.decisions_last_minute)} by ${number(builders.active_builders)} builder${builders.active_builders === 1 ? "" : "s"}`
        : "last second, from /metrics"
    ]
  ]
  const lines = [`ledger pipeline  ${report.at}`, "", table(rows)]
  if (report.problems.length > 0) lines.push("", "problems:", ...report.problems.map((problem) => `  ${problem}`))
  return lines.join("\n")
}

const REASON_CHARS = 80

/** The dead letters as a table; `ledger_id` and agent are read from the payload when it is JSON. */
export const renderDeadLetters = (letters: ReadonlyArray<DeadLetter>): string => {
  if (letters.length === 0) return "no dead letters"
  const rows = letters.map((letter) => {
    const identity = deadLetterIdentity(letter)
    const reason = letter.reason.length > REASON_CHARS ? `${letter.reason.slice(0, REASON_CHARS - 1)}…` : letter.reason
    return [letter.id, new Date(letter.failed_at).toISOString(), String(letter.deliveries), identity.ledger_id ?? "—", identity.agent_id ?? "—", reason]
  })
  return table([["ID", "FAILED AT", "DELIVERIES", "LEDGER ID", "AGENT", "REASON"], ...rows])
}

/** The capture's ids, when the payload is readable enough to name them. */
export const deadLetterIdentity = (letter: DeadLetter): { readonly ledger_id: string | null; readonly agent_id: string | null } => {
  try {
    const value = JSON.parse(letter.payload) as Record<string, unknown>
    return {
      ledger_id: typeof value.ledger_id === "string" ? value.ledger_id : null,
      agent_id: typeof value.agent_id === "string" ? value.agent_id : null
    }
  } catch {
    return { ledger_id: null, agent_id: null }
  }
}
