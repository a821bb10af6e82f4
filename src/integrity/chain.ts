/**
 * The chained facts of a decision and their canonical encoding (docs/ARCHITECTURE.md, "Integrity").
 *
 * A decision's `hash` is HMAC-SHA-256(key, encoding ‖ prev_hash ‖ raw_hash). The encoding is a version line, the JSON
 * array of the fixed-shape facts — ids, attribution, provider, model, API, status, server timestamps in epoch ms,
 * timings, response ids, the decision's place (`seq`, `recorded_at`) and the key's id — then usage and the
 * transcript source as JSON with sorted keys. Derived fields (title, intent, trace, scores, cost) and the session
 * grouping are left out: `ledger rebuild` and session folding rewrite them from the chained facts, and that must not
 * break the chain. `raw_hash` covers the stored raw exchange (request, response, context), so a changed prompt or
 * answer is found too; Postgres recomputes it the same way at verification (`RAW_HASH_SQL`), where the text is.
 */
import * as Crypto from "node:crypto"

export const HASH_BYTES = 32
/** The `prev_hash` of a chain's first decision. */
export const GENESIS = Buffer.alloc(HASH_BYTES)
const ABSENT = Buffer.alloc(HASH_BYTES)

export interface ChainFacts {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly seq: number
  readonly chain_key: number
  readonly ledger_id: string
  readonly user_id: string
  readonly key_id: string
  readonly agent_id: string
  readonly execution_id: string | null
  readonly provider: string
  readonly provider_type: string
  readonly model: string
  readonly api: string
  readonly stream: boolean
  readonly status: number
  readonly aborted: boolean
  /** epoch milliseconds */
  readonly created_at: number
  readonly captured_at: number
  readonly recorded_at: number
  readonly first_token_ms: number | null
  readonly latency_ms: number
  readonly upstream_ms: number | null
  readonly usage: unknown
  readonly response_id: string | null
  readonly previous_response_id: string | null
  readonly capture_version: number
  readonly source: unknown
}

/** JSON with object keys sorted at every level (jsonb reorders keys; the encoding must not depend on it). */
export const canonicalJson = (value: unknown): string => {
  if (value === null || value === undefined) return "null"
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (typeof value === "object") {
    const entries = Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
    return `{${entries.join(",")}}`
  }
  return JSON.stringify(value)
}

const PREFIX = "ledger-chain/1\n"

/** The facts of fixed shape — ids, text, integers, booleans, epoch milliseconds — as one JSON array. */
const scalarJson = (f: ChainFacts) =>
  JSON.stringify([
    f.tenant_id, f.workspace_id, f.seq, f.chain_key, f.ledger_id, f.user_id, f.key_id, f.agent_id, f.execution_id,
    f.provider, f.provider_type, f.model, f.api, f.stream, f.status, f.aborted, f.created_at, f.captured_at,
    f.recorded_at, f.first_token_ms, f.latency_ms, f.upstream_ms, f.response_id, f.previous_response_id, f.capture_version
  ])

/** The rest: usage and the transcript source, JSON with sorted keys. */
const documentsText = (usage: unknown, source: unknown) => `\n${canonicalJson(usage)}\n${canonicalJson(source)}`

export const encodeFacts = (f: ChainFacts): string => PREFIX + scalarJson(f) + documentsText(f.usage, f.source)

/** The decision's hash under `key`. */
export const chainHash = (key: Crypto.KeyObject, facts: ChainFacts, prevHash: Uint8Array, rawHash: Uint8Array): Buffer =>
  Crypto.createHmac("sha256", key).update(encodeFacts(facts)).update(prevHash).update(rawHash).digest()

const sha256 = (text: string | null) => (text === null ? ABSENT : Crypto.createHash("sha256").update(text, "utf8").digest())

/** sha256 over the digests of the stored request, response and context (an absent part counts as 32 zero bytes). */
export const rawHash = (request: string, response: string | null, context: string | null): Buffer =>
  Crypto.createHash("sha256").update(sha256(request)).update(sha256(response)).update(sha256(context)).digest()

/** `rawHash` computed by Postgres from the stored columns (verification hashes where the text is). */
export const RAW_HASH_SQL = `sha256(sha256(convert_to(raw_request, 'UTF8'))
  || coalesce(sha256(convert_to(raw_response, 'UTF8')), '\\x${ABSENT.toString("hex")}'::bytea)
  || coalesce(sha256(convert_to(raw_context, 'UTF8')), '\\x${ABSENT.toString("hex")}'::bytea))`

/** Constant-time comparison of two digests (false when either is missing). */
export const sameDigest = (a: Uint8Array | null | undefined, b: Uint8Array | null | undefined): boolean =>
  a != null && b != null && a.length === b.length && Crypto.timingSafeEqual(a, b)
