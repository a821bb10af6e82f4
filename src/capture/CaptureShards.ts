/**
 * The capture stream in shards (docs/ARCHITECTURE.md, "Shards"): LEDGER_CAPTURE_SHARDS streams, each with its own
 * consumer group, dead letters and producer records, and every workspace's captures in one of them (`shardOf`).
 * Builders hold leases on shards, so each one writes its own workspaces — their agents and their chains — and their
 * transactions do not wait for one another's locks; on a Redis Cluster each shard's keys share their own hash tag, so
 * the cluster spreads the shards over its nodes.
 *
 * Shard 0 is the stream at LEDGER_STREAM_KEY, as without shards; shard i is `<key>:<i>`. Gateways raise a record of
 * how many shards may hold captures (`<key>:shards`, never lowered by them) and builders read every shard it names:
 * after LEDGER_CAPTURE_SHARDS is lowered they drain the shards beyond it, then lower the record once those are empty.
 * A capture in another shard than its workspace's (a spool adopted across a resharding) costs parallelism, never
 * correctness: every builder still locks the agents and chains it writes.
 */
import { Context, Effect, Layer, Scope, Semaphore } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { CaptureStream, type DeadLetter, type StreamStats, StreamUnavailable } from "./CaptureStream.ts"
import * as RedisCaptureStream from "./RedisCaptureStream.ts"
import { call, clusterKey, connect, resolveTarget } from "./redisConnection.ts"

/**
 * FNV-1a over the workspace's identity, then murmur3's finaliser (ids that differ in their last characters would
 * otherwise fall into few shards): stable across processes and versions, cheap on the hot path.
 */
export const shardIndex = (scope: WorkspaceScope, shards: number): number => {
  if (shards <= 1) return 0
  let hash = 0x811c9dc5
  for (const part of [scope.tenant_id, scope.workspace_id]) {
    for (let i = 0; i < part.length; i++) {
      hash ^= part.charCodeAt(i)
      hash = Math.imul(hash, 0x01000193)
    }
    hash ^= 0x2f
    hash = Math.imul(hash, 0x01000193)
  }
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return (hash >>> 0) % shards
}

/** The stream key of shard `index`. */
export const shardKey = (key: string, index: number) => index === 0 ? key : `${key}:${index}`

export class CaptureShards extends Context.Service<CaptureShards, {
  /** the streams captures are published to, shard by shard (LEDGER_CAPTURE_SHARDS of them; one in embedded mode) */
  readonly streams: ReadonlyArray<CaptureStream["Service"]>
  /** the shard of a workspace's captures */
  shardOf(scope: WorkspaceScope): number
  /** shard `index`'s stream, also one beyond `streams` left by a resharding (opened on first use) */
  stream(index: number): Effect.Effect<CaptureStream["Service"], StreamUnavailable>
  /** how many shards may hold captures: the record gateways raise, never fewer than `streams` */
  readonly recorded: Effect.Effect<number, StreamUnavailable>
  /** raises the record to `streams.length` (gateways); returns the record */
  readonly register: Effect.Effect<number, StreamUnavailable>
  /** lowers the record to `streams.length` if it still is `from` (a gateway may have raised it since); returns it */
  lower(from: number): Effect.Effect<number, StreamUnavailable>
  /**
   * One round of builder `name`'s leases over `shards` shards (see redisScripts' claimShards): renews, gives up and
   * takes leases so that it holds its fair share; returns the shards it holds.
   */
  claim(name: string, shards: number, ttlMs: number): Effect.Effect<ReadonlyArray<number>, StreamUnavailable>
  /** Gives up builder `name`'s leases and its place among the builders (at shutdown). */
  release(name: string, shards: number): Effect.Effect<void, StreamUnavailable>
}>()("ledger/capture/CaptureShards") {
  /**
   * The one stream provided as CaptureStream, unsharded (embedded mode, the in-process stream): one process, one
   * builder, nothing to coordinate.
   */
  static readonly single: Layer.Layer<CaptureShards, never, CaptureStream> = Layer.effect(
    CaptureShards,
    Effect.gen(function*() {
      const stream = yield* CaptureStream
      return CaptureShards.of({
        streams: [stream],
        shardOf: () => 0,
        stream: () => Effect.succeed(stream),
        recorded: Effect.succeed(1),
        register: Effect.succeed(1),
        lower: () => Effect.succeed(1),
        claim: () => Effect.succeed([0]),
        release: () => Effect.void
      })
    })
  )

  /** The shards on Redis (one Redis or a cluster), and shard 0 as CaptureStream (status, dead letters, health). */
  static readonly redis: Layer.Layer<CaptureShards | CaptureStream, StreamUnavailable, LedgerConfig> = Layer.effect(
    CaptureStream,
    Effect.map(CaptureShards, (shards) => shards.streams[0]!)
  ).pipe(Layer.provideMerge(Layer.effect(CaptureShards, Effect.suspend(() => makeRedis))))
}

