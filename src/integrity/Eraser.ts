/**
 * `ledger erase` (docs/ARCHITECTURE.md, "Integrity"): deletion requests. The decisions of an agent, of a user (by
 * email, in every tenant that has it) or made before a date lose their content but keep their place in the chain:
 *
 * - per workspace, one audit event of kind `erase`, HMAC-signed with the current chain key (`auditMacText`), records
 *   the criteria (the user's id, never the email) and how many decisions it erased;
 * - each of those decisions becomes a tombstone: raw exchange, error, title, subjects and every text of its
 *   derivation emptied (labels, scores and cost stay, so the readers still render it), `erasure_id` naming the event.
 *   Its chained facts, `raw_hash` and links are untouched: `ledger verify` accepts the changed raw exchange because
 *   the event is signed, and names a tombstone whose event is missing or forged;
 * - what analytics derived from their text goes too: postings (and the term counts they made), line prints,
 *   hand-offs, the quote of a title in a loop insight, and the summaries of their sessions (with the first title a
 *   session keeps, when it is theirs). Their search rows are blanked, not deleted: a search row is what tells the
 *   materialiser a decision was counted, and `built_at` moves.
 *
 * Decisions are erased in pages, a transaction each; the first page's transaction also writes the event, so a
 * tombstone never names an event that is not there. The pages are bounded by the last decision matching when the
 * event was written (`created_at`, `ledger_id`): decisions arriving meanwhile are left to the next request.
 * Erasing again what is erased matches nothing and writes no event.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as Crypto from "node:crypto"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { VECTOR_DIMENSIONS } from "../analytics/text.ts"
import { analyticsLockKey } from "../analytics/lease.ts"
import { forgetPostings } from "../analytics/postings.ts"
import { agentLockKey, lockAgents } from "../store/agentRollups.ts"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { IntegrityKeys } from "../chain/IntegrityKeys.ts"
import { auditMacText } from "./markers.ts"
import { listWorkspaces, type NamedWorkspace, type UnknownWorkspace } from "./workspaces.ts"

const PAGE = 5_000

/** What a deletion request names. */
export type ErasureCriteria =
  | { readonly kind: "agent"; readonly agent_id: string }
  | { readonly kind: "user"; readonly email: string }
  | { readonly kind: "before"; readonly before: Date }

/** A request naming no criteria, several, or a date that is not one. */
export class ErasureCriteriaInvalid extends Schema.TaggedError<ErasureCriteriaInvalid>()("ErasureCriteriaInvalid", {
  message: Schema.String
}) {}

/** No tenant has a user with the email. */
export class ErasureUserUnknown extends Schema.TaggedError<ErasureUserUnknown>()("ErasureUserUnknown", {
  message: Schema.String
}) {}

export interface ErasedWorkspace {
  readonly tenant: string
  readonly workspace: string
  readonly tenant_id: string
  readonly workspace_id: string
  readonly decisions: number
  readonly event_id: string
}

export interface ErasureResult {
  readonly erased: number
  readonly workspaces: ReadonlyArray<ErasedWorkspace>
}

/** One workspace's part of a request: which of its decisions, and how the audit event names them. */
interface Target {
  readonly scope: NamedWorkspace
  readonly criteria: { readonly agent: string } | { readonly user: string } | { readonly before: string }
}

/** A decision's place in the order pages are taken in (`created_at` as text: microseconds kept). */
interface Key {
  readonly created_at: string
  readonly ledger_id: string
}

const START: Key = { created_at: "-infinity", ledger_id: "00000000-0000-0000-0000-000000000000" }

/** Score reasons can quote the answer (the least likely token): they go with the other texts. */
const withoutReasons = (score: string) => `jsonb_set((d.derivation->'${score}')::jsonb, '{reasons}', '[]'::jsonb)`

/** The derivation a tombstone keeps: its labels, cost and score values, every text emptied. */
const ERASED_DERIVATION = `jsonb_build_object('outcome', d.derivation->'outcome', 'intent', d.derivation->'intent',
  'intent_reason', '', 'cost', d.derivation->'cost', 'quality', ${withoutReasons("quality")},
  'confidence', ${withoutReasons("confidence")}, 'logic_trace', '[]'::jsonb, 'evidence', '[]'::jsonb,
  'findings', '[]'::jsonb, 'artifacts', '[]'::jsonb, 'title', '')`

/** How a loop insight quotes the title of its first decision (src/analytics/detect/loops.ts). */
const LOOP_TITLE_QUOTE = " \\(“.*”\\)$"

