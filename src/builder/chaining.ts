/**
 * Chaining a batch's new decisions into their workspace's chain (docs/ARCHITECTURE.md, "Integrity"), inside the
 * batch's transaction:
 *
 * - `lockChain` takes the workspace's head row (created on first use) for the rest of the transaction, so seq is
 *   gapless and in commit order: a batch that rolls back leaves neither rows nor a moved head. Groups are stored in
 *   ascending workspace order and every agent lock is taken before any chain lock, so builders never deadlock.
 * - `chainLinks` numbers the new decisions and hashes each over its facts, its predecessor's hash and its raw hash;
 *   `recorded_at` never goes back within a workspace, which makes a dropped time partition a prefix of each chain.
 */
import { Clock, Effect } from "effect"
import { captureApi } from "../domain/capture.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { type ChainFacts, GENESIS, rawHash } from "../integrity/chain.ts"
import type { ChainKey } from "../integrity/IntegrityKeys.ts"
import { ScopedSql } from "../store/TenantSql.ts"
import { callFacts, pgJson, pgText, type Reconstruction } from "./reconstruct.ts"

export interface ChainHead {
  readonly seq: number
  readonly hash: Buffer
  /** epoch ms of the head's recorded_at (0 for an empty chain) */
  readonly at: number
}

/** Locks and reads the workspace's chain head. */
export const lockChain = (scope: WorkspaceScope) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    const [row] = yield* sql<{ head_seq: string | number; head_hash: Uint8Array | null; head_at: Date | null }>`
      INSERT INTO ledger_chains (tenant_id, workspace_id) VALUES (${scope.tenant_id}::uuid, ${scope.workspace_id}::uuid)
      ON CONFLICT (tenant_id, workspace_id) DO UPDATE SET head_seq = ledger_chains.head_seq
      RETURNING head_seq, head_hash, head_at`
    return {
      seq: Number(row!.head_seq),
      hash: row!.head_hash === null ? GENESIS : Buffer.from(row!.head_hash),
      at: row!.head_at?.getTime() ?? 0
    } satisfies ChainHead
  })

/** Moves the locked head to the last decision chained. */
export const advanceChain = (scope: WorkspaceScope, head: ChainHead) =>
  Effect.gen(function*() {
    const sql = yield* ScopedSql
    yield* sql`UPDATE ledger_chains SET head_seq = ${head.seq}, head_hash = decode(${head.hash.toString("hex")}, 'hex'),
      head_at = ${new Date(head.at)}
      WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
  })

export interface ChainLink {
  readonly seq: number
  readonly recorded_at: number
  readonly prev_hash: Buffer
  readonly hash: Buffer
  readonly raw_hash: Buffer
  readonly chain_key: number
}

/** Text as Postgres gives it back: NUL replaced (pgText), and a lone surrogate as U+FFFD (how UTF-8 encodes it). */
const stored = (text: string) => pgText(text).toWellFormed()

/** JSON as jsonb gives it back (what verification reads), for values stored through `pgJson`. */
const asStored = (value: unknown) => (value === null || value === undefined ? null : JSON.parse(pgJson(value)))

/** The chained facts of a reconstruction, as its row stores them. */
export const factsOf = (
  scope: WorkspaceScope,
  item: Reconstruction,
  place: { readonly seq: number; readonly recorded_at: number; readonly chain_key: number }
): ChainFacts => {
  const { capture } = item
  const facts = callFacts(item)
  return {
    tenant_id: scope.tenant_id,
    workspace_id: scope.workspace_id,
    seq: place.seq,
    chain_key: place.chain_key,
    ledger_id: capture.ledger_id,
    user_id: capture.user_id,
    key_id: capture.key_id,
    agent_id: stored(capture.agent_id),
    execution_id: capture.execution_id === null ? null : stored(capture.execution_id),
    provider: stored(capture.provider),
    provider_type: stored(capture.provider_type),
    model: stored(capture.model),
    api: captureApi(capture),
    stream: capture.stream,
    status: capture.status,
    aborted: capture.aborted,
    created_at: new Date(capture.started_at).getTime(),
    captured_at: new Date(capture.ended_at).getTime(),
    recorded_at: place.recorded_at,
    first_token_ms: facts.firstTokenMs,
    latency_ms: facts.latencyMs,
    upstream_ms: capture.upstream_ms,
    usage: asStored(capture.usage),
    response_id: item.responseId === null ? null : stored(item.responseId),
    previous_response_id: item.continues === null ? null : stored(item.continues),
    capture_version: capture.v,
    source: asStored(capture.source)
  }
}

/** Places `items` (in that order) after `head`; returns their links and the new head. */
export const chainLinks = (scope: WorkspaceScope, items: ReadonlyArray<Reconstruction>, head: ChainHead, key: ChainKey) =>
  Effect.gen(function*() {
    const recorded_at = Math.max(yield* Clock.currentTimeMillis, head.at)
    let { seq, hash } = head
    const links = new Map<string, ChainLink>()
    for (const item of items) {
      seq += 1
      const raw_hash = rawHash(
        stored(item.capture.request),
        item.capture.response === null ? null : stored(item.capture.response),
        item.capture.context == null ? null : stored(item.capture.context)
      )
      const place = { seq, recorded_at, chain_key: key.id }
      const next = key.hash(factsOf(scope, item, place), hash, raw_hash)
      links.set(item.capture.ledger_id, { ...place, prev_hash: hash, hash: next, raw_hash })
      hash = next
    }
    return { links, head: { seq, hash, at: recorded_at } satisfies ChainHead }
  })
