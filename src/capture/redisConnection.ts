/**
 * Connections to the Redis that carries the capture stream (docs/ARCHITECTURE.md, "One call", step 3): a single Redis
 * or a Redis Cluster, told apart once at start, and clients that fail fast while it is unreachable and reconnect in the
 * background.
 */
import { Effect, Option, Redacted, type Scope } from "effect"
import { createClient, createCluster } from "redis"
import type { LedgerSettings } from "../config/LedgerConfig.ts"
import { StreamUnavailable } from "./CaptureStream.ts"
import { scripts } from "./redisScripts.ts"

export const COMMAND_TIMEOUT_MS = 5_000
export const CONNECT_TIMEOUT_MS = 2_000

/** Reconnect forever, 50 ms doubling to 2 s plus jitter, so many processes do not reconnect in lockstep. */
export const reconnectDelay = (retries: number) => Math.min(50 * 2 ** retries, 2_000) + Math.floor(Math.random() * 100)

const makeClient = (url: string) =>
  createClient({
    url,
    // EVALSHA, falling back to EVAL (which caches the script) after a NOSCRIPT: the script text is sent once
    scripts,
    // node-redis otherwise queues commands while disconnected and callers wait until Redis returns.
    disableOfflineQueue: true,
    socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnectDelay },
    // node-redis's own bound on single commands; `call` bounds MULTI and pipelines as well
    commandOptions: { timeout: COMMAND_TIMEOUT_MS }
  })

export type Client = ReturnType<typeof makeClient>

/**
 * A Redis Cluster client over the given start nodes, with the same per-node settings. It answers the commands this
 * stream sends as a single client does, each routed to the node of its key (every key of the stream shares one hash
 * slot: `clusterKey`), so the stream types it as one.
 */
const makeCluster = (urls: ReadonlyArray<string>) =>
  createCluster({
    rootNodes: urls.map((url) => ({ url })),
    scripts,
    defaults: { disableOfflineQueue: true, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnectDelay } },
    commandOptions: { timeout: COMMAND_TIMEOUT_MS }
  }) as unknown as Client

/**
 * The stream key on a cluster: scripts and MULTI touch the stream, its dead letters and the producers' records
 * together, so they must hash to one slot — a key without a hash tag is wrapped in one (`{ledger:captures}`), and the
 * others are named after it.
 */
export const clusterKey = (key: string) => /\{[^}]+\}/.test(key) ? key : `{${key}}`

export const errorMessage = (cause: unknown) => cause instanceof Error ? cause.message : String(cause)

/**
 * Runs one Redis call (or several issued in the same tick, which node-redis writes as one pipeline). The
 * readiness check matters for MULTI: unlike single commands it is queued while disconnected, and would wait for
 * the next reconnect attempt to fail (seconds when the network drops packets) or, past our timeout, run after the
 * caller already gave up and spooled the batch.
 */
export const call = <A>(client: Client, operation: string, run: () => Promise<A>, timeoutMs = COMMAND_TIMEOUT_MS) =>
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
export const isClusterNode = (url: string) =>
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


/** Where the capture stream lives: one Redis (`url`), or the start nodes of a cluster (`cluster`, non-empty). */
export interface RedisTarget {
  readonly url: string
  readonly cluster: ReadonlyArray<string>
}

/** LEDGER_REDIS_CLUSTER, else REDIS_URL — a cluster when it names a cluster node (asked once, at start). */
export const resolveTarget = Effect.fnUntraced(function*(settings: LedgerSettings) {
  const configured = settings.redisCluster.map(Redacted.value)
  if (configured.length > 0) return { url: "", cluster: configured }
  const url = yield* Option.match(settings.redisUrl, {
    onNone: () => Effect.fail(new StreamUnavailable({ message: "REDIS_URL is not set" })),
    onSome: (url) => Effect.succeed(Redacted.value(url))
  })
  if (!(yield* isClusterNode(url))) return { url, cluster: [] }
  yield* Effect.logInfo("REDIS_URL names a node of a Redis Cluster: the capture stream runs on the cluster")
  return { url, cluster: [url] }
})

/** A client of the target, closed with the scope; `connect` waits for its first outcome (see `open`). */
export const connect = Effect.fnUntraced(function*(target: RedisTarget, name: string): Effect.fn.Return<Client, StreamUnavailable, Scope.Scope> {
  const onCluster = target.cluster.length > 0
  const context = yield* Effect.context<never>()
  const runFork = Effect.runForkWith(context)
  let closed = false
  const client = yield* Effect.acquireRelease(
    Effect.try({
      try: () => onCluster ? makeCluster(target.cluster) : makeClient(target.url),
      // The parse error would quote the URL, password included: report without it.
      catch: () => new StreamUnavailable({ message: onCluster ? "LEDGER_REDIS_CLUSTER is not a list of valid Redis nodes" : "REDIS_URL is not a valid Redis URL" })
    }),
    close
  )
  // (finalizers run last first: no retry of a cluster's connect once closing begins)
  yield* Effect.addFinalizer(() => Effect.sync(() => (closed = true)))
  yield* open(client, name, { onCluster, isClosed: () => closed, runFork })
  return client
})

/**
 * A connection of its own for blocking reads (a blocked command holds its connection), with no client-side command
 * timeout (BLOCK bounds the command; `call` adds a margin). The caller destroys it.
 */
export const readerOf = Effect.fnUntraced(function*(client: Client, target: RedisTarget, name: string) {
  const reader = client.duplicate({ commandOptions: { timeout: 0 } })
  const context = yield* Effect.context<never>()
  yield* open(reader, name, { onCluster: target.cluster.length > 0, isClosed: () => false, runFork: Effect.runForkWith(context) })
  return reader
})

/**
 * Starts connecting and waits for the first outcome (ready, or a first error such as a refused connection)
 * without failing: a process started while Redis is down still starts, and reconnects in the background.
 * Connection loss and recovery are logged once per transition, never with the URL (it may hold a password).
 */
const open = (
  client: Client,
  name: string,
  options: { readonly onCluster: boolean; readonly isClosed: () => boolean; readonly runFork: (effect: Effect.Effect<void>) => unknown }
) =>
  Effect.callback<void>((resume) => {
    let down = false
    client.on("error", (error: Error) => {
      if (down) return
      down = true
      options.runFork(Effect.logWarning("Redis unreachable", { connection: name, error: error.message }))
    })
    // a cluster client is ready once it knows the slots ("connect"); its nodes' clients reconnect on their own
    const ready = options.onCluster ? "connect" : "ready"
    client.on(ready, () => {
      if (!down) return
      down = false
      options.runFork(Effect.logInfo("Redis connection restored", { connection: name }))
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
        if (options.onCluster && !options.isClosed()) setTimeout(connect, reconnectDelay(attempts++)).unref()
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