export class Eraser extends Context.Service<Eraser, {
  erase(options: {
    readonly criteria: ErasureCriteria
    readonly workspace?: string | undefined
    /** decisions per transaction (default 5,000) */
    readonly pageSize?: number | undefined
  }): Effect.Effect<ErasureResult, DatabaseUnavailable | UnknownWorkspace | ErasureUserUnknown>
}>()("ledger/integrity/Eraser") {
  static readonly layer = Layer.effect(
    Eraser,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const keys = yield* IntegrityKeys

      const matching = (sql: ScopedSql["Service"], { criteria, scope }: Target) =>
        sql`tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid AND erasure_id IS NULL AND ${
          "agent" in criteria
            ? sql`agent_id = ${criteria.agent}`
            : "user" in criteria
            ? sql`user_id = ${criteria.user}::uuid`
            : sql`created_at < ${criteria.before}::timestamptz`
        }`

      /** Counts what the target matches now and writes its signed event; null (and no event) when nothing matches. */
      const writeEvent = Effect.fnUntraced(function*(target: Target) {
        const sql = yield* ScopedSql
        const [last] = yield* sql<Key>`SELECT created_at::text AS created_at, ledger_id::text AS ledger_id FROM decisions d
          WHERE ${matching(sql, target)} ORDER BY d.created_at DESC, d.ledger_id DESC LIMIT 1`
        if (last === undefined) return null
        const [{ n }] = yield* sql<{ n: number }>`SELECT count(*)::float8 AS n FROM decisions WHERE ${matching(sql, target)}`
        const event = {
          event_id: Crypto.randomUUID(),
          kind: "erase",
          at: new Date(yield* Clock.currentTimeMillis),
          detail: { criteria: target.criteria, decisions: n }
        }
        // the current key is always held
        const mac = keys.mac(keys.current.id, auditMacText(target.scope, event))!
        yield* sql`INSERT INTO ledger_audit_events (event_id, tenant_id, workspace_id, kind, at, detail, chain_key, mac)
          VALUES (${event.event_id}::uuid, ${target.scope.tenant_id}::uuid, ${target.scope.workspace_id}::uuid, ${event.kind},
            ${event.at}, ${JSON.stringify(event.detail)}::jsonb, ${keys.current.id}, decode(${mac.toString("hex")}, 'hex'))`
        return { event_id: event.event_id, last }
      })

      /**
       * Tombstones the next `size` matching decisions after `after`, up to `bound`, and forgets what analytics derived
       * from them. A keyset, not the first matches left: those would be found after every tombstone before them.
       */
      const erasePage = Effect.fnUntraced(function*(target: Target, eventId: string, after: Key, bound: Key, size: number) {
        const sql = yield* ScopedSql
        const { tenant_id, workspace_id } = target.scope
        // ordered by the columns (`d.`), not the text the select names alike; the plain `created_at` conditions are
        // what an index with created_at DESC takes as its bounds
        const page = yield* sql<Key & { agent_id: string }>`SELECT created_at::text AS created_at, ledger_id::text AS ledger_id, agent_id FROM decisions d
          WHERE ${matching(sql, target)}
            AND created_at >= ${after.created_at}::timestamptz AND (created_at, ledger_id) > (${after.created_at}::timestamptz, ${after.ledger_id}::uuid)
            AND created_at <= ${bound.created_at}::timestamptz AND (created_at, ledger_id) <= (${bound.created_at}::timestamptz, ${bound.ledger_id}::uuid)
          ORDER BY d.created_at, d.ledger_id LIMIT ${size}`
        if (page.length === 0) return { read: 0, erased: 0, last: after }
        // the builder's locks on these agents: a batch that read their sessions' first titles before this page
        // committed would write them back over the blanked ones
        yield* lockAgents(page.map((row) => agentLockKey(target.scope, row.agent_id)))
        // and the materialiser's: a batch read before this page commits is written before it (and blanked by it) or
        // after it, when the batch leaves out what the page changed
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${analyticsLockKey(target.scope)}))`
        const erased = yield* sql<{ ledger_id: string; session_id: string }>`
          UPDATE decisions d SET raw_request = '', raw_response = NULL, raw_context = NULL, error = NULL, title = '',
            subjects = '[]'::jsonb, derivation = ${sql.literal(ERASED_DERIVATION)}, erasure_id = ${eventId}::uuid,
            built_at = clock_timestamp()
          WHERE d.ledger_id = ANY(${page.map((row) => row.ledger_id)}::uuid[]) AND d.erasure_id IS NULL
          RETURNING d.ledger_id::text AS ledger_id, d.session_id::text AS session_id`
        const done = { read: page.length, erased: erased.length, last: page.at(-1)! }
        if (erased.length === 0) return done
        const ids = erased.map((row) => row.ledger_id)
        // a decision's posting blocks are found by its search row's lexemes (their key) and time, before the row is
        // blanked: the first block of the lexeme ending at or after it that holds it. Similarity search reads
        // document frequencies, so the term counts lose the decisions too
        yield* forgetPostings(
          target.scope,
          sql`SELECT unnest(${ids}::uuid[]) AS ledger_id`,
          sql`SELECT DISTINCT k.lexeme, k.newest, k.head FROM decision_search s, unnest(s.document) t
            CROSS JOIN LATERAL (SELECT b.lexeme, b.newest, b.head FROM search_posting_blocks b
              WHERE b.tenant_id = ${tenant_id}::uuid AND b.workspace_id = ${workspace_id}::uuid AND b.lexeme = t.lexeme
                AND b.newest >= s.created_at AND b.oldest <= s.created_at AND s.ledger_id = ANY(b.ledger_ids)
              ORDER BY b.newest LIMIT 1) k
            WHERE s.ledger_id = ANY(${ids}::uuid[])`
        )
        yield* sql`UPDATE decision_search SET document = ''::tsvector,
            local_vector = array_fill(0::real, ARRAY[${VECTOR_DIMENSIONS}::int]), embedding = NULL, embedding_model = NULL,
            call_signature = ''
          WHERE ledger_id = ANY(${ids}::uuid[])`
        yield* sql`DELETE FROM decision_prints WHERE tenant_id = ${tenant_id}::uuid AND workspace_id = ${workspace_id}::uuid
          AND ledger_id = ANY(${ids}::uuid[])`
        yield* sql`DELETE FROM handoffs WHERE tenant_id = ${tenant_id}::uuid AND workspace_id = ${workspace_id}::uuid
          AND (producer_ledger_id = ANY(${ids}::uuid[]) OR consumer_ledger_id = ANY(${ids}::uuid[]))`
        yield* sql`UPDATE insights SET title = regexp_replace(title, ${LOOP_TITLE_QUOTE}, '')
          WHERE tenant_id = ${tenant_id}::uuid AND workspace_id = ${workspace_id}::uuid AND type = 'loop'
            AND ledger_ids && ${ids}::text[]`
        yield* sql`UPDATE sessions SET summary = '',
            first_title = CASE WHEN first_ledger_id = ANY(${ids}::uuid[]) THEN '' ELSE first_title END
          WHERE session_id = ANY(${[...new Set(erased.map((row) => row.session_id))]}::uuid[])
            AND (summary <> '' OR (first_ledger_id = ANY(${ids}::uuid[]) AND first_title <> ''))`
        return done
      })

      const eraseTarget = Effect.fnUntraced(function*(target: Target, size: number) {
        const first = yield* tenantSql.write(target.scope, Effect.gen(function*() {
          const event = yield* writeEvent(target)
          return event === null ? null : { ...event, page: yield* erasePage(target, event.event_id, START, event.last, size) }
        }))
        if (first === null) return null
        let page = first.page
        let total = page.erased
        while (page.read === size) {
          page = yield* tenantSql.write(target.scope, erasePage(target, first.event_id, page.last, first.last, size))
          total += page.erased
        }
        return {
          tenant: target.scope.tenant,
          workspace: target.scope.workspace,
          tenant_id: target.scope.tenant_id,
          workspace_id: target.scope.workspace_id,
          decisions: total,
          event_id: first.event_id
        } satisfies ErasedWorkspace
      })

      /** The workspaces and per-workspace criteria of a request; a user is named by id in each of their tenants. */
      const targetsOf = Effect.fnUntraced(function*(criteria: ErasureCriteria, workspace: string | undefined) {
        const workspaces = yield* Effect.provideService(listWorkspaces(workspace), TenantSql, tenantSql)
        switch (criteria.kind) {
          case "agent":
            return workspaces.map((scope): Target => ({ scope, criteria: { agent: criteria.agent_id } }))
          case "before":
            return workspaces.map((scope): Target => ({ scope, criteria: { before: criteria.before.toISOString() } }))
          case "user": {
            const users = yield* tenantSql.control(ScopedSql.use((sql) =>
              sql<{ user_id: string; tenant_id: string }>`SELECT user_id::text AS user_id, tenant_id::text AS tenant_id FROM users
                WHERE lower(email) = lower(${criteria.email}) ORDER BY tenant_id, user_id`
            ))
            if (users.length === 0) return yield* new ErasureUserUnknown({ message: `no user has the email ${criteria.email}` })
            return workspaces.flatMap((scope) =>
              users.filter((user) => user.tenant_id === scope.tenant_id).map((user): Target => ({ scope, criteria: { user: user.user_id } }))
            )
          }
        }
      })

      const erase = Effect.fn("Eraser.erase")(function*(options: {
        readonly criteria: ErasureCriteria
        readonly workspace?: string | undefined
        readonly pageSize?: number | undefined
      }) {
        const size = Math.max(1, options.pageSize ?? PAGE)
        const erased: Array<ErasedWorkspace> = []
        for (const target of yield* targetsOf(options.criteria, options.workspace)) {
          const done = yield* eraseTarget(target, size)
          if (done !== null) erased.push(done)
        }
        if (erased.length > 0) {
          yield* Effect.logInfo("decisions erased", {
            criteria: options.criteria.kind,
            workspaces: erased.map(({ tenant_id, workspace_id, decisions, event_id }) => ({ tenant_id, workspace_id, decisions, event_id }))
          })
        }
        return { erased: erased.reduce((sum, w) => sum + w.decisions, 0), workspaces: erased } satisfies ErasureResult
      })

      return Eraser.of({ erase })
    })
  )
}
