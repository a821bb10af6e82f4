/**
 * The capture stream on Redis Streams (docs/ARCHITECTURE.md, "One call", step 3): one stream read by the builders'
 * consumer group, a `<key>:dead` stream for dead letters. The stream belongs to that one group: trimming follows its
 * progress.
 *
 * Connections: one client for publish, ack and administration, and one per consumer name for blocking
 * XREADGROUP (a blocked command holds its connection; sharing one would queue each consumer behind the others).
 * Every operation fails fast with StreamUnavailable while Redis is unreachable, so the gateway spills to its
 * spool at once; the clients keep reconnecting with backoff and operations succeed again when Redis returns.
 *
 * Publishing is idempotent per batch (BatchId): `<key>:producer:<producer>` holds the producer's highest batch
 * number appended, and one Lua script checks it, appends the batch and records it atomically. Memory: one small
 * key per publisher instance (a gateway process start), kept LEDGER_CAPTURE_DEDUP_TTL_SECONDS after its last
 * publish — not one per batch, which at ~200 batches/s per gateway would hold millions of keys for a day-long
 * window.
 */
import { Clock, Effect, Layer, Option, Redacted } from "effect"
import { type CommandParser, createClient, createCluster, defineScript } from "redis"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import {
  type BatchId,
  CaptureStream,
  type DeadLetter,
  type StreamEntry,
  StreamUnavailable,
  successor,
  trimPeriodically
} from "./CaptureStream.ts"

const COMMAND_TIMEOUT_MS = 5_000
const CONNECT_TIMEOUT_MS = 2_000
/** dead letters moved per MULTI when replaying all of them */
const REPLAY_PAGE = 500

/** Reconnect forever, 50 ms doubling to 2 s plus jitter, so many processes do not reconnect in lockstep. */
const reconnectDelay = (retries: number) => Math.min(50 * 2 ** retries, 2_000) + Math.floor(Math.random() * 100)

/**
 * KEYS: the stream, the producer's key. ARGV: the batch number, the producer key's TTL in seconds, the payloads.
 * Appends the payloads and records the number, unless a batch numbered at or above it was appended already. The
 * record is written after the entries: a script stopped half-way could only lead to a duplicate on retry, never to
 * a loss. Replies the producer's previous number, the stream's newest id after the call ('' for none), then the
 * ids appended.
 */
const publishBatch = defineScript({
  NUMBER_OF_KEYS: 2,
  SCRIPT: `
local seq = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq <= last then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  return {tostring(last), newest[1] and newest[1][1] or ''}
end
local reply = {tostring(last), ''}
for i = 3, #ARGV do reply[#reply + 1] = redis.call('XADD', KEYS[1], '*', 'c', ARGV[i]) end
reply[2] = reply[#reply]
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return reply`,
  parseCommand(parser: CommandParser, stream: string, producerKey: string, seq: number, ttlSeconds: number, payloads: ReadonlyArray<string>) {
    parser.pushKey(stream)
    parser.pushKey(producerKey)
    parser.push(String(seq), String(ttlSeconds), ...payloads)
  },
  transformReply: (reply: ReadonlyArray<string>) => reply
})

/**
 * KEYS: the stream, then producer keys. ARGV: the group. Replies the group's last delivered id and its oldest
 * pending id ('' for none, or both '' when there is no stream or group), then each producer's recorded number.
 * One script: the records and the group's progress are read at the same moment.
 */
const readProgress = defineScript({
  // the number of keys varies: parseCommand gives it
  SCRIPT: `
local reply = {'', ''}
for i = 2, #KEYS do reply[#reply + 1] = redis.call('GET', KEYS[i]) or '0' end
if redis.call('EXISTS', KEYS[1]) == 0 then return reply end
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
  if fields['name'] == ARGV[1] then
    reply[1] = fields['last-delivered-id']
    local oldest = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1)
    if oldest[1] then reply[2] = oldest[1][1] end
  end
end
return reply`,
  parseCommand(parser: CommandParser, stream: string, group: string, producerKeys: ReadonlyArray<string>) {
    parser.push(String(1 + producerKeys.length))
    parser.pushKey(stream)
    for (const producerKey of producerKeys) parser.pushKey(producerKey)
    parser.push(group)
  },
  transformReply: (reply: ReadonlyArray<string>) => reply
})

/**
 * KEYS: the stream. ARGV: the group, the idle threshold in ms. Deletes the consumers with nothing pending idle longer
 * than the threshold (none when the stream does not exist; a missing group fails with NOGROUP) (`idle`: since the consumer's last read or claim attempt) and returns their names. One script,
 * so no entry can be delivered to a consumer between the check and its deletion (deleting a consumer drops its
 * pending entries from the group).
 */
