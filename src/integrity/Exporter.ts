/**
 * `ledger export` (docs/ARCHITECTURE.md, "Integrity"): every decision with its place in the chain, one JSON object a
 * line, for auditors. A line carries the chained facts, the raw exchange as kept and the chain fields, so whoever
 * holds the key recomputes each hash as HMAC-SHA-256(key, encodeFacts(facts) ‖ prev_hash ‖ raw_hash) (chain.ts) and each raw hash
 * with `rawHash(raw_request, raw_response, raw_context)` (unless `erased`: then the content is gone, the hash kept).
 *
 * Workspaces come in `listWorkspaces` order, each read inside its own tenant scope (row-level security). Within one,
 * the chain in seq order, then any decisions not chained yet, by capture time. Pages come by keyset, each in its own
 * transaction, and a page is written before the next is read: the output's backpressure paces the database, and at
 * most one page is held (not prefetched — pages carry the raw exchanges, which can be large).
 */
import { Clock, Context, Effect, Layer, Option, Schema, type Sink, Stream } from "effect"
import type { Statement } from "effect/sql"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import type { StoredFacts } from "./rows.ts"
import { listWorkspaces, type NamedWorkspace, type UnknownWorkspace } from "./workspaces.ts"

const PAGE = 10_000
/** lines are written in batches of about this many bytes (one write per line would be a syscall per decision) */
const BATCH_BYTES = 1 << 20

/** `since` is not before `until`: the range holds no decision. */
export class ExportRangeInvalid extends Schema.TaggedError<ExportRangeInvalid>()("ExportRangeInvalid", {
  message: Schema.String
}) {}

export interface ExportProgress {
  readonly done: number
  readonly total: number
}

export interface ExportResult {
  readonly decisions: number
  /** the workspaces walked (those the filter named, or all) */
  readonly workspaces: number
  readonly seconds: number
}

interface ExportRow extends StoredFacts {
  readonly tenant_id: string
  readonly workspace_id: string
  readonly session_id: string
  readonly title: string
  readonly intent: string
  readonly outcome: string
  readonly cost_usd: number | null
  readonly quality: number
  readonly confidence: number
  readonly raw_request: string
  readonly raw_response: string | null
  readonly raw_context: string | null
  readonly error: unknown
  readonly seq: number | null
  readonly prev_hash: string | null
  readonly hash: string | null
  readonly raw_hash: string | null
  readonly chain_key: number | null
  readonly erased: boolean
  /** created_at as Postgres prints it (microseconds and offset): the unchained keyset, exact where a Date is not */
  readonly created_key: string
}

const EXPORT_COLUMNS = `ledger_id, tenant_id, workspace_id, user_id, key_id, agent_id, session_id, execution_id, provider,
  provider_type, model, api, stream, status, aborted, created_at, captured_at, latency_ms, first_token_ms, upstream_ms, usage,
  response_id, previous_response_id, capture_version, source, title, intent, outcome, cost_usd, quality, confidence,
  raw_request, raw_response, raw_context, error, seq::float8 AS seq, encode(prev_hash, 'hex') AS prev_hash,
  encode(hash, 'hex') AS hash, encode(raw_hash, 'hex') AS raw_hash, chain_key, recorded_at, erasure_id IS NOT NULL AS erased,
  created_at::text AS created_key`

/** Where a workspace's walk stands: in the chain after `seq`, or among the unchained after a (created_at, id). */
type Cursor =
  | { readonly chained: true; readonly seq: number }
  | { readonly chained: false; readonly after: { readonly created: string; readonly ledger_id: string } | undefined }

/** One decision as a line: its columns in the order EXPORT_COLUMNS selects them, the names beside the ids, the chain apart. */
const line = (scope: NamedWorkspace, row: ExportRow): string => {
  const { ledger_id, tenant_id, workspace_id, seq, prev_hash, hash, raw_hash, chain_key, recorded_at, erased, created_key: _, ...decision } = row
  return JSON.stringify({
    ledger_id,
    tenant_id,
    tenant: scope.tenant,
    workspace_id,
    workspace: scope.workspace,
    ...decision,
    integrity: seq === null ? null : { seq, prev_hash, hash, raw_hash, chain_key, recorded_at, erased }
  }) + "\n"
}

/** The workspace's decisions created in [since, until). */
const selected = (sql: Statement.Constructor, scope: NamedWorkspace, since: Date | undefined, until: Date | undefined) =>
  sql.and([
    sql`tenant_id = ${scope.tenant_id}::uuid`,
    sql`workspace_id = ${scope.workspace_id}::uuid`,
    since === undefined ? sql`TRUE` : sql`created_at >= ${since}::timestamptz`,
    until === undefined ? sql`TRUE` : sql`created_at < ${until}::timestamptz`
  ])

