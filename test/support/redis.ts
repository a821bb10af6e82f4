/**
 * Redis for tests: the local Redis (TEST_REDIS_URL, default redis://127.0.0.1:6379), never a mock. Each test
 * takes a key prefix of its own and every key under it is deleted when its scope closes.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { createClient } from "redis"
import { tcpProxyTo } from "./tcp-proxy.ts"

export type { TcpProxy } from "./tcp-proxy.ts"

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379"

const deleteKeysWithPrefix = async (prefix: string) => {
  const client = await createClient({ url: TEST_REDIS_URL }).connect()
  try {
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      if (keys.length > 0) await client.del(keys)
    }
  } finally {
    client.destroy()
  }
}

/** A unique key prefix (only `[a-z0-9:-]`, so it is safe in a SCAN pattern); its keys are deleted afterwards. */
export const testKeyPrefix = (name: string) =>
  Effect.acquireRelease(
    Effect.sync(() => `test:${name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}:${Crypto.randomBytes(6).toString("hex")}:`),
    (prefix) => Effect.promise(() => deleteKeysWithPrefix(prefix)).pipe(Effect.ignore)
  )

/** A plain client on the test Redis, to change what a test's service sees behind its back. */
export const redisAdmin = Effect.acquireRelease(
  Effect.promise(() => createClient({ url: TEST_REDIS_URL }).connect()),
  (client) => Effect.sync(() => client.destroy())
)

/** A proxy in front of the test Redis, to cut the connection to the real server and restore it. */
export const tcpProxy = tcpProxyTo(TEST_REDIS_URL, 6379)

/** How many entries a stream holds on the Redis at `url` (0 when it does not exist). */
export const streamLength = (url: string, key: string) =>
  Effect.promise(async () => {
    const client = await createClient({ url }).connect()
    try {
      return await client.xLen(key)
    } finally {
      client.destroy()
    }
  })

/** Two processes' instances of a service on the test Redis, sharing a fresh key prefix (as their stream key). */
export const replicasOnRedis = <S, E, R>(name: string, replica: (streamKey: string) => Effect.Effect<S, E, R>) =>
  Effect.flatMap(testKeyPrefix(name), (prefix) => Effect.all([replica(`${prefix}captures`), replica(`${prefix}captures`)]))
