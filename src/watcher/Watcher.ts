/**
 * `ledger watch` (docs/ARCHITECTURE.md, "Surfaces"): follows Claude Code's and Codex's transcripts on the person's
 * own machine and sends each model turn to the gateway's `POST /v1/watcher/turns` with their Gateway Key, where it
 * becomes a capture like any call through the gateway.
 *
 * Every POLL the transcripts are scanned (TranscriptFiles) and what they completed is sent in batches; a batch taken
 * by the service moves the files' positions, which are saved. While the service cannot be reached, nothing more is
 * read (the transcripts keep it) and the batch is sent again with backoff; a turn sent again after a crash is the
 * same decision (its id is the provider's). A batch the gateway refuses as a whole is split until the turn it
 * cannot take is found, and that turn is counted as rejected. A refused key ends the watcher.
 *
 * What leaves the machine is the turns: the conversation up to each call and the answer, with the client's session
 * id, version, working directory and git branch — nothing else from the directories, and no credential.
 */
import { Clock, Context, Data, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { TranscriptTurn, TurnOutcome } from "../domain/transcript.ts"
import { MAX_TURNS_PER_REQUEST } from "../domain/transcript.ts"
import { backoff } from "../supervision/supervise.ts"
import { type FileCounts, type FoundTurn, type Root, TranscriptFiles } from "./TranscriptFiles.ts"

const POLL = Duration.seconds(1)
/** Most turns read ahead of what the service has taken. */
const OUTBOX_TURNS = 2_000
/** A batch stays well inside the gateway's body limit (10 MB by default). */
const BATCH_BYTES = 4 * 1024 * 1024
const BATCH_TURNS = Math.min(100, MAX_TURNS_PER_REQUEST)
/** 0.5 s, doubling, at most 30 s between attempts while the service cannot be reached. */
const RETRY = backoff(Duration.millis(500), Duration.seconds(30))
/** How long `--once` keeps trying an unreachable service before it gives up (what it read stays unsent). */
const ONCE_GIVE_UP = Duration.minutes(1)
const SEND_TIMEOUT_MS = 60_000

/** Display names of the clients, the agents' default names. */
const CLIENT_NAMES = { "claude-code": "Claude Code", codex: "Codex" } as const

export interface WatchOptions {
  readonly gatewayUrl: string
  readonly gatewayKey: Redacted.Redacted<string>
  readonly roots: ReadonlyArray<Root>
  readonly statePath: string
  /** overrides the agent (by default the client: `claude-code`, `codex`) */
  readonly agentId: Option.Option<string>
  readonly agentName: Option.Option<string>
  /** read what is there, send it, and return */
  readonly once: boolean
  /** told the run's figures when it ends: `once` done, or stopped (SIGTERM) */
  readonly report: (summary: WatchSummary) => Effect.Effect<void>
}

export interface WatchSummary extends FileCounts {
  /** turns the service took */
  accepted: number
  /** turns the service refused (unreadable to it): not sent again */
  rejected: number
}

/** The service could not be reached (and `--once` gave up), or it refused the key. */
export class WatchError extends Data.TaggedError("WatchError")<{ readonly message: string }> {}

/** Could not be sent: the service did not answer, or answered that it could not take it now. */
class Unreachable extends Data.TaggedError("Unreachable")<{ readonly message: string }> {}

type Outcomes = ReadonlyArray<TurnOutcome>

export class Watcher extends Context.Service<Watcher, {
  /** Watches until interrupted (or, with `once`, until what is there is sent), then reports the run's figures. */
  run(options: WatchOptions): Effect.Effect<void, WatchError>
}>()("ledger/watcher/Watcher") {
  static readonly layer = Layer.succeed(Watcher, Watcher.of({ run: (options) => watch(options) }))
}

const watch = Effect.fn("Watcher.run")(function*(options: WatchOptions) {
  const files = new TranscriptFiles(options.roots, options.statePath)
  const summary = { accepted: 0, rejected: 0 }
  const url = `${options.gatewayUrl.replace(/\/+$/, "")}/v1/watcher/turns`
  const authorization = `Bearer ${Redacted.value(options.gatewayKey)}`
  const attributed = (found: FoundTurn): TranscriptTurn => ({
    ...found.turn,
    agent_id: Option.getOrElse(options.agentId, () => found.turn.client),
    agent_name: Option.getOrElse(options.agentName, () => CLIENT_NAMES[found.turn.client])
  })

  /** One POST: the outcomes, in order; Unreachable when it may be tried again; WatchError when the key is refused. */
  const post = (body: string, count: number) =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(url, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body,
          signal: AbortSignal.any([signal, AbortSignal.timeout(SEND_TIMEOUT_MS)])
        })
        return { status: response.status, text: await response.text() }
      },
      catch: (cause) => new Unreachable({ message: `${url}: ${cause instanceof Error ? (cause.cause as Error | undefined)?.message ?? cause.message : String(cause)}` })
    }).pipe(
      Effect.flatMap(({ status, text }): Effect.Effect<Outcomes | "refused", Unreachable | WatchError> => {
        if (status === 200) {
          const outcomes = (JSON.parse(text) as { turns?: Outcomes }).turns
          return Array.isArray(outcomes) && outcomes.length === count
            ? Effect.succeed(outcomes)
            : Effect.fail(new Unreachable({ message: `${url} answered 200 without an outcome per turn` }))
        }
        if (status === 401 || status === 403) {
          return Effect.fail(new WatchError({ message: `the gateway refused the key (HTTP ${status}): set LEDGER_GATEWAY_KEY to a Gateway Key (ldg_gw_…)` }))
        }
        if (status === 400 || status === 413) return Effect.succeed("refused")
        return Effect.fail(new Unreachable({ message: `${url} answered HTTP ${status}: ${text.slice(0, 200)}` }))
      })
    )

  /** Sends turns until the service has an outcome for each; a batch refused whole is split to find the turn. */
  const deliver = (batch: ReadonlyArray<FoundTurn>): Effect.Effect<Outcomes, Unreachable | WatchError> =>
    post(JSON.stringify({ turns: batch.map(attributed) }), batch.length).pipe(
      Effect.flatMap((outcomes) => {
        if (outcomes !== "refused") return Effect.succeed(outcomes)
        if (batch.length === 1) return Effect.succeed<Outcomes>([{ status: "rejected", error: "the gateway refused the turn (HTTP 400 or 413)" }])
        const half = Math.ceil(batch.length / 2)
        return Effect.zipWith(deliver(batch.slice(0, half)), deliver(batch.slice(half)), (a, b) => [...a, ...b])
      })
    )

  let failing = false
  const sendWithRetry = (batch: ReadonlyArray<FoundTurn>) =>
    deliver(batch).pipe(
      Effect.tapError((error) =>
        error._tag === "Unreachable" && !failing
          ? Effect.sync(() => (failing = true)).pipe(
            Effect.andThen(Effect.logWarning("ledger watch: the service cannot be reached; keeping the turns and trying again", { error: error.message }))
          )
          : Effect.void
      ),
      Effect.retry({ schedule: RETRY, while: (error) => error._tag === "Unreachable" }),
      options.once
        ? Effect.timeoutOrElse({
          duration: ONCE_GIVE_UP,
          orElse: () => Effect.fail(new Unreachable({ message: `${url} could not be reached for ${Duration.format(ONCE_GIVE_UP)}` }))
        })
        : (effect) => effect,
      Effect.mapError((error) => new WatchError({ message: error.message })),
      Effect.tap(() => (failing ? Effect.logInfo("ledger watch: the service is reachable again").pipe(Effect.andThen(Effect.sync(() => (failing = false)))) : Effect.void))
    )

  const outbox: Array<FoundTurn> = []
  const nextBatch = (): Array<FoundTurn> => {
    let bytes = 0
    let count = 0
    while (count < outbox.length && count < BATCH_TURNS) {
      const turn = outbox[count]!
      const size = turn.turn.request.length + turn.turn.response.length
      if (count > 0 && bytes + size > BATCH_BYTES) break
      bytes += size
      count++
    }
    return outbox.splice(0, count)
  }

  const round = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    outbox.push(...files.scan(now, OUTBOX_TURNS - outbox.length))
    while (outbox.length > 0) {
      const batch = nextBatch()
      const outcomes = yield* sendWithRetry(batch)
      for (const [index, outcome] of outcomes.entries()) {
        if (outcome.status === "accepted") summary.accepted++
        else {
          summary.rejected++
          yield* Effect.logWarning("ledger watch: the service refused a turn; it is not sent again", {
            turn: batch[index]!.turn.turn_id,
            file: batch[index]!.path,
            error: outcome.error
          })
        }
      }
      files.taken(batch)
      files.save()
    }
    files.save()
  })

  const report = Effect.suspend(() => options.report({ ...files.counts, ...summary }))
  if (options.once) {
    // until a scan finds nothing more (a scan reads at most OUTBOX_TURNS turns ahead)
    let before = -1
    while (before !== summary.accepted + summary.rejected) {
      before = summary.accepted + summary.rejected
      yield* round
    }
    return yield* report
  }
  return yield* round.pipe(Effect.andThen(Effect.sleep(POLL)), Effect.forever, Effect.onInterrupt(() => report))
})

/** The figures of a run, on one line. */
export const renderWatchSummary = (summary: WatchSummary): string =>
  `${summary.accepted} turn${summary.accepted === 1 ? "" : "s"} recorded, ${summary.rejected} refused; ` +
  `${summary.files} transcript${summary.files === 1 ? "" : "s"} followed; lines skipped: ${summary.corrupt} corrupt, ` +
  `${summary.unknown} of unknown types; ${summary.invalid} turn${summary.invalid === 1 ? "" : "s"} out of shape; ${summary.partial} file${summary.partial === 1 ? "" : "s"} ending in an unfinished line, ` +
  `${summary.restarted} replaced or cut, ${summary.deleted} deleted`
