/**
 * `ledger serve --gateway-workers N` (LEDGER_GATEWAY_WORKERS): the gateway role in N worker threads that share the
 * gateway port (`SO_REUSEPORT`: the kernel spreads connections over them), so the gateway uses more than one core.
 * Each worker has its own event loop, provider pools, capture publisher and spool (`<dataDir>/spool/worker-<i>`;
 * worker 0 keeps a single gateway's), and takes over the spools of workers that no longer run. RoleThread
 * supervises them; on shutdown each stops accepting, lets its calls finish and drains its publisher.
 *
 * The store and the stream must be servers every thread can reach: the embedded database and the in-process stream
 * live in one thread.
 */
import { Duration, Effect, Layer, Option } from "effect"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { runRoleThread } from "./RoleThread.ts"
import { InvalidSetting } from "../domain/errors.ts"

/** A worker's calls may take the gateway's own 30 s grace, then its publisher 10 s to drain. */
const SHUTDOWN_GRACE = Duration.seconds(45)

export const gatewayWorkers = (count: number) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const config = yield* LedgerConfig
    if (Option.isNone(config.databaseUrl) || Option.isNone(config.redisUrl)) {
      return yield* new InvalidSetting({
        message: `${count} gateway workers need DATABASE_URL and REDIS_URL: the embedded database and the in-process stream live in one thread`
      })
    }
    for (let index = 0; index < count; index++) {
      yield* runRoleThread({
        name: `gateway worker ${index}`,
        entry: new URL("../gatewayThreadMain.ts", import.meta.url),
        data: { index, count },
        grace: SHUTDOWN_GRACE
      })
    }
    yield* Effect.logInfo("gateway runs in worker threads sharing its port", { workers: count, port: config.gatewayPort })
  }))
