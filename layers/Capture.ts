/**
 * The capture stream backend: Redis Streams when REDIS_URL is set, the in-process stream otherwise
 * (embedded mode, single process).
 */
import { Layer, Option } from "effect"
import * as MemoryCaptureStream from "../src/capture/MemoryCaptureStream.ts"
import * as RedisCaptureStream from "../src/capture/RedisCaptureStream.ts"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"

export const CaptureStreamLive = Layer.unwrap(LedgerConfig.useSync(
  (config) => Option.isSome(config.redisUrl) ? RedisCaptureStream.layer : MemoryCaptureStream.layer
))
