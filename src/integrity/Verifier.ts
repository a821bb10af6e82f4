/**
 * `ledger verify` (docs/ARCHITECTURE.md, "Integrity"): walks each workspace's chain in seq order and reports two
 * things apart —
 *
 * - integrity: decisions whose facts, raw exchange or link to their predecessor no longer match their hash under
 *   the key (named by ledger_id), decisions not in the chain at all, a head or checkpoint the chain contradicts;
 * - completeness: seq numbers missing (gaps), and a tail cut short of the head the chain table records or of the
 *   checkpoint given.
 *
 * A workspace is read inside its own tenant scope (row-level security), so verifying one reads no other's rows. A
 * long chain is cut into stretches checked side by side — in threads of their own with their own connections when
 * the database is a server (verifyThread.ts), in this thread otherwise — and joined here: each stretch's first
 * decision must link to the previous stretch's last, and the numbers between them must all be there. Postgres
 * recomputes each raw exchange's hash where the text is (`RAW_HASH_SQL`), Node the HMACs.
 */
import { Clock, Context, Deferred, Effect, Layer, Option, Redacted } from "effect"
import * as Os from "node:os"
import { Worker } from "node:worker_threads"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { type Checkpoint, checkpointHeads, CheckpointInvalid } from "./checkpoint.ts"
import { GENESIS, sameDigest } from "../chain/chain.ts"
import { type Alteration, checkRange, LISTED, type RangeResult, type RangeTask } from "./chainRange.ts"
import { auditMacText, pruneMacText } from "./markers.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import type { FromVerifyThread, ToVerifyThread, VerifyThreadData } from "./verifyThread.ts"
import { listWorkspaces, type NamedWorkspace, type UnknownWorkspace } from "./workspaces.ts"

export type { Alteration, AlterationReason } from "./chainRange.ts"

/** Decisions per stretch: a chain shorter than this is checked in one piece. */
const STRETCH = 100_000
/** Threads beside this one (each with two connections): one per core, at most four. */
const THREADS = Math.min(4, Os.availableParallelism())

export interface WorkspaceVerification {
  readonly tenant: string
  readonly workspace: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly decisions: number
  readonly first_seq: number | null
  readonly last_seq: number | null
  readonly head_seq: number
  readonly pruned_through: number
  readonly integrity: {
    readonly ok: boolean
    readonly altered: ReadonlyArray<Alteration>
    readonly altered_total: number
    /** the chain table's head or the checkpoint contradicts the chain (not about one decision) */
    readonly problems: ReadonlyArray<string>
  }
  readonly completeness: {
    readonly ok: boolean
    readonly gaps: ReadonlyArray<{ readonly from: number; readonly to: number }>
    readonly missing: number
    /** decisions expected after the last one found: up to the recorded head, or the checkpoint's seq */
    readonly tail: { readonly expected_through: number; readonly found_through: number; readonly by: "head" | "checkpoint" } | null
  }
  readonly checkpoint: { readonly seq: number; readonly matches: boolean } | null
}

export interface VerifyResult {
  readonly ok: boolean
  readonly decisions: number
  readonly seconds: number
  readonly workspaces: ReadonlyArray<WorkspaceVerification>
}

export interface VerifyProgress {
  readonly done: number
  readonly total: number
}

interface ChainState {
  readonly head_seq: number
  readonly head_hash: Uint8Array | null
  readonly pruned_seq: number
  readonly pruned_hash: Uint8Array | null
  readonly pruned_at: Date | null
  readonly pruned_key: number | null
  readonly pruned_mac: Uint8Array | null
}

/** What a workspace's verification starts from: its chain row, what is not chained, the erasures that hold. */
interface WorkspacePlan {
  readonly scope: NamedWorkspace
  readonly state: ChainState
  readonly unchained: ReadonlyArray<string>
  readonly unchainedTotal: number
  readonly erasures: ReadonlyArray<string>
  /** the highest seq stored (the head may say otherwise) */
  readonly top: number
  readonly checkpoint: { readonly seq: number; readonly hash: Buffer } | undefined
}

const EMPTY_CHAIN: ChainState = { head_seq: 0, head_hash: null, pruned_seq: 0, pruned_hash: null, pruned_at: null, pruned_key: null, pruned_mac: null }

