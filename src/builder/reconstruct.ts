/**
 * Reconstruction (docs/ARCHITECTURE.md, "Deriving a decision"): a delivered stream payload → a capture the ledger can
 * store → the decision's derived parts. The same functions serve the builder (from the stream) and `ledger rebuild`
 * (from stored rows).
 */
import { Effect, Exit, Result, Schema } from "effect"
import { SchemaJITCompiler } from "effect/schema"
import { Capture, captureUsage, decodeCapture } from "../domain/capture.ts"
import type { Derivation } from "../domain/decision.ts"
import { readCall } from "../derive/read.ts"
import { parseJson } from "../derive/text.ts"
import { deriveFromCall } from "../derive/derive.ts"
import { extractSubjectsFromCall, sourceSubjects, type Subject } from "../derive/subjects.ts"

const Uuid = Schema.String.check(Schema.isUUID())
/** agent and execution ids are keys of indexes and advisory locks: bounded, never empty */
const Identifier = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512))
/** epoch ms between 1970 and 2100: what a timestamptz column and the latency arithmetic can hold */
const EpochMs = Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: Date.UTC(2100, 0, 1) }))
/** a duration that fits the int columns (latency, first token, upstream time) */
const MAX_DURATION_MS = 2 ** 31 - 1

/**
 * A capture the builder can store: `Capture` with the ids the ledger keys on as uuids and times in range. A capture
 * that fails this is dead-lettered with the reason instead of failing its whole batch in Postgres.
 */
export const StorableCapture = Schema.Struct({
  ...Capture.fields,
  ledger_id: Uuid,
  tenant_id: Uuid,
  workspace_id: Uuid,
  user_id: Uuid,
  key_id: Uuid,
  agent_id: Identifier,
  agent_name: Schema.NullOr(Identifier),
  execution_id: Schema.NullOr(Identifier),
  started_at: EpochMs,
  first_token_at: Schema.NullOr(EpochMs),
  ended_at: EpochMs,
  status: Schema.Number.check(Schema.isInt(), Schema.isBetween({ minimum: 0, maximum: 999 })),
  upstream_ms: Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: MAX_DURATION_MS }))
})
export type StorableCapture = typeof StorableCapture.Type

// Decoding is a builder's first step for every capture: Effect's JIT compiler makes the schema one generated function,
// ~1 µs a capture against 5–8 µs interpreted (bench/notes/builder.md, "Decoding captures compiled"). What fails it is
// explained by the interpreter, as before. Enabled here, before the decoders below first run.
SchemaJITCompiler.enable(StorableCapture.ast)

const decodeStorable = Schema.decodeUnknownEffect(StorableCapture)
const decodeStorableValue = Schema.decodeUnknownExit(StorableCapture)

/** Why a payload cannot become a decision (goes to the dead letters as the reason). */
export class UnbuildableCapture extends Schema.TaggedError<UnbuildableCapture>()("UnbuildableCapture", {
  message: Schema.String
}) {}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ")

/** Why a payload is not a capture the ledger can store, checked step by step for the dead letter's reason. */
export const rejection = (payload: string): Effect.Effect<never, UnbuildableCapture> =>
  decodeCapture(payload).pipe(
    Effect.mapError((error) => new UnbuildableCapture({ message: `invalid capture: ${oneLine(error.message)}` })),
    Effect.flatMap((capture) =>
      decodeStorable(capture).pipe(
        Effect.mapError((error) => new UnbuildableCapture({ message: `capture cannot be stored: ${oneLine(error.message)}` }))
      )
    ),
    Effect.flatMap(() => Effect.die(new Error("a payload failed StorableCapture yet passed Capture and StorableCapture")))
  )

/**
 * Decodes a stream payload: a valid capture (`decodeCapture`) the ledger can store. One pass of StorableCapture over
 * the parsed JSON (parsed here: Schema's own JSON step runs as an effect, ~2.5 µs dearer); only a payload that fails
 * is decoded again, step by step, to say why (two passes cost the builder ~8 µs a capture; bench/notes/ingest.md,
 * "Backlog drain of short captures").
 */
export const decodeEntry = (payload: string): Effect.Effect<StorableCapture, UnbuildableCapture> => {
  const decoded = decodedEntry(payload)
  if (Result.isSuccess(decoded)) return Effect.succeed(decoded.success)
  return decoded.failure === undefined ? rejection(payload) : Effect.fail(decoded.failure)
}

/**
 * `decodeEntry` without an effect, for the builder's loop over a batch (an effect per capture costs there): the
 * capture, or why it cannot be stored — `undefined` when only the step-by-step decoding (`decodeEntry`) can say why.
 */