/** A page's lines in batches of about BATCH_BYTES, encoded as they are pulled (not the whole page at once). */
function* batches(scope: NamedWorkspace, rows: ReadonlyArray<ExportRow>): Generator<Uint8Array> {
  let pending: Array<string> = []
  let size = 0
  for (const row of rows) {
    const text = line(scope, row)
    pending.push(text)
    size += text.length
    if (size >= BATCH_BYTES) {
      yield Buffer.from(pending.join(""), "utf8")
      pending = []
      size = 0
    }
  }
  if (pending.length > 0) yield Buffer.from(pending.join(""), "utf8")
}

export class Exporter extends Context.Service<Exporter, {
  /** Writes the decisions (all, or one workspace's; created in [since, until)) to `out` as JSON lines. */
  run<E, R>(options: {
    readonly out: Sink.Sink<unknown, Uint8Array, unknown, E, R>
    readonly workspace?: string | undefined
    readonly since?: Date | undefined
    readonly until?: Date | undefined
    readonly onProgress?: ((progress: ExportProgress) => Effect.Effect<void>) | undefined
  }): Effect.Effect<ExportResult, DatabaseUnavailable | UnknownWorkspace | ExportRangeInvalid | E, R>
}>()("ledger/integrity/Exporter") {
  static readonly layer = Layer.effect(
    Exporter,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql

      const read = <A, E>(scope: NamedWorkspace, effect: Effect.Effect<A, E, ScopedSql>) =>
        tenantSql.read({ tenant_id: scope.tenant_id, workspace_id: scope.workspace_id, user_id: "", role: "member" }, effect)

      const pages = (scope: NamedWorkspace, since: Date | undefined, until: Date | undefined) =>
        Stream.paginate<Cursor, ReadonlyArray<ExportRow>, DatabaseUnavailable>({ chained: true, seq: 0 }, (cursor) =>
          read(scope, Effect.gen(function*() {
            const sql = yield* ScopedSql
            const conditions = selected(sql, scope, since, until)
            if (cursor.chained) {
              // by the column, not the float8 alias of the select list: the chain index gives the order
              const rows = yield* sql<ExportRow>`SELECT ${sql.literal(EXPORT_COLUMNS)} FROM decisions d
                WHERE ${conditions} AND d.seq > ${cursor.seq}::bigint ORDER BY d.seq LIMIT ${PAGE}`
              const next: Cursor = rows.length === PAGE ? { chained: true, seq: rows.at(-1)!.seq! } : { chained: false, after: undefined }
              return [rows.length === 0 ? [] : [rows], Option.some(next)] as const
            }
            const after = cursor.after === undefined
              ? sql`TRUE`
              : sql`(created_at, ledger_id) > (${cursor.after.created}::timestamptz, ${cursor.after.ledger_id}::uuid)`
            const rows = yield* sql<ExportRow>`SELECT ${sql.literal(EXPORT_COLUMNS)} FROM decisions
              WHERE ${conditions} AND seq IS NULL AND ${after} ORDER BY created_at, ledger_id LIMIT ${PAGE}`
            const last = rows.at(-1)
            return [
              rows.length === 0 ? [] : [rows],
              rows.length === PAGE && last !== undefined
                ? Option.some<Cursor>({ chained: false, after: { created: last.created_key, ledger_id: last.ledger_id } })
                : Option.none()
            ] as const
          }))
        )

      const run = Effect.fn("Exporter.run")(function*<E, R>(options: {
        readonly out: Sink.Sink<unknown, Uint8Array, unknown, E, R>
        readonly workspace?: string | undefined
        readonly since?: Date | undefined
        readonly until?: Date | undefined
        readonly onProgress?: ((progress: ExportProgress) => Effect.Effect<void>) | undefined
      }) {
        const { since, until } = options
        if (since !== undefined && until !== undefined && since.getTime() >= until.getTime()) {
          return yield* new ExportRangeInvalid({
            message: `--since (${since.toISOString()}) must be before --until (${until.toISOString()}): --until is exclusive`
          })
        }
        const started = yield* Clock.currentTimeMillis
        const workspaces = yield* Effect.provideService(listWorkspaces(options.workspace), TenantSql, tenantSql)
        let total = 0
        for (const scope of workspaces) {
          const [row] = yield* read(scope, ScopedSql.use((sql) =>
            sql<{ n: number }>`SELECT count(*)::float8 AS n FROM decisions WHERE ${selected(sql, scope, since, until)}`
          ))
          total += row?.n ?? 0
        }
        const report = options.onProgress ?? (() => Effect.void)
        let done = 0
        yield* Stream.fromIterable(workspaces).pipe(
          Stream.flatMap((scope) => pages(scope, since, until).pipe(Stream.map((rows) => ({ scope, rows })))),
          // decisions added while the export runs may join a chain's end: the total grows with them
          Stream.tap(({ rows }) => {
            done += rows.length
            return report({ done, total: Math.max(total, done) })
          }),
          Stream.flatMap(({ scope, rows }) => Stream.fromIterable(batches(scope, rows), { chunkSize: 1 })),
          Stream.run(options.out)
        )
        const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
        return { decisions: done, workspaces: workspaces.length, seconds } satisfies ExportResult
      })

      return Exporter.of({ run })
    })
  )
}
