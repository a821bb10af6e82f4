/**
 * The decision builder (docs/ARCHITECTURE.md, step 4 of a call and the promises it keeps): consumers of the capture stream's group that turn each batch of
 * captures into decisions, in one transaction per workspace of a batch, and acknowledge each after its commit.
 *
 * Failure handling, by what failed:
 * - a payload that is not a storable capture, or whose derivation throws: dead-lettered with the reason, at once;
 * - the database unreachable (connection, timeout, lock conflicts): the batch is retried with capped exponential
 *   backoff until it commits — nothing is acknowledged meanwhile, so nothing is lost;
 * - Postgres refusing the data (invalid value, constraint, size limit): the batch is split in halves until the
 *   capture at fault is found and dead-lettered with Postgres's message; the others commit;
 * - any other database error: a few retries, then the batch is released unacknowledged; it comes back through the
 *   reclaimer, and an entry delivered more than `maxDeliveries` times goes to the dead letters with the last reason.
 *
 * Consumers and the reclaimer (BuilderWorkers) are supervised fibers of the layer's scope (src/supervision: restarted
 * with backoff, interrupted on shutdown). An interrupted batch leaves its entries pending; they are reclaimed and
 * rebuilt idempotently.
 */
import { Cause, Clock, Context, Duration, Effect, Exit, Layer, Metric, Result } from "effect"
import { SqlError } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import { CaptureStream, type StreamEntry, type StreamUnavailable } from "../capture/CaptureStream.ts"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { DatabaseUnavailable } from "../domain/errors.ts"
import { buildLatency, builderRetries, capturesDeadLettered, decisionsBuilt } from "./metrics.ts"
import { TenantSql } from "../store/TenantSql.ts"
import { backoff } from "../supervision/supervise.ts"
import type { ContentPolicy } from "../domain/contentPolicy.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { afterDerivation, beforeDerivation, ContentPolicies } from "./ContentPolicies.ts"
import { decodedEntry, reconstruction, rejection, type StorableCapture, UnbuildableCapture } from "./reconstruct.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { type StorableDecision, storable } from "./prepared.ts"
import { byWorkspace, storeBatch } from "./writes.ts"
import { byPayloadBytes, tooLargeForABatch } from "./batchSizing.ts"
import { yieldEvery } from "../supervision/yielding.ts"

/** What one batch came to. */
export interface BatchOutcome {
  /** decisions inserted */
  readonly built: number
  /** entries whose decision already existed (redelivered or published twice) */
  readonly duplicates: number
  readonly deadLettered: number
  /** entries left unacknowledged after repeated unexplained failures (redelivered by the reclaimer) */
  readonly released: number
}

/** An entry derived and ready to store. */
export interface Pending {
  readonly entry: StreamEntry
  readonly decision: StorableDecision
}

/**
 * A batch decoded and derived, not yet stored: what is done outside the transaction (and so outside the agents'
 * locks), which a consumer does for its next batch while the current one commits.
 */
export interface PreparedBatch {
  readonly pending: ReadonlyArray<Pending>
  /** entries already moved to the dead letters (undecodable, underivable, delivered too often) */
  readonly deadLettered: number
  /** entries left unacknowledged (their workspaces' content policies were unreadable) */
  readonly released: number
}

interface Stored {
  readonly committed: ReadonlyArray<Pending>
  readonly inserted: ReadonlySet<string>
  readonly deadLettered: number
  readonly released: ReadonlyArray<Pending>
}

/** A batch transaction that takes longer is abandoned and retried (a hung connection, not a slow batch). */
const BATCH_TIMEOUT = Duration.seconds(60)
/** Unexplained database errors tolerated for one batch before it is released to redelivery. */
const OTHER_FAILURE_ATTEMPTS = 3
/** failure reasons remembered for `maxDeliveries` dead letters (bounded; oldest forgotten first) */
const REMEMBERED_FAILURES = 10_000

/** Waits between attempts at a batch, or at the stream: jittered, so that many builders do not retry in step. */
const RETRY = backoff(Duration.millis(100), Duration.seconds(5))