export const decodedEntry = (payload: string): Result.Result<StorableCapture, UnbuildableCapture | undefined> => {
  const value = parseJson(payload)
  const decoded = value === undefined ? undefined : decodeStorableValue(value)
  if (decoded === undefined || Exit.isFailure(decoded)) return Result.fail(undefined)
  const capture = decoded.value
  return capture.ended_at - capture.started_at > MAX_DURATION_MS
    ? Result.fail(new UnbuildableCapture({ message: "capture cannot be stored: the call lasted longer than 24 days" }))
    // Postgres prints uuids in lowercase: keep them so, so ids compare equal in memory and in the database.
    // Timings may carry fractions of a millisecond (the gateway measures with a monotonic clock); the ledger
    // keeps whole milliseconds, so every sum and comparison below is exact.
    : Result.succeed({
      ...capture,
      usage: captureUsage(capture),
      started_at: Math.round(capture.started_at),
      first_token_at: capture.first_token_at === null ? null : Math.round(capture.first_token_at),
      ended_at: Math.round(capture.ended_at),
      upstream_ms: Math.round(capture.upstream_ms),
      ledger_id: capture.ledger_id.toLowerCase(),
      tenant_id: capture.tenant_id.toLowerCase(),
      workspace_id: capture.workspace_id.toLowerCase(),
      user_id: capture.user_id.toLowerCase(),
      key_id: capture.key_id.toLowerCase()
    })
}

/** One capture with everything the builder derives from it. */
export interface Reconstruction {
  readonly capture: StorableCapture
  readonly derivation: Derivation
  readonly subjects: ReadonlyArray<Subject>
  /** the provider's id of the answer, by which a later call may continue it */
  readonly responseId: string | null
  /** the response this call continues (`previous_response_id`), whose decision it links to */
  readonly continues: string | null
  /** the call carries the turns it continues (the gateway joined them): its trace has them already */
  readonly joined: boolean
}

/**
 * Derives the decision. `derive` promises never to throw; should a bug break that promise for some input, the
 * capture is dead-lettered with the error, to be replayed once the derivation is fixed.
 */
export const reconstruct = (capture: StorableCapture): Effect.Effect<Reconstruction, UnbuildableCapture> =>
  Effect.fromResult(reconstruction(capture))

/** `reconstruct` without an effect, for the builder's loop over a batch. */
export const reconstruction = (capture: StorableCapture): Result.Result<Reconstruction, UnbuildableCapture> => {
  try {
    const call = readCall(capture)
    const derivation = deriveFromCall(capture, call)
    return Result.succeed({
      capture,
      derivation,
      subjects: [...extractSubjectsFromCall(derivation, call), ...sourceSubjects(capture.source)],
      responseId: call.responseId ?? null,
      continues: call.continues ?? null,
      joined: capture.context != null
    })
  } catch (error) {
    return Result.fail(new UnbuildableCapture({ message: `derivation failed: ${error instanceof Error ? error.message : String(error)}` }))
  }
}

/** Facts about the call the rows and rollups share. */
export const callFacts = ({ capture, derivation }: {
  readonly capture: StorableCapture
  readonly derivation: Pick<Derivation, "outcome"> & { readonly cost: Pick<Derivation["cost"], "total_usd"> }
}) => ({
  latencyMs: Math.max(0, capture.ended_at - capture.started_at),
  firstTokenMs: capture.first_token_at === null ? null : Math.max(0, capture.first_token_at - capture.started_at),
  costUsd: derivation.cost.total_usd,
  tokens: capture.usage?.total_tokens ?? 0,
  isError: derivation.outcome === "error"
})

/** A stored decision row, as `ledger rebuild` reads it back. */
export interface StoredCall {
  readonly api: string
  readonly ledger_id: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly user_id: string
  readonly key_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly provider: string
  readonly provider_type: string
  readonly model: string
  readonly stream: boolean
  readonly status: number
  readonly aborted: boolean
  readonly usage: unknown
  readonly error: unknown
  readonly raw_request: string
  readonly raw_context: string | null
  readonly raw_response: string | null
  readonly source: unknown
  readonly created_at: Date
  readonly latency_ms: number
  readonly first_token_ms: number | null
  readonly upstream_ms: number | null
  readonly capture_version: number
}

const decodeStoredCapture = Schema.decodeUnknownEffect(StorableCapture)

/** The capture a stored decision was built from (what the derivation reads is all kept in the row). */
export const captureOfStored = (row: StoredCall): Effect.Effect<StorableCapture, UnbuildableCapture> => {
  const started = row.created_at.getTime()
  return decodeStoredCapture({
    v: row.capture_version,
    ...(row.capture_version === 1 ? {} : { api: row.api }),
    ledger_id: row.ledger_id,
    tenant_id: row.tenant_id,
    workspace_id: row.workspace_id,
    user_id: row.user_id,
    key_id: row.key_id,
    agent_id: row.agent_id,
    agent_name: null,
    execution_id: row.execution_id,
    provider: row.provider,
    provider_type: row.provider_type,
    model: row.model,
    stream: row.stream,
    request: row.raw_request,
    ...(row.raw_context === null ? {} : { context: row.raw_context }),
    response: row.raw_response,
    ...(row.source === null ? {} : { source: row.source }),
    error: row.error,
    status: row.status,
    aborted: row.aborted,
    usage: row.usage,
    started_at: started,
    first_token_at: row.first_token_ms === null ? null : started + row.first_token_ms,
    ended_at: started + row.latency_ms,
    upstream_ms: row.upstream_ms ?? 0
  }).pipe(
    Effect.mapError((error) => new UnbuildableCapture({ message: `stored decision is unreadable: ${oneLine(error.message)}` }))
  )
}
