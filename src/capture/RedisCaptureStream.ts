/**
 * The capture stream on Redis Streams (docs/ARCHITECTURE.md, "One call", step 3): one stream read by the builders'
 * consumer group, a `<key>:dead` stream for dead letters. The stream belongs to that one group: trimming follows its
 * progress.
 *
 * Connections: one client for publish, ack and administration (shared by the shards of a sharded stream), and one
 * per consumer name for blocking XREADGROUP (a blocked command holds its connection; sharing one would queue each
 * consumer behind the others).
 * Every operation fails fast with StreamUnavailable while Redis is unreachable, so the gateway spills to its
 * spool at once; the clients keep reconnecting with backoff and operations succeed again when Redis returns.
 *
 * Publishing is idempotent per batch (BatchId): `<key>:producer:<producer>` holds the producer's highest batch
 * number appended, and one Lua script checks it, appends the batch and records it atomically. Memory: one small
 * key per publisher instance (a gateway process start), kept LEDGER_CAPTURE_DEDUP_TTL_SECONDS after its last
 * publish — not one per batch, which at ~200 batches/s per gateway would hold millions of keys for a day-long
 * window.
 */
import { Clock, Effect, Layer, type Scope } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import {
  type BatchId,
  type CapturePayload,
  CaptureStream,
  type DeadLetter,
  type StreamEntry,
  StreamUnavailable,
  successor,
  trimPeriodically
} from "./CaptureStream.ts"
import { call, type Client, clusterKey, COMMAND_TIMEOUT_MS, connect, errorMessage, readerOf, type RedisTarget, resolveTarget } from "./redisConnection.ts"

/** dead letters moved per MULTI when replaying all of them */
const REPLAY_PAGE = 500

/** An entry as node-redis returns it (its XREADGROUP typing leaves messages untyped). */
interface StreamMessage {
  readonly id: string
  readonly message: Readonly<Record<string, string>>
}

/** The group (or the whole stream) is gone: first use, or Redis restarted without persistence. */
const isMissingGroup = (error: StreamUnavailable) => {
  const message = errorMessage(error.cause)
  return message.startsWith("NOGROUP") || message === "ERR no such key"
}

/**
 * The capture stream at `key` (wrapped in a hash tag on a cluster) over `client` (publish, ack, administration), with
 * its own blocking readers, closed with the scope. The shards of a sharded stream share one client (CaptureShards).
 */
