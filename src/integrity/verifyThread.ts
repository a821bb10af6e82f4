/**
 * A thread of `ledger verify` (Verifier.ts starts them): checks the stretches of chains it is sent (chainRange.ts)
 * on a database connection of its own, inside each workspace's tenant scope, and reports progress and results. The
 * HMACs and row decoding of a large ledger are most of verification's work; spread over threads they use every core.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { parentPort, workerData } from "node:worker_threads"
import { TenantSql } from "../store/TenantSql.ts"
import { checkRange, type RangeResult, type RangeTask } from "./chainRange.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"

export interface VerifyThreadData {
  readonly databaseUrl: string
  readonly secrets: ReadonlyArray<{ readonly id: number; readonly secret: string }>
}
export type ToVerifyThread = { readonly id: number; readonly task: RangeTask }
export type FromVerifyThread =
  | { readonly type: "progress"; readonly id: number; readonly rows: number }
  | { readonly type: "result"; readonly id: number; readonly result: RangeResult }
  | { readonly type: "failure"; readonly id: number; readonly message: string }

const port = parentPort
if (port === null) throw new Error("src/integrity/verifyThread.ts runs as a worker thread of ledger verify")
const data = workerData as VerifyThreadData

const keys = IntegrityKeys.fromSecrets(data.secrets.map(({ id, secret }) => ({ id, secret: Buffer.from(secret, "base64url") })))
// two connections: a page is read while the one before it is hashed
const tenantSqlLayer = TenantSql.layer.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(data.databaseUrl), maxConnections: 2 })))

const run = Effect.fnUntraced(function*(id: number, task: RangeTask) {
  const tenantSql = yield* TenantSql
  const scope = { ...task.scope, user_id: "", role: "member" as const }
  return yield* checkRange(
    task,
    keys,
    (effect) => tenantSql.read(scope, effect),
    (rows) => Effect.sync(() => port.postMessage({ type: "progress", id, rows } satisfies FromVerifyThread))
  )
})

// one runtime for the thread's life: its connections serve every task it is sent
const runtime = ManagedRuntime.make(tenantSqlLayer)
port.on("message", ({ id, task }: ToVerifyThread) => {
  void runtime.runPromise(run(id, task)).then(
    (result) => port.postMessage({ type: "result", id, result } satisfies FromVerifyThread),
    (error) => port.postMessage({ type: "failure", id, message: error instanceof Error ? error.message : String(error) } satisfies FromVerifyThread)
  )
})
