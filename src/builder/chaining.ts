/**
 * Chaining a batch's new decisions into their workspace's chain (docs/ARCHITECTURE.md, "Integrity"), inside the
 * workspace's transaction, after `lockChain` (chain/heads.ts) took its head:
 *
 * - `chainDraft` computes what a decision's hash covers apart from its place — its facts and the hash of its raw
 *   exchange — before the transaction, so the locks are not held for it.
 * - `chainLinks` numbers the new decisions and hashes each over its facts, its predecessor's hash and its raw hash;
 *   `recorded_at` never goes back within a workspace, which makes a dropped time partition a prefix of each chain.
 */
import { Clock, Effect } from "effect"
import { captureApi } from "../domain/capture.ts"
import type { WorkspaceScope } from "../domain/principal.ts"
import { type ChainFacts, rawHash } from "../chain/chain.ts"
import type { ChainHead } from "../chain/heads.ts"
import type { ChainKey } from "../chain/IntegrityKeys.ts"
import { pgJson, pgText } from "../store/pgValues.ts"
import { callFacts, type Reconstruction } from "./reconstruct.ts"

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

/**
 * JSON as jsonb gives it back (what verification reads), for values stored through `pgJson`. A usage document is
 * mostly a flat object of numbers, which the round trip would give back as it is (`canonicalJson` writes numbers as
 * JSON does).
 */
const asStored = (value: unknown) =>
  value === null || value === undefined ? null : numbersOnly(value) ? value : JSON.parse(pgJson(value))

const numbersOnly = (value: unknown) => {
  if (typeof value !== "object" || value === null || Array.isArray(value) || Object.getPrototypeOf(value) !== Object.prototype) return false
  for (const key in value) if (typeof (value as Record<string, unknown>)[key] !== "number") return false
  return true
}

/** A decision's place in its chain. */
type Place = Pick<ChainFacts, "seq" | "recorded_at" | "chain_key">

/** What a decision's hash covers apart from its place, as its row stores it. */
export interface ChainDraft {
  readonly facts: Omit<ChainFacts, keyof Place>
  readonly raw_hash: Buffer
}

/** The chained facts of a reconstruction and its raw hash, as its row stores them. */
export const chainDraft = (scope: WorkspaceScope, item: Reconstruction): ChainDraft => {
  const { capture } = item
  const facts = callFacts(item)
  const raw_hash = rawHash(
    stored(capture.request),
    capture.response === null ? null : stored(capture.response),
    capture.context == null ? null : stored(capture.context)
  )
  return {
    raw_hash,
    facts: {
      tenant_id: scope.tenant_id,
      workspace_id: scope.workspace_id,
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
}

/** Places the drafted decisions (in that order) after `head`; returns their links by ledger id and the new head. */
export const chainLinks = Effect.fnUntraced(function*(drafts: ReadonlyArray<ChainDraft>, head: ChainHead, key: ChainKey) {
  const recorded_at = Math.max(yield* Clock.currentTimeMillis, head.at)
  let { seq, hash } = head
  const links = new Map<string, ChainLink>()
  for (const { facts, raw_hash } of drafts) {
    seq += 1
    const place: Place = { seq, recorded_at, chain_key: key.id }
    const next = key.hash({ ...facts, ...place }, hash, raw_hash)
    links.set(facts.ledger_id, { ...place, prev_hash: hash, hash: next, raw_hash })
    hash = next
  }
  return { links, head: { seq, hash, at: recorded_at } satisfies ChainHead }
})