/** (from, to] cut into stretches of about `size`. */
const stretches = (from: number, to: number, size: number) => {
  const count = Math.max(1, Math.ceil((to - from) / size))
  const step = Math.ceil((to - from) / count)
  return Array.from({ length: count }, (_, i) => ({ from: from + i * step, to: i === count - 1 ? to : from + (i + 1) * step }))
}

/** Threads that check stretches (verifyThread.ts), for the life of a scope. */
const threadPool = Effect.fnUntraced(function*(data: VerifyThreadData, size: number) {
  const threads = yield* Effect.acquireRelease(
    Effect.sync(() => Array.from({ length: size }, () => new Worker(new URL("./verifyThread.ts", import.meta.url), { workerData: data }))),
    (threads) => Effect.promise(() => Promise.all(threads.map((thread) => thread.terminate())))
  )
  const idle = [...threads]
  const waiting = new Map<number, { progress: (rows: number) => void; done: (result: RangeResult | Error) => void }>()
  let next = 0
  for (const thread of threads) {
    thread.on("message", (message: FromVerifyThread) => {
      const task = waiting.get(message.id)
      if (task === undefined) return
      if (message.type === "progress") return task.progress(message.rows)
      waiting.delete(message.id)
      idle.push(thread)
      task.done(message.type === "result" ? message.result : new Error(message.message))
    })
    thread.on("error", (error) => {
      for (const task of waiting.values()) task.done(error)
      waiting.clear()
    })
  }
  /** Checks a stretch on an idle thread (callers run at most `size` at once). */
  return (task: RangeTask, progress: (rows: number) => Effect.Effect<void>) =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<RangeResult, DatabaseUnavailable>()
      let counted = 0
      const id = next++
      waiting.set(id, {
        progress: (rows) => (counted += rows),
        done: (result) =>
          Deferred.doneUnsafe(
            done,
            result instanceof Error ? Effect.fail(new DatabaseUnavailable({ message: `verification thread: ${result.message}`, cause: result })) : Effect.succeed(result)
          )
      })
      idle.pop()!.postMessage({ id, task } satisfies ToVerifyThread)
      // the thread's progress, passed on as it comes
      let reported = 0
      const report = Effect.suspend(() => {
        const rows = counted - reported
        reported = counted
        return rows > 0 ? progress(rows) : Effect.void
      })
      const result = yield* Deferred.await(done).pipe(
        Effect.raceFirst(Effect.forever(Effect.andThen(Effect.sleep("100 millis"), report)))
      )
      yield* report
      return result as RangeResult
    })
})