/** Retries a stream operation until Redis answers (the work stays in the stream meanwhile). */
export const untilStreamAnswers = <A>(operation: string, effect: Effect.Effect<A, StreamUnavailable>) =>
  effect.pipe(
    Effect.tapError((error) => Effect.logWarning(`capture stream ${operation} failed; retrying`, { error: error.message })),
    Effect.retry({ schedule: RETRY }),
    // the schedule never ends: this cannot fail
    Effect.orDie
  )

type FailureKind = "unavailable" | "data" | "other"
/** Why a batch did not commit, and so what to do about it. */
interface Failure {
  readonly kind: FailureKind
  readonly reason: string
}

/** SQLSTATE classes of a database that is down or overloaded rather than refusing this data. */
const UNAVAILABLE_STATES = /^(08|53|57P)/
/** SQLSTATE classes of data Postgres refuses: data exception, integrity constraint, program limit (size). */
const DATA_STATES = /^(22|23|54)/
const ENCODING_ERRORS = new Set(["PgTypesCodecError", "PgProtocolEncodeError"])

/**
 * Sorts a failed batch write by what to do about it. It takes whatever the write failed with — a typed failure, or a
 * defect (a connection lost mid-transaction can surface as one, from the rollback).
 */
export const classifyFailure = (error: unknown): Failure => {
  if (error === "timeout") return { kind: "unavailable", reason: `batch did not commit within ${Duration.format(BATCH_TIMEOUT)}` }
  const unwrapped = error instanceof DatabaseUnavailable ? error.cause : error
  if (!SqlError.isSqlError(unwrapped)) {
    return { kind: "other", reason: unwrapped instanceof Error ? unwrapped.message : String(unwrapped) }
  }
  const cause = unwrapped.reason.cause as { readonly code?: unknown; readonly message?: unknown; readonly _tag?: unknown } | undefined
  const state = typeof cause?.code === "string" ? cause.code : undefined
  const message = typeof cause?.message === "string" ? cause.message : unwrapped.message
  if (unwrapped.isRetryable || (state !== undefined && UNAVAILABLE_STATES.test(state))) return { kind: "unavailable", reason: message }
  const encoding = typeof cause?._tag === "string" && ENCODING_ERRORS.has(cause._tag)
  if (encoding || (state !== undefined && DATA_STATES.test(state))) return { kind: "data", reason: message }
  return { kind: "other", reason: state === undefined ? message : `${message} (SQLSTATE ${state})` }
}

/** `host-pid-random`: unique per process, so builders on several machines share the group without clashing. */
export const processConsumerName = () =>
  `${Os.hostname()}-${process.pid}-${Crypto.randomBytes(3).toString("hex")}`.replace(/[^\w.-]/g, "_")