const makeRedis: Effect.Effect<CaptureShards["Service"], StreamUnavailable, LedgerConfig | Scope.Scope> = Effect.gen(function*() {
  const settings = yield* LedgerConfig
  const target = yield* resolveTarget(settings)
  // one connection for every shard's publishes, acks and administration, and the leases (commands pipeline on it);
  // blocking reads get connections of their own
  const client = yield* connect(target, "capture stream")
  // shards left by a resharding open later, in the layer's scope
  const context = yield* Effect.context<LedgerConfig | Scope.Scope>()
  const base = settings.streamKey
  const count = settings.captureShards
  const open = (index: number) =>
    RedisCaptureStream.make(target, client, shardKey(base, index)).pipe(Effect.provideContext(context))
  const streams: Array<CaptureStream["Service"]> = []
  for (let index = 0; index < count; index++) streams.push(yield* open(index))
  const retired = new Map<number, CaptureStream["Service"]>()
  const opening = yield* Semaphore.make(1)
  const stream = (index: number) =>
    index < count ? Effect.succeed(streams[index]!) : Semaphore.withPermits(opening, 1)(Effect.suspend(() => {
      const known = retired.get(index)
      return known !== undefined ? Effect.succeed(known) : Effect.tap(open(index), (opened) => Effect.sync(() => retired.set(index, opened)))
    }))

  // the record, the builders' register and the leases share shard 0's hash slot: one script touches them together
  const coordination = target.cluster.length > 0 ? clusterKey(base) : base
  const record = `${coordination}:shards`
  const register = `${coordination}:builders`
  const leases = (shards: number) => Array.from({ length: shards }, (_, i) => `${coordination}:owner:${i}`)
  const recorded = call(client, "GET shards", () => client.get(record)).pipe(
    Effect.map((value) => Math.max(count, Number(value ?? 0) || 0))
  )
  return CaptureShards.of({
    streams,
    shardOf: (agent) => shardIndex(agent, count),
    stream,
    recorded,
    register: call(client, "raise shards", () => client.raiseShards(record, count)),
    lower: (from) => call(client, "lower shards", () => client.lowerShards(record, from, count)),
    claim: (name, shards, ttlMs) => call(client, "claim shards", () => client.claimShards(register, leases(shards), name, ttlMs)),
    release: (name, shards) => Effect.asVoid(call(client, "release shards", () => client.releaseShards(register, leases(shards), name)))
  })
})

/** One shard's figures. */
export interface ShardStats {
  readonly shard: number
  readonly stats: StreamStats
}

/** The figures of every shard the record names (retired ones still draining included). */
export const shardStats = (shards: CaptureShards["Service"]) =>
  Effect.flatMap(shards.recorded, (count) =>
    Effect.forEach(
      Array.from({ length: count }, (_, shard) => shard),
      (shard) =>
        Effect.flatMap(shards.stream(shard), (stream) => stream.stats).pipe(
          Effect.map((stats): ShardStats => ({ shard, stats })),
          // which shard: on a cluster the others may answer
          Effect.mapError((error) => count > 1 ? new StreamUnavailable({ message: `shard ${shard}: ${error.message}`, cause: error.cause }) : error)
        ),
      { concurrency: "unbounded" }
    ))

/** The shards' figures added up: the stream as a whole (lag unknown when any shard's is; the oldest of all). */
export const totalStats = (each: ReadonlyArray<ShardStats>): StreamStats => {
  const oldest = (field: "oldest_pending_ms" | "oldest_waiting_ms") =>
    each.reduce<number | null>((max, { stats }) => stats[field] === null ? max : Math.max(max ?? 0, stats[field]), null)
  const sum = (field: "length" | "pending" | "dead_letters" | "consumers") => each.reduce((total, { stats }) => total + stats[field], 0)
  return {
    backend: each[0]?.stats.backend ?? "redis",
    length: sum("length"),
    lag: each.some(({ stats }) => stats.lag === null) ? null : each.reduce((total, { stats }) => total + stats.lag!, 0),
    pending: sum("pending"),
    oldest_pending_ms: oldest("oldest_pending_ms"),
    oldest_waiting_ms: oldest("oldest_waiting_ms"),
    dead_letters: sum("dead_letters"),
    consumers: sum("consumers")
  }
}

/** A dead letter and its shard; its id names the shard too (`<shard>/<id>` beyond shard 0, for `ledger dlq replay`). */
export interface ShardDeadLetter extends DeadLetter {
  readonly shard: number
}

const SHARD_LETTER = /^(\d{1,4})\/(\d+-\d+)$/

/** The oldest `count` dead letters over every shard the record names, oldest first. */
export const listDeadLetters = Effect.fnUntraced(function*(shards: CaptureShards["Service"], count: number) {
  const recorded = yield* shards.recorded
  const letters: Array<ShardDeadLetter> = []
  for (let shard = 0; shard < recorded; shard++) {
    const stream = yield* shards.stream(shard)
    for (const letter of yield* stream.listDeadLetters({ count })) {
      letters.push({ ...letter, shard, id: shard === 0 ? letter.id : `${shard}/${letter.id}` })
    }
  }
  return letters.sort((a, b) => a.failed_at - b.failed_at).slice(0, count)
})

/** Re-publishes dead letters — all, or the given ids (as `listDeadLetters` names them) — each into its own shard. */
export const replayDeadLetters = Effect.fnUntraced(function*(shards: CaptureShards["Service"], ids?: ReadonlyArray<string>) {
  const recorded = yield* shards.recorded
  let replayed = 0
  for (let shard = 0; shard < recorded; shard++) {
    const stream = yield* shards.stream(shard)
    if (ids === undefined) {
      replayed += yield* stream.replayDeadLetters()
      continue
    }
    const own = ids.flatMap((id) => {
      const match = SHARD_LETTER.exec(id)
      const of = match === null ? 0 : Number(match[1])
      return of === shard ? [match === null ? id : match[2]!] : []
    })
    if (own.length > 0) replayed += yield* stream.replayDeadLetters(own)
  }
  return replayed
})