export class Verifier extends Context.Service<Verifier, {
  run(options?: {
    readonly workspace?: string | undefined
    readonly checkpoint?: Checkpoint | undefined
    readonly onProgress?: ((progress: VerifyProgress) => Effect.Effect<void>) | undefined
    /** decisions per stretch checked on its own (default 100,000) */
    readonly stretch?: number | undefined
  }): Effect.Effect<VerifyResult, DatabaseUnavailable | UnknownWorkspace | CheckpointInvalid>
}>()("ledger/integrity/Verifier") {
  static readonly layer = Layer.effect(
    Verifier,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const keys = yield* IntegrityKeys
      const config = yield* LedgerConfig

      const read = <A, E>(scope: NamedWorkspace, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.read({ tenant_id: scope.tenant_id, workspace_id: scope.workspace_id, user_id: "", role: "member" }, effect)

      const plan = (scope: NamedWorkspace, checkpoint: WorkspacePlan["checkpoint"]) =>
        read(scope, Effect.gen(function*() {
          const sql = yield* ScopedSql
          const where = sql`tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
          const [chain] = yield* sql<ChainState>`SELECT head_seq::float8 AS head_seq, head_hash, pruned_seq::float8 AS pruned_seq,
            pruned_hash, pruned_at, pruned_key, pruned_mac FROM ledger_chains WHERE ${where}`
          const unchained = yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions WHERE ${where} AND seq IS NULL LIMIT ${LISTED}`
          const [{ n }] = unchained.length < LISTED
            ? [{ n: unchained.length }]
            : yield* sql<{ n: number }>`SELECT count(*)::float8 AS n FROM decisions WHERE ${where} AND seq IS NULL`
          const events = yield* sql<{ event_id: string; kind: string; at: Date; detail: unknown; chain_key: number; mac: Uint8Array }>`
            SELECT event_id, kind, at, detail, chain_key, mac FROM ledger_audit_events WHERE ${where} AND kind = 'erase'`
          const [top] = yield* sql<{ seq: number | null }>`SELECT max(seq)::float8 AS seq FROM decisions WHERE ${where}`
          return {
            scope,
            state: chain ?? EMPTY_CHAIN,
            unchained: unchained.map((row) => row.ledger_id),
            unchainedTotal: n,
            erasures: events.flatMap((event) => sameDigest(keys.mac(event.chain_key, auditMacText(scope, event)), event.mac) ? [event.event_id] : []),
            top: top?.seq ?? 0,
            checkpoint
          } satisfies WorkspacePlan
        }))

      /** Joins a workspace's stretches, in order, into its report. */
      const conclude = (p: WorkspacePlan, results: ReadonlyArray<RangeResult>): WorkspaceVerification => {
        const { scope, state, checkpoint } = p
        const problems: Array<string> = []
        const altered: Array<Alteration> = p.unchained.map((ledger_id) => ({ ledger_id, seq: null, reason: "unchained" as const }))
        let alteredTotal = p.unchainedTotal
        const alter = (alteration: Alteration) => {
          alteredTotal++
          if (altered.length < LISTED) altered.push(alteration)
        }
        for (const result of results) {
          alteredTotal += result.altered_total
          for (const alteration of result.altered) if (altered.length < LISTED) altered.push(alteration)
        }
        if (state.pruned_seq > 0) {
          const mac = state.pruned_key === null || state.pruned_hash === null || state.pruned_at === null
            ? undefined
            : keys.mac(state.pruned_key, pruneMacText(scope, state.pruned_seq, Buffer.from(state.pruned_hash), state.pruned_at.getTime()))
          if (!sameDigest(mac, state.pruned_mac)) problems.push(`the prune marker (up to seq ${state.pruned_seq}) is not signed by a key held here`)
        }
        // the chain starts after the prune marker, at its hash (or at the genesis)
        let previous = { seq: state.pruned_seq, link: Buffer.from(state.pruned_hash ?? GENESIS).toString("hex"), authentic: true }
        const gaps: Array<{ from: number; to: number }> = []
        let decisions = p.unchainedTotal
        let first: number | null = null
        let watched: string | null = null
        for (const result of results) {
          decisions += result.checked
          watched ??= result.watched
          if (result.first === null || result.last === null) continue
          first ??= result.first.seq
          if (result.first.seq > previous.seq + 1) gaps.push({ from: previous.seq + 1, to: result.first.seq - 1 })
          else if (result.first.authentic && previous.authentic && result.first.link !== previous.link) {
            alter({ ledger_id: result.first.ledger_id, seq: result.first.seq, reason: "link" })
          }
          gaps.push(...result.gaps)
          previous = result.last
        }
        gaps.sort((a, b) => a.from - b.from)
        let missing = gaps.reduce((sum, gap) => sum + gap.to - gap.from + 1, 0)
        const last = first === null ? null : previous.seq

        // the tail: the recorded head, then the checkpoint, may expect more than was found
        const foundThrough = previous.seq
        let tail: WorkspaceVerification["completeness"]["tail"] = null
        if (state.head_seq > foundThrough) tail = { expected_through: state.head_seq, found_through: foundThrough, by: "head" }
        else if (state.head_seq < foundThrough) problems.push(`the chain table's head (seq ${state.head_seq}) is behind the last decision (seq ${foundThrough})`)
        else if (last !== null && state.head_hash !== null && Buffer.from(state.head_hash).toString("hex") !== previous.link) {
          problems.push(`the chain table's head hash is not the last decision's (seq ${foundThrough})`)
        }
        let checkpointMatches: boolean | null = null
        if (checkpoint !== undefined) {
          if (checkpoint.seq > foundThrough) {
            if (tail === null || checkpoint.seq > tail.expected_through) tail = { expected_through: checkpoint.seq, found_through: foundThrough, by: "checkpoint" }
            checkpointMatches = false
          } else if (checkpoint.seq === state.pruned_seq && state.pruned_seq > 0) {
            checkpointMatches = sameDigest(state.pruned_hash, checkpoint.hash)
          } else if (checkpoint.seq < state.pruned_seq || checkpoint.seq === 0) {
            checkpointMatches = true
          } else {
            checkpointMatches = watched === checkpoint.hash.toString("hex")
            if (!checkpointMatches) problems.push(`the decision at the checkpoint's seq ${checkpoint.seq} does not have the checkpoint's hash: the chain was rewritten`)
          }
        }
        if (tail !== null) missing += tail.expected_through - tail.found_through
        return {
          tenant: scope.tenant,
          workspace: scope.workspace,
          tenant_id: scope.tenant_id,
          workspace_id: scope.workspace_id,
          decisions,
          first_seq: first,
          last_seq: last,
          head_seq: state.head_seq,
          pruned_through: state.pruned_seq,
          integrity: { ok: alteredTotal === 0 && problems.length === 0, altered, altered_total: alteredTotal, problems },
          completeness: { ok: gaps.length === 0 && tail === null, gaps, missing, tail },
          checkpoint: checkpoint === undefined ? null : { seq: checkpoint.seq, matches: checkpointMatches ?? false }
        }
      }

      const run = Effect.fn("Verifier.run")(function*(options?: {
        readonly workspace?: string | undefined
        readonly checkpoint?: Checkpoint | undefined
        readonly onProgress?: ((progress: VerifyProgress) => Effect.Effect<void>) | undefined
        readonly stretch?: number | undefined
      }) {
        const started = yield* Clock.currentTimeMillis
        const workspaces = yield* Effect.provideService(listWorkspaces(options?.workspace), TenantSql, tenantSql)
        const heads = options?.checkpoint === undefined
          ? undefined
          : yield* Effect.provideService(checkpointHeads(options.checkpoint), IntegrityKeys, keys)
        const plans: Array<WorkspacePlan> = []
        for (const scope of workspaces) plans.push(yield* plan(scope, heads?.get(scope.workspace_id)))
        const tasks = plans.flatMap((p, workspace) =>
          stretches(p.state.pruned_seq, Math.max(p.top, p.state.head_seq), options?.stretch ?? STRETCH).map((range) => ({
            workspace,
            task: { scope: { tenant_id: p.scope.tenant_id, workspace_id: p.scope.workspace_id }, ...range, erasures: p.erasures, watch: p.checkpoint?.seq ?? null } satisfies RangeTask
          }))
        )
        const total = plans.reduce((sum, p) => sum + Math.max(p.top, p.state.head_seq) - p.state.pruned_seq, 0)
        let done = 0
        const report = options?.onProgress ?? (() => Effect.void)
        const progress = (rows: number) => {
          done += rows
          return report({ done, total: Math.max(total, done) })
        }
        // threads when the database takes several connections and there is more than one stretch to check
        const threaded = Option.isSome(config.databaseUrl) && THREADS > 1 && tasks.length > 1
        const check = threaded
          ? yield* threadPool({ databaseUrl: Redacted.value(config.databaseUrl.value), secrets: keys.secrets }, Math.min(THREADS, tasks.length))
          : (task: RangeTask, onRows: (rows: number) => Effect.Effect<void>) =>
            checkRange(task, keys, (effect) => read(plans.find((p) => p.scope.workspace_id === task.scope.workspace_id)!.scope, effect), onRows)
        const results = yield* Effect.forEach(tasks, ({ task }) => check(task, progress), { concurrency: threaded ? Math.min(THREADS, tasks.length) : 1 })
        const reports = plans.map((p, workspace) => conclude(p, results.filter((_, i) => tasks[i]!.workspace === workspace)))

        // a workspace the checkpoint names that is gone altogether is a tail cut to nothing
        if (heads !== undefined && options?.workspace === undefined) {
          const seen = new Set(workspaces.map((w) => w.workspace_id))
          for (const entry of options!.checkpoint!.workspaces) {
            if (seen.has(entry.workspace_id)) continue
            reports.push({
              tenant: entry.tenant,
              workspace: entry.workspace,
              tenant_id: entry.tenant_id,
              workspace_id: entry.workspace_id,
              decisions: 0,
              first_seq: null,
              last_seq: null,
              head_seq: 0,
              pruned_through: 0,
              integrity: { ok: true, altered: [], altered_total: 0, problems: [] },
              completeness: { ok: false, gaps: [], missing: entry.seq, tail: { expected_through: entry.seq, found_through: 0, by: "checkpoint" } },
              checkpoint: { seq: entry.seq, matches: false }
            })
          }
        }
        const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
        return {
          ok: reports.every((w) => w.integrity.ok && w.completeness.ok),
          decisions: reports.reduce((sum, w) => sum + w.decisions, 0),
          seconds,
          workspaces: reports
        } satisfies VerifyResult
      }, Effect.scoped)

      return Verifier.of({ run })
    })
  )
}
