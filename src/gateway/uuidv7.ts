/**
 * UUID version 7 (RFC 9562): 48-bit Unix milliseconds, version, 12-bit sequence, variant, 62 random bits.
 *
 * Minted once per gateway call (the decision's `ledger_id`), so it is on the hot path: random bytes come from a
 * pooled CSPRNG buffer and hex from a lookup table, no per-call crypto call or byte array. Ids from one process
 * are strictly increasing (RFC 9562 §6.2 method 1): within a millisecond the 12-bit field counts up from a
 * random start, and when it overflows (or the clock steps back) the timestamp advances past the wall clock.
 */
import * as Crypto from "node:crypto"

const HEX: ReadonlyArray<string> = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"))

const POOL_SIZE = 8 * 1024
const pool = new Uint8Array(POOL_SIZE)
let poolOffset = POOL_SIZE

/** Advances through the pool, refilling it when exhausted; returns the offset of `count` fresh bytes. */
const take = (count: number): number => {
  if (poolOffset + count > POOL_SIZE) {
    Crypto.randomFillSync(pool)
    poolOffset = 0
  }
  const offset = poolOffset
  poolOffset += count
  return offset
}

let lastMs = -1
let sequence = 0

/** A new uuid v7 for `now` (epoch ms). */
export const uuidv7 = (now: number = Date.now()): string => {
  const r = take(10)
  if (now > lastMs) {
    lastMs = now
    // start below 0x800 so a burst within one millisecond has room to count before borrowing the next one
    sequence = ((pool[r]! << 8) | pool[r + 1]!) & 0x7ff
  } else if (++sequence > 0xfff) {
    lastMs++
    sequence = 0
  }
  const ms = lastMs.toString(16).padStart(12, "0")
  return ms.slice(0, 8) + "-" + ms.slice(8) + "-" +
    HEX[0x70 | (sequence >>> 8)]! + HEX[sequence & 0xff]! + "-" +
    HEX[0x80 | (pool[r + 2]! & 0x3f)]! + HEX[pool[r + 3]!]! + "-" +
    HEX[pool[r + 4]!]! + HEX[pool[r + 5]!]! + HEX[pool[r + 6]!]! + HEX[pool[r + 7]!]! + HEX[pool[r + 8]!]! +
    HEX[pool[r + 9]!]!
}

/** The epoch milliseconds a uuid v7 was minted at. */
export const uuidv7Time = (id: string): number => parseInt(id.slice(0, 8) + id.slice(9, 13), 16)

/**
 * The uuid v7 of a thing with a name: the timestamp `ms`, and in place of the random bits, bits of the name's
 * SHA-256. The same name and time give the same id — a transcript turn sent twice is the same decision — and ids
 * still sort by time.
 */
export const namedUuidv7 = (ms: number, name: string): string => {
  const hash = Crypto.createHash("sha256").update(name).digest()
  const time = Math.max(0, Math.min(Math.floor(ms), 0xffffffffffff)).toString(16).padStart(12, "0")
  return time.slice(0, 8) + "-" + time.slice(8) + "-" +
    HEX[0x70 | (hash[0]! & 0x0f)]! + HEX[hash[1]!]! + "-" +
    HEX[0x80 | (hash[2]! & 0x3f)]! + HEX[hash[3]!]! + "-" +
    HEX[hash[4]!]! + HEX[hash[5]!]! + HEX[hash[6]!]! + HEX[hash[7]!]! + HEX[hash[8]!]! + HEX[hash[9]!]!
}