export const make = Effect.fnUntraced(function*(
  target: RedisTarget,
  client: Client,
  baseKey: string
): Effect.fn.Return<CaptureStream["Service"], never, LedgerConfig | Scope.Scope> {
  const settings = yield* LedgerConfig
  const key = target.cluster.length > 0 ? clusterKey(baseKey) : baseKey
  const group = settings.streamGroup
  const deadKey = `${key}:dead`
  const readers = new Map<string, Client>()
  // Blocked reads are abandoned on shutdown: what they would have delivered stays pending and is reclaimed.
  yield* Effect.addFinalizer(() => Effect.sync(() => readers.forEach((reader) => reader.destroy())))
  const readerFor = (consumer: string) =>
    Effect.suspend(() => {
      const existing = readers.get(consumer)
      return existing !== undefined ? Effect.succeed(existing) : readerOf(client, target, `reader ${consumer}`).pipe(
        Effect.tap((reader) => Effect.sync(() => readers.set(consumer, reader)))
      )
    })

  const ensureGroup = call(client, "XGROUP CREATE", () =>
    client.xGroupCreate(key, group, "0", { MKSTREAM: true }).catch((error: unknown) => {
      if (!errorMessage(error).startsWith("BUSYGROUP")) throw error
    }))

  /** Creates the group on first use (or after Redis lost it) and retries once. */
  const withGroup = <A>(effect: Effect.Effect<A, StreamUnavailable>) =>
    effect.pipe(Effect.catchIf(isMissingGroup, () => Effect.andThen(ensureGroup, effect)))

  const ttlSeconds = Math.max(1, settings.captureDedupTtlSeconds)
  const producerKey = (producer: string) => `${key}:producer:${producer}`
  const publish = Effect.fn("CaptureStream.publish")(function*(payloads: ReadonlyArray<CapturePayload>, batch: BatchId) {
    if (payloads.length === 0) return { ids: [], previous: 0, head: null }
    // One script, one round trip: the batch is appended whole or not at all, and at most once.
    const [previous, head, ...ids] = yield* call(client, "publish", () =>
      client.publishBatch(key, producerKey(batch.producer), batch.seq, ttlSeconds, payloads))
    return { ids: ids.map(String), previous: Number(previous), head: head === "" ? null : String(head) }
  })

  const progress = Effect.fn("CaptureStream.progress")(function*(producers: ReadonlyArray<string>) {
    const [delivered, oldestPending, ...records] = yield* call(client, "progress", () =>
      client.readProgress(key, group, producers.map(producerKey)))
    return {
      committedBefore: oldestPending !== "" ? String(oldestPending) : delivered !== "" ? successor(String(delivered)) : null,
      producers: Object.fromEntries(producers.map((producer, i) => [producer, Number(records[i])]))
    }
  })

  // INFO tells whether AOF is on; RDB snapshots are on when `save` has rules (CONFIG may be refused: managed Redis).
  const persistence = Effect.gen(function*() {
    const info = yield* call(client, "INFO persistence", () => client.info("persistence"))
    const aof = /^aof_enabled:(\d)/m.exec(info)?.[1] === "1"
    const save = yield* call(client, "CONFIG GET save", () => client.configGet("save")).pipe(
      Effect.map((config) => config.save ?? null),
      Effect.catch(() => Effect.succeed(null))
    )
    const detail = `appendonly=${aof ? "yes" : "no"} save=${save === null ? "(unknown)" : JSON.stringify(save)}`
    return { durable: aof || (save !== null && save.trim() !== "") ? true : save === null ? null : false, detail }
  }).pipe(Effect.withSpan("CaptureStream.persistence"))

  const read = Effect.fn("CaptureStream.read")(
    function*(consumer: string, options: { readonly count: number; readonly blockMs: number }) {
      const reader = yield* readerFor(consumer)
      const reply = yield* withGroup(call(
        reader,
        "XREADGROUP",
        () =>
          reader.xReadGroup(
            group,
            consumer,
            { key, id: ">" },
            // BLOCK 0 would wait forever: a zero wait is a plain non-blocking read.
            options.blockMs > 0 ? { COUNT: options.count, BLOCK: options.blockMs } : { COUNT: options.count }
          ),
        Math.max(options.blockMs, 0) + COMMAND_TIMEOUT_MS
      ))
      return (reply ?? []).flatMap((stream) =>
        (stream.messages as ReadonlyArray<StreamMessage>).map((message): StreamEntry => ({
          id: message.id,
          payload: message.message.c,
          deliveries: 1
        }))
      )
    }
  )

  const ack = Effect.fn("CaptureStream.ack")(function*(ids: ReadonlyArray<string>) {
    if (ids.length === 0) return
    yield* call(client, "XACK", () => client.xAck(key, group, [...ids]))
  })

  const reclaim = Effect.fn("CaptureStream.reclaim")(
    function*(consumer: string, options: { readonly minIdleMs: number; readonly count: number }) {
      const claimed: Array<{ readonly id: string; readonly payload: string }> = []
      let cursor = "0-0"
      // One XAUTOCLAIM inspects a bounded slice of the pending list; follow the cursor so idle entries behind
      // many busy ones are still found.
      while (claimed.length < options.count) {
        const from = cursor
        const reply = yield* withGroup(call(client, "XAUTOCLAIM", () =>
          client.xAutoClaim(key, group, consumer, options.minIdleMs, from, {
            COUNT: options.count - claimed.length
          })))
        for (const message of reply.messages) {
          if (message !== null) claimed.push({ id: message.id, payload: message.message.c })
        }
        if (reply.deletedMessages.length > 0) {
          // Trimming never removes pending entries, so someone deleted them: those captures are lost.
          yield* Effect.logError("pending captures were deleted from the stream before acknowledgement", {
            stream: key,
            ids: reply.deletedMessages
          })
        }
        cursor = reply.nextId
        if (cursor === "0-0") break
      }
      if (claimed.length === 0) return []
      // XAUTOCLAIM does not report delivery counts; XPENDING per id does (one round trip for all).
      const counts = yield* call(client, "XPENDING", () =>
        Promise.all(claimed.map((entry) => client.xPendingRange(key, group, entry.id, entry.id, 1))))
      return claimed.map((entry, i): StreamEntry => ({
        ...entry,
        deliveries: counts[i][0]?.deliveriesCounter ?? 1
      }))
    }
  )

  const deadLetter = Effect.fn("CaptureStream.deadLetter")(function*(entry: StreamEntry, reason: string) {
    const failedAt = yield* Clock.currentTimeMillis
    // One MULTI: the entry is never both dead-lettered and still pending, nor acknowledged and lost.
    yield* call(client, "dead-letter", () =>
      client.multi()
        .xAdd(deadKey, "*", {
          payload: entry.payload,
          reason,
          original_id: entry.id,
          deliveries: String(entry.deliveries),
          failed_at: String(failedAt)
        })
        .xAck(key, group, entry.id)
        .exec())
  })

  const toDeadLetter = (record: StreamMessage): DeadLetter => ({
    id: record.id,
    original_id: record.message.original_id,
    payload: record.message.payload,
    reason: record.message.reason,
    deliveries: Number(record.message.deliveries),
    failed_at: Number(record.message.failed_at)
  })

  const listDeadLetters = Effect.fn("CaptureStream.listDeadLetters")(function*(options: { readonly count: number }) {
    const records = yield* call(client, "XRANGE", () => client.xRange(deadKey, "-", "+", { COUNT: options.count }))
    return (records ?? []).map(toDeadLetter)
  })

  /** Re-appends dead letters to the capture stream and deletes them from the dead-letter stream, atomically. */
  const move = (letters: ReadonlyArray<DeadLetter>) =>
    call(client, "replay", () => {
      const multi = client.multi()
      for (const letter of letters) multi.xAdd(key, "*", { c: letter.payload })
      multi.xDel(deadKey, letters.map((letter) => letter.id))
      return multi.exec()
    }).pipe(Effect.as(letters.length))

  const replayDeadLetters = Effect.fn("CaptureStream.replayDeadLetters")(function*(ids?: ReadonlyArray<string>) {
    if (ids !== undefined) {
      if (ids.length === 0) return 0
      const found = yield* call(client, "XRANGE", () =>
        Promise.all(ids.map((id) => client.xRange(deadKey, id, id))))
      const letters = found.flatMap((records) => records ?? []).map(toDeadLetter)
      return letters.length === 0 ? 0 : yield* move(letters)
    }
    // Replay up to the newest letter present now: one that fails again meanwhile waits for the next replay.
    const newest = yield* call(client, "XREVRANGE", () => client.xRevRange(deadKey, "+", "-", { COUNT: 1 }))
    if (newest === null || newest.length === 0) return 0
    const until = newest[0].id
    let replayed = 0
    while (true) {
      const page = (yield* call(client, "XRANGE", () => client.xRange(deadKey, "-", until, { COUNT: REPLAY_PAGE }))) ?? []
      if (page.length === 0) return replayed
      replayed += yield* move(page.map(toDeadLetter))
    }
  })

  const stats = withGroup(call(client, "stats", () =>
    Promise.all([
      client.xLen(key),
      client.xInfoGroups(key),
      client.xPendingRange(key, group, "-", "+", 1),
      client.waitingAge(key, group),
      client.xLen(deadKey)
    ]))).pipe(
      Effect.map(([length, groups, oldest, waiting, deadLetters]) => {
        const info = groups.find((g) => g.name === group)
        return {
          backend: "redis" as const,
          length,
          // null when Redis cannot compute it (entries deleted inside the unread range)
          lag: info?.lag ?? null,
          pending: info?.pending ?? 0,
          oldest_pending_ms: oldest[0]?.millisecondsSinceLastDelivery ?? null,
          oldest_waiting_ms: waiting < 0 ? null : waiting,
          dead_letters: deadLetters,
          consumers: info?.consumers ?? 0
        }
      }),
      Effect.withSpan("CaptureStream.stats")
    )

  const pruneIdleConsumers = Effect.fn("CaptureStream.pruneConsumers")(function*(options: { readonly minIdleMs: number }) {
    const removed = yield* withGroup(call(client, "prune consumers", () => client.pruneConsumers(key, group, options.minIdleMs)))
    return removed.map(String)
  })

  // XTRIM MINID to the oldest entry still needed: the oldest pending one, else the first never delivered.
  // XINFO must run before XPENDING (one connection runs them in the order sent): a delivery in between then
  // shows up as pending instead of moving last-delivered-id past it. Later deliveries and acks only make the
  // point conservative.
  const trim = withGroup(Effect.gen(function*() {
    const [groups, oldest] = yield* call(client, "XINFO GROUPS", () =>
      Promise.all([client.xInfoGroups(key), client.xPendingRange(key, group, "-", "+", 1)]))
    const info = groups.find((g) => g.name === group)
    if (info === undefined) return 0
    const minId = oldest.length > 0 ? oldest[0].id : successor(info["last-delivered-id"])
    return yield* call(client, "XTRIM", () => client.xTrim(key, "MINID", minId))
  })).pipe(Effect.withSpan("CaptureStream.trim"))

  yield* trimPeriodically(trim)

  return CaptureStream.of({
    backend: "redis",
    publish,
    progress,
    persistence,
    read,
    ack,
    reclaim,
    deadLetter,
    listDeadLetters,
    replayDeadLetters,
    stats,
    pruneConsumers: pruneIdleConsumers,
    trim
  })
})

/** The (unsharded) capture stream at LEDGER_STREAM_KEY. */
export const layer: Layer.Layer<CaptureStream, StreamUnavailable, LedgerConfig> = Layer.effect(
  CaptureStream,
  Effect.gen(function*() {
    const settings = yield* LedgerConfig
    const target = yield* resolveTarget(settings)
    return yield* make(target, yield* connect(target, "capture stream"), settings.streamKey)
  })
)