const pruneConsumers = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
local removed = {}
if redis.call('EXISTS', KEYS[1]) == 0 then return removed end
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local fields = {}
  for i = 1, #consumer, 2 do fields[consumer[i]] = consumer[i + 1] end
  if fields['pending'] == 0 and fields['idle'] > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], fields['name'])
    removed[#removed + 1] = fields['name']
  end
end
return removed`,
  parseCommand(parser: CommandParser, stream: string, group: string, minIdleMs: number) {
    parser.pushKey(stream)
    parser.push(group, String(Math.max(0, Math.floor(minIdleMs))))
  },
  transformReply: (reply: ReadonlyArray<string>) => reply
})

const makeClient = (url: string) =>
  createClient({
    url,
    // EVALSHA, falling back to EVAL (which caches the script) after a NOSCRIPT: the script text is sent once
    scripts: { publishBatch, readProgress, pruneConsumers },
    // node-redis otherwise queues commands while disconnected and callers wait until Redis returns.
    disableOfflineQueue: true,
    socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnectDelay },
    // node-redis's own bound on single commands; `call` bounds MULTI and pipelines as well
    commandOptions: { timeout: COMMAND_TIMEOUT_MS }
  })

type Client = ReturnType<typeof makeClient>

/**
 * A Redis Cluster client over the given start nodes, with the same per-node settings. It answers the commands this
 * stream sends as a single client does, each routed to the node of its key (every key of the stream shares one hash
 * slot: `clusterKey`), so the stream types it as one.
 */
const makeCluster = (urls: ReadonlyArray<string>) =>
  createCluster({
    rootNodes: urls.map((url) => ({ url })),
    scripts: { publishBatch, readProgress, pruneConsumers },
    defaults: { disableOfflineQueue: true, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnectDelay } },
    commandOptions: { timeout: COMMAND_TIMEOUT_MS }
  }) as unknown as Client

/**
 * The stream key on a cluster: scripts and MULTI touch the stream, its dead letters and the producers' records
 * together, so they must hash to one slot — a key without a hash tag is wrapped in one (`{ledger:captures}`), and the
 * others are named after it.
 */
export const clusterKey = (key: string) => /\{[^}]+\}/.test(key) ? key : `{${key}}`

/** An entry as node-redis returns it (its XREADGROUP typing leaves messages untyped). */
interface StreamMessage {
  readonly id: string
  readonly message: Readonly<Record<string, string>>
}

const errorMessage = (cause: unknown) => cause instanceof Error ? cause.message : String(cause)

/** The group (or the whole stream) is gone: first use, or Redis restarted without persistence. */
const isMissingGroup = (error: StreamUnavailable) => {
  const message = errorMessage(error.cause)
  return message.startsWith("NOGROUP") || message === "ERR no such key"
}

/**
 * Runs one Redis call (or several issued in the same tick, which node-redis writes as one pipeline). The
 * readiness check matters for MULTI: unlike single commands it is queued while disconnected, and would wait for
 * the next reconnect attempt to fail (seconds when the network drops packets) or, past our timeout, run after the
 * caller already gave up and spooled the batch.
 */
const call = <A>(client: Client, operation: string, run: () => Promise<A>, timeoutMs = COMMAND_TIMEOUT_MS) =>
  Effect.suspend(() =>
    client.isReady
      ? Effect.tryPromise({
        try: run,
        catch: (cause) => new StreamUnavailable({ message: `Redis ${operation} failed: ${errorMessage(cause)}`, cause })
      }).pipe(
        Effect.timeoutOrElse({
          duration: timeoutMs,
          orElse: () => Effect.fail(new StreamUnavailable({ message: `Redis ${operation} timed out after ${timeoutMs} ms` }))
        })
      )
      : Effect.fail(new StreamUnavailable({ message: `Redis ${operation} failed: not connected` }))
  )

/**
 * Whether the Redis at `url` is a node of a cluster (`INFO cluster`), asked once at start. A Redis that does not
 * answer within the connect timeout is taken for a standalone one: name the nodes in LEDGER_REDIS_CLUSTER to run on a
 * cluster that may be down when the process starts.
 */
const isClusterNode = (url: string) =>
  Effect.promise(async () => {
    let probe: ReturnType<typeof createClient> | undefined
    try {
      probe = createClient({ url, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false } })
      probe.on("error", () => {})
      await probe.connect()
      return /^cluster_enabled:1/m.test(await probe.info("cluster"))
    } catch {
      // unreachable, or not a valid URL (which opening the stream reports)
      return false
    } finally {
      probe?.destroy()
    }
  })

export const layer: Layer.Layer<CaptureStream, StreamUnavailable, LedgerConfig> = Layer.effect(
  CaptureStream,
  Effect.gen(function*() {
    const settings = yield* LedgerConfig
    const configured = settings.redisCluster.map(Redacted.value)
    const url = configured.length > 0 ? "" : yield* Option.match(settings.redisUrl, {
      onNone: () => Effect.fail(new StreamUnavailable({ message: "REDIS_URL is not set" })),
      onSome: (url) => Effect.succeed(Redacted.value(url))
    })
    const cluster = configured.length > 0 ? configured : (yield* isClusterNode(url)) ? [url] : []
    if (configured.length === 0 && cluster.length > 0) {
      yield* Effect.logInfo("REDIS_URL names a node of a Redis Cluster: the capture stream runs on the cluster")
    }
    const key = cluster.length > 0 ? clusterKey(settings.streamKey) : settings.streamKey
    const group = settings.streamGroup
    const deadKey = `${key}:dead`
    const context = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(context)

    /**
     * Starts connecting and waits for the first outcome (ready, or a first error such as a refused connection)
     * without failing: a process started while Redis is down still starts, and reconnects in the background.
     * Connection loss and recovery are logged once per transition, never with the URL (it may hold a password).
     */
    const open = (client: Client, name: string) =>
      Effect.callback<void>((resume) => {
        let down = false
        client.on("error", (error: Error) => {
          if (down) return
          down = true
          runFork(Effect.logWarning("Redis unreachable", { connection: name, error: error.message }))
        })
        // a cluster client is ready once it knows the slots ("connect"); its nodes' clients reconnect on their own
        const ready = cluster.length > 0 ? "connect" : "ready"
        client.on(ready, () => {
          if (!down) return
          down = false
          runFork(Effect.logInfo("Redis connection restored", { connection: name }))
        })
        const settled = () => {
          client.off(ready, settled)
          client.off("error", settled)
          resume(Effect.void)
        }
        client.on(ready, settled)
        client.on("error", settled)
        // A single client's connect rejects only when it is closed; until then it retries with reconnectDelay. A
        // cluster's rejects when no start node answers: it is tried again until one does.
        let attempts = 0
        const connect = (): void =>
          void client.connect().catch(() => {
            if (cluster.length > 0 && !closed) setTimeout(connect, reconnectDelay(attempts++)).unref()
          })
        connect()
        return Effect.sync(() => {
          client.off(ready, settled)
          client.off("error", settled)
        })
      }).pipe(Effect.timeoutOption(CONNECT_TIMEOUT_MS), Effect.asVoid)

    /** close() lets in-flight commands finish; destroy() if Redis does not answer in time. */
    const close = (client: Client) =>
      Effect.tryPromise(() => client.close()).pipe(
        Effect.timeoutOrElse({ duration: CONNECT_TIMEOUT_MS, orElse: () => Effect.sync(() => client.destroy()) }),
        Effect.ignore
      )

    let closed = false
    const client = yield* Effect.acquireRelease(
      Effect.try({
        try: () => cluster.length > 0 ? makeCluster(cluster) : makeClient(url),
        // The parse error would quote the URL, password included: report without it.
        catch: () => new StreamUnavailable({ message: configured.length > 0 ? "LEDGER_REDIS_CLUSTER is not a list of valid Redis nodes" : "REDIS_URL is not a valid Redis URL" })
      }),
      close
    )
    // (finalizers run last first: no retry of a cluster's connect once closing begins)
    yield* Effect.addFinalizer(() => Effect.sync(() => (closed = true)))
    yield* open(client, "main")

    const readers = new Map<string, Client>()
    // Blocked reads are abandoned on shutdown: what they would have delivered stays pending and is reclaimed.
    yield* Effect.addFinalizer(() => Effect.sync(() => readers.forEach((reader) => reader.destroy())))
    const readerFor = (consumer: string) =>
      Effect.suspend(() => {
        const existing = readers.get(consumer)
        if (existing !== undefined) return Effect.succeed(existing)
        // No client-side timeout: BLOCK bounds the command, and `call` adds a margin above it.
        const reader = client.duplicate({ commandOptions: { timeout: 0 } })
        readers.set(consumer, reader)
        return open(reader, `reader ${consumer}`).pipe(Effect.as(reader))
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
    const publish = Effect.fn("CaptureStream.publish")(function*(payloads: ReadonlyArray<string>, batch: BatchId) {
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
        client.xLen(deadKey)
      ]))).pipe(
        Effect.map(([length, groups, oldest, deadLetters]) => {
          const info = groups.find((g) => g.name === group)
          return {
            backend: "redis" as const,
            length,
            // null when Redis cannot compute it (entries deleted inside the unread range)
            lag: info?.lag ?? null,
            pending: info?.pending ?? 0,
            oldest_pending_ms: oldest[0]?.millisecondsSinceLastDelivery ?? null,
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
)