/** The builder over the CaptureStream in context (a shard's, in BuilderWorkers): ack and dead letters go to it. */
export const makeDecisionBuilder = Effect.gen(function*() {
  const settings = yield* LedgerConfig
  const stream = yield* CaptureStream
  const tenantSql = yield* TenantSql
  const integrityKeys = yield* IntegrityKeys
  const contentPolicies = yield* ContentPolicies
  const gapMs = settings.sessionGapMinutes * 60_000
  const failures = new Map<string, string>()

  const remember = (ids: ReadonlyArray<string>, reason: string) => {
    for (const id of ids) {
      failures.delete(id)
      failures.set(id, reason)
    }
    for (const id of failures.keys()) {
      if (failures.size <= REMEMBERED_FAILURES) break
      failures.delete(id)
    }
  }

  const deadLetter = (entry: StreamEntry, reason: string) =>
    untilStreamAnswers("dead-letter", stream.deadLetter(entry, reason)).pipe(
      Effect.andThen(Metric.update(capturesDeadLettered, 1)),
      Effect.andThen(Effect.logWarning("capture moved to the dead letters", { entry: entry.id, deliveries: entry.deliveries, reason })),
      Effect.andThen(Effect.sync(() => failures.delete(entry.id)))
    )

  const workspaceKey = (scope: WorkspaceScope) => `${scope.tenant_id}/${scope.workspace_id}`
  const policiesOf = Effect.fnUntraced(function*(captures: ReadonlyArray<StorableCapture>) {
    const policies = new Map<string, ContentPolicy>()
    for (const capture of captures) {
      const key = workspaceKey(capture)
      if (!policies.has(key)) policies.set(key, yield* contentPolicies.get(capture))
    }
    return policies
  })

  const store = Effect.fnUntraced(function*(record: string, scope: WorkspaceScope, items: ReadonlyArray<Pending>): Effect.fn.Return<Stored> {
    if (items.length === 0) return { committed: [], inserted: new Set<string>(), deadLettered: 0, released: [] }
    let attempts = 0
    let unexplained = 0
    const retrying = (failure: Failure) =>
      failure.kind === "unavailable" || (failure.kind === "other" && unexplained < OTHER_FAILURE_ATTEMPTS)
    const result = yield* storeBatch(scope, items.map((item) => item.decision), { gapMs, consumer: record }).pipe(
      Effect.provideService(TenantSql, tenantSql),
      Effect.provideService(IntegrityKeys, integrityKeys),
      Effect.timeoutOrElse({ duration: BATCH_TIMEOUT, orElse: () => Effect.fail("timeout" as const) }),
      // typed failures and defects alike (a connection lost mid-transaction can surface as a defect)
      Effect.catchCause((cause) => Cause.hasInterruptsOnly(cause) ? Effect.interrupt : Effect.fail(classifyFailure(Cause.squash(cause)))),
      Effect.tapError((failure) =>
        Effect.gen(function*() {
          attempts++
          if (failure.kind === "data") return
          remember(items.map((item) => item.entry.id), failure.reason)
          if (failure.kind === "other") unexplained++
          if (!retrying(failure)) return
          yield* Metric.update(builderRetries, 1)
          // a long outage logs its first failures, then one line a minute or so
          if (attempts <= 3 || attempts % 12 === 0) {
            yield* Effect.logWarning("batch write failed; backing off", { captures: items.length, attempt: attempts, error: failure.reason })
          }
        })
      ),
      Effect.retry({ schedule: RETRY, while: retrying }),
      Effect.exit
    )
    if (Exit.isSuccess(result)) {
      if (attempts > 0) yield* Effect.logInfo("batch committed after retrying", { attempts: attempts + 1, captures: items.length })
      return { committed: items, inserted: result.value.inserted, deadLettered: 0, released: [] }
    }
    const failure = Cause.squash(result.cause) as Failure
    if (failure.kind === "data") {
      if (items.length === 1) {
        yield* deadLetter(items[0]!.entry, `database refused the decision: ${failure.reason}`)
        return { committed: [], inserted: new Set<string>(), deadLettered: 1, released: [] }
      }
      // find the capture at fault; the rest of the batch commits
      const half = Math.ceil(items.length / 2)
      const first = yield* store(record, scope, items.slice(0, half))
      const second = yield* store(record, scope, items.slice(half))
      return {
        committed: [...first.committed, ...second.committed],
        inserted: new Set([...first.inserted, ...second.inserted]),
        deadLettered: first.deadLettered + second.deadLettered,
        released: [...first.released, ...second.released]
      }
    }
    yield* Effect.logError("batch failed repeatedly; leaving it to redelivery", { captures: items.length, error: failure.reason })
    return { committed: [], inserted: new Set<string>(), deadLettered: 0, released: items }
  })

  const prepare = Effect.fn("DecisionBuilder.prepare")(function*(entries: ReadonlyArray<StreamEntry>) {
    let deadLettered = 0
    const decoded: Array<{ entry: StreamEntry; capture: StorableCapture }> = []
    for (const [index, entry] of entries.entries()) {
      yield* yieldEvery(index)
      if (entry.deliveries > settings.maxDeliveries) {
        const last = failures.get(entry.id) ?? "unknown (the consumers holding it stopped or timed out before finishing)"
        yield* deadLetter(entry, `delivered ${entry.deliveries} times without being built; last failure: ${last}`)
        deadLettered++
        continue
      }
      // one batch carries at most builderBatchBytes: a larger capture would hold a transaction (and the
      // embedded database) for as long as it takes, whatever else waits
      if (entry.payload.length > settings.builderBatchBytes) {
        yield* deadLetter(entry, tooLargeForABatch(entry.payload.length, settings.builderBatchBytes))
        deadLettered++
        continue
      }
      // effects only for what fails: two per capture cost the builder ~0.5 µs a capture (its profile)
      const capture = decodedEntry(entry.payload)
      if (Result.isFailure(capture)) {
        const why = capture.failure ?? (yield* Effect.flip(rejection(entry.payload)))
        yield* deadLetter(entry, why.message)
        deadLettered++
        continue
      }
      decoded.push({ entry, capture: capture.success })
    }
    // what each workspace keeps decides what is derived and stored: without it nothing is built (redelivered later)
    const policies = yield* Effect.result(policiesOf(decoded.map(({ capture }) => capture)))
    if (Result.isFailure(policies)) {
      yield* Effect.logWarning("content policies unreadable; the batch waits for redelivery", { captures: decoded.length, error: policies.failure.message })
      return { pending: [], deadLettered, released: decoded.length } satisfies PreparedBatch
    }
    const pending: Array<Pending> = []
    for (const [index, { entry, capture }] of decoded.entries()) {
      yield* yieldEvery(index)
      const policy = policies.success.get(workspaceKey(capture))!
      const built = Result.flatMap(reconstruction(beforeDerivation(capture, policy)), (derived) => {
        try {
          return Result.succeed(storable(afterDerivation(derived, policy)))
        } catch (error) {
          return Result.fail(new UnbuildableCapture({
            message: `the decision's row could not be prepared: ${error instanceof Error ? error.message : String(error)}`
          }))
        }
      })
      if (Result.isFailure(built)) {
        yield* deadLetter(entry, built.failure.message)
        deadLettered++
        continue
      }
      pending.push({ entry, decision: built.success })
    }
    return { pending, deadLettered, released: 0 } satisfies PreparedBatch
  })

  /** One transaction's share of a batch (of one workspace): stored, then acknowledged. */
  const commitPart = Effect.fnUntraced(function*(record: string, scope: WorkspaceScope, items: ReadonlyArray<Pending>) {
    const stored = yield* store(record, scope, items)
    if (stored.committed.length > 0) {
      yield* untilStreamAnswers("ack", stream.ack(stored.committed.map((item) => item.entry.id)))
      for (const item of stored.committed) failures.delete(item.entry.id)
    }
    const now = yield* Clock.currentTimeMillis
    // what Metric.update does, without an effect for each of thousands of decisions
    const context = yield* Effect.context<never>()
    for (const item of stored.committed) {
      const { capture } = item.decision.reconstruction
      if (stored.inserted.has(capture.ledger_id)) buildLatency.updateUnsafe(Math.max(0, now - capture.ended_at) / 1000, context)
    }
    yield* Metric.update(decisionsBuilt, stored.inserted.size)
    return stored
  })

  const commit = Effect.fn("DecisionBuilder.commit")(function*(record: string, prepared: PreparedBatch) {
    const outcome = { built: 0, duplicates: 0, deadLettered: prepared.deadLettered, released: prepared.released }
    for (const { scope, items } of byWorkspace(prepared.pending, (item) => item.decision.reconstruction.capture)) {
      for (const part of byPayloadBytes(items, settings.builderBatchBytes)) {
        const stored = yield* commitPart(record, scope, part)
        outcome.built += stored.inserted.size
        outcome.duplicates += stored.committed.length - stored.inserted.size
        outcome.deadLettered += stored.deadLettered
        outcome.released += stored.released.length
      }
    }
    return outcome satisfies BatchOutcome
  })

  const process = (record: string, entries: ReadonlyArray<StreamEntry>) =>
    Effect.flatMap(prepare(entries), (prepared) => commit(record, prepared))

  return DecisionBuilder.of({ prepare, commit, process })
})

export class DecisionBuilder extends Context.Service<DecisionBuilder, {
  /** Decodes and derives delivered entries, dead-lettering those that cannot be built. */
  prepare(entries: ReadonlyArray<StreamEntry>): Effect.Effect<PreparedBatch>
  /**
   * Stores a prepared batch, a transaction a workspace, and acknowledges each one's entries after its commit (see the
   * module comment).
   * `record` names the throughput record the batch is counted under (`ledger status`): one per consumer loop.
   */
  commit(record: string, prepared: PreparedBatch): Effect.Effect<BatchOutcome>
  /** `prepare`, then `commit`. */
  process(record: string, entries: ReadonlyArray<StreamEntry>): Effect.Effect<BatchOutcome>
}>()("ledger/builder/DecisionBuilder") {
  /** The builder of the CaptureStream in context. */
  static readonly layer = Layer.effect(DecisionBuilder, makeDecisionBuilder).pipe(Layer.provide(ContentPolicies.layer))
}
