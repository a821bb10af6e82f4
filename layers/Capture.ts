/**
 * The capture stream backend: Redis Streams when REDIS_URL is set (in LEDGER_CAPTURE_SHARDS shards), the in-process
 * stream otherwise (embedded mode, single process, one stream). CaptureStream is the first shard.
 */
import { Effect, Layer, Option } from "effect"
import { CaptureShards } from "../src/capture/CaptureShards.ts"
import * as MemoryCaptureStream from "../src/capture/MemoryCaptureStream.ts"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"

export const CaptureStreamLive = Layer.unwrap(LedgerConfig.useSync((config) =>
  Option.isSome(config.redisUrl)
    ? CaptureShards.redis
    : CaptureShards.single.pipe(
      Layer.provideMerge(MemoryCaptureStream.layer),
      Layer.tap(() =>
        config.captureShards > 1
          ? Effect.logWarning("LEDGER_CAPTURE_SHARDS needs REDIS_URL: the in-process stream is one stream", { shards: config.captureShards })
          : Effect.void
      )
    )
))
