/**
 * The Lua scripts the capture stream runs on Redis (docs/ARCHITECTURE.md, "One call", step 3), each one atomic: what
 * it reads and what it writes happen at one moment. Every key a script touches is passed in KEYS and lives in one
 * hash slot (a Redis Cluster runs a script on one node).
 */
import { type CommandParser, defineScript } from "redis"
import type { CapturePayload } from "./CaptureStream.ts"

/**
 * KEYS: the stream, the producer's key. ARGV: the batch number, the producer key's TTL in seconds, the payloads.
 * Appends the payloads and records the number, unless a batch numbered at or above it was appended already. The
 * record is written after the entries: a script stopped half-way could only lead to a duplicate on retry, never to
 * a loss. Replies the producer's previous number, the stream's newest id after the call ('' for none), then the
 * ids appended.
 */
export const publishBatch = defineScript({
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
  parseCommand(parser: CommandParser, stream: string, producerKey: string, seq: number, ttlSeconds: number, payloads: ReadonlyArray<CapturePayload>) {
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
export const readProgress = defineScript({
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
 * KEYS: the stream. ARGV: the group. Replies how long ago, in ms by Redis's clock, the oldest capture the builders have
 * not committed was appended — the oldest pending entry, else the first never delivered — or -1 when none waits (no
 * stream or group either). An entry id starts with the ms it was appended at.
 */
export const waitingAge = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local oldest = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1)[1]
local id = oldest and oldest[1]
if not id then
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local fields = {}
    for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
    if fields['name'] == ARGV[1] then
      local next = redis.call('XRANGE', KEYS[1], '(' .. fields['last-delivered-id'], '+', 'COUNT', 1)[1]
      id = next and next[1]
    end
  end
end
if not id then return -1 end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return math.max(0, now - tonumber(string.match(id, '^(%d+)')))`,
  parseCommand(parser: CommandParser, stream: string, group: string) {
    parser.pushKey(stream)
    parser.push(group)
  },
  transformReply: (reply: number) => Number(reply)
})

/**
 * KEYS: the stream. ARGV: the group, the idle threshold in ms. Deletes the consumers with nothing pending idle longer
 * than the threshold (none when the stream does not exist; a missing group fails with NOGROUP) (`idle`: since the consumer's last read or claim attempt) and returns their names. One script,
 * so no entry can be delivered to a consumer between the check and its deletion (deleting a consumer drops its
 * pending entries from the group).
 */
export const pruneConsumers = defineScript({
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

/**
 * KEYS: the shard record. ARGV: a shard count. Raises the record to the count (never lowers it) and replies the
 * record after: the number of capture stream shards that may hold captures (see CaptureShards).
 */
export const raiseShards = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
local recorded = tonumber(redis.call('GET', KEYS[1]) or '0')
local count = tonumber(ARGV[1])
if recorded >= count then return recorded end
redis.call('SET', KEYS[1], ARGV[1])
return count`,
  parseCommand(parser: CommandParser, record: string, count: number) {
    parser.pushKey(record)
    parser.push(String(count))
  },
  transformReply: (reply: number) => Number(reply)
})

/**
 * KEYS: the shard record. ARGV: the count read before, the new count. Lowers the record only if it still holds the
 * count read (a gateway that raised it meanwhile wins); replies the record after.
 */
export const lowerShards = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: `
if tonumber(redis.call('GET', KEYS[1]) or '0') == tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[2]) end
return tonumber(redis.call('GET', KEYS[1]) or '0')`,
  parseCommand(parser: CommandParser, record: string, expected: number, count: number) {
    parser.pushKey(record)
    parser.push(String(expected), String(count))
  },
  transformReply: (reply: number) => Number(reply)
})

/**
 * KEYS: the builders' register (a sorted set: name -> expiry), then one lease key per shard. ARGV: the builder's
 * name, the lease time in ms. One round of a builder's shard ownership: it renews its own entry in the register and
 * drops expired ones, so the register counts the live builders; its fair share is ceil(shards / live). It renews the
 * leases it holds up to its share, gives up those beyond, and takes free ones (a lease expires with its holder) up to
 * its share. Replies the shard numbers it holds. Redis's own clock (TIME): builders on several machines agree.
 */
export const claimShards = defineScript({
  SCRIPT: `
local name, ttl = ARGV[1], tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], now + ttl, name)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local fair = math.ceil((#KEYS - 1) / redis.call('ZCARD', KEYS[1]))
local held = {}
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == name then
    if #held < fair then
      redis.call('PEXPIRE', KEYS[i], ttl)
      held[#held + 1] = i - 2
    else
      redis.call('DEL', KEYS[i])
    end
  end
end
for i = 2, #KEYS do
  if #held >= fair then break end
  if redis.call('SET', KEYS[i], name, 'NX', 'PX', ttl) then held[#held + 1] = i - 2 end
end
return held`,
  parseCommand(parser: CommandParser, register: string, leases: ReadonlyArray<string>, name: string, ttlMs: number) {
    parser.push(String(1 + leases.length))
    parser.pushKey(register)
    for (const lease of leases) parser.pushKey(lease)
    parser.push(name, String(ttlMs))
  },
  transformReply: (reply: ReadonlyArray<number>) => reply.map(Number)
})

/** KEYS: the builders' register, then the lease keys. ARGV: the builder's name. Leaves the register, frees its leases. */
export const releaseShards = defineScript({
  SCRIPT: `
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return 0`,
  parseCommand(parser: CommandParser, register: string, leases: ReadonlyArray<string>, name: string) {
    parser.push(String(1 + leases.length))
    parser.pushKey(register)
    for (const lease of leases) parser.pushKey(lease)
    parser.push(name)
  },
  transformReply: (reply: number) => Number(reply)
})

export const scripts = { publishBatch, readProgress, waitingAge, pruneConsumers, raiseShards, lowerShards, claimShards, releaseShards }
