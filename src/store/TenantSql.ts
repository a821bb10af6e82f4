/**
 * The tenant-scoped SQL client (docs/ARCHITECTURE.md, "The parts" and the isolation promise): the only way query,
 * builder and analytics code reaches ledger tables.
 *
 * `TenantSql.read` / `.write` / `.control` open a transaction, set the tenant, workspace, user, member role and
 * database role in one statement (`set_config(..., true)` — local to the transaction, so nothing leaks to the
 * next pooled query), and provide `ScopedSql` to the effect. Repository code asks for `ScopedSql`, which exists
 * only inside such a transaction: an unscoped read does not type-check. And what `ScopedSql` holds is the tagged
 * template and its helpers alone, not the pool: nothing in its value can open a connection or a transaction of its
 * own (`withTransaction`, `reserve`) outside the scope.
 *
 * A SQL failure inside leaves as the domain's `DatabaseUnavailable` (a 503 on the read side): callers see that type.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, SqlError, type Statement } from "effect/sql"
import type { TenantScope, WorkspaceScope } from "../domain/principal.ts"
import { DatabaseUnavailable } from "../domain/errors.ts"

/** The SQL of a scoped transaction: the tagged template and its helpers. */
export class ScopedSql extends Context.Service<ScopedSql, Statement.Constructor>()("ledger/store/ScopedSql") {}

/** The tagged template and helpers of `client`, and nothing else of it. */
const templateOf = (client: SqlClient.SqlClient): Statement.Constructor => {
  const { unsafe, literal, in: in_, insert, update, updateValues, and, or, csv, join, onDialect, onDialectOrElse } = client
  const template = (strings: any, ...args: Array<any>) => client(strings, ...args)
  return Object.assign(template as Statement.Constructor, { unsafe, literal, in: in_, insert, update, updateValues, and, or, csv, join, onDialect, onDialectOrElse })
}

/** What an effect run in a scope fails with: its own errors, with SQL failures as `DatabaseUnavailable`. */
export type ScopedError<E> = Exclude<E, SqlError.SqlError> | DatabaseUnavailable

type DbRole = "ledger_reader" | "ledger_builder" | "ledger_control"

const NIL = ""

/** Maps a SQL failure to the domain's 503 error, keeping the Postgres cause for the logs. */
const unavailable = (error: SqlError.SqlError) =>
  new DatabaseUnavailable({ message: "database unavailable", cause: error })

export class TenantSql extends Context.Service<TenantSql, {
  /** Query layer: read-only role, tenant + workspace + (restricted) user scope. */
  read<A, E, R>(scope: TenantScope, effect: Effect.Effect<A, E, R>): Effect.Effect<A, ScopedError<E>, Exclude<R, ScopedSql>>
  /** Decision builder: write role, tenant + workspace scope. */
  write<A, E, R>(scope: WorkspaceScope, effect: Effect.Effect<A, E, R>): Effect.Effect<A, ScopedError<E>, Exclude<R, ScopedSql>>
  /** Authentication and administration: the control role, which sees identity tables and no ledger rows. */
  control<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, ScopedError<E>, Exclude<R, ScopedSql>>
}>()("ledger/store/TenantSql") {
  static readonly layer = Layer.effect(
    TenantSql,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const template = templateOf(sql)

      // Writers plan every statement for the table as it is now. Statements are prepared per pooled connection, and
      // after five runs Postgres may switch to a cached generic plan made while the ledger was small: the builder's
      // redelivery probe kept a per-id sequential scan as decisions grew (50–90 ms a probe at 200k, CPU-bound).
      // Readers keep the default: their tables do not start empty under a live connection the way a new install's do.
      // (The builder's insert of decisions asks for a generic plan itself: it scans nothing, and a custom plan copies
      // its parameters, megabytes of column arrays, into the plan: builder/writes.ts.)
      const setScope = (role: DbRole, tenant: string, workspace: string, user: string, memberRole: string) =>
        sql`SELECT set_config('ledger.tenant_id', ${tenant}, true), set_config('ledger.workspace_id', ${workspace}, true),
                   set_config('ledger.user_id', ${user}, true), set_config('ledger.member_role', ${memberRole}, true),
                   set_config('plan_cache_mode', ${role === "ledger_builder" ? "force_custom_plan" : "auto"}, true),
                   set_config('role', ${role}, true)`

      const scoped = <A, E, R>(
        role: DbRole,
        tenant: string,
        workspace: string,
        user: string,
        memberRole: string,
        effect: Effect.Effect<A, E, R>
      ): Effect.Effect<A, ScopedError<E>, Exclude<R, ScopedSql>> =>
        sql.withTransaction(
          Effect.andThen(setScope(role, tenant, workspace, user, memberRole), Effect.provideService(effect, ScopedSql, template))
        ).pipe(
          Effect.mapError((error) => SqlError.isSqlError(error) ? unavailable(error) : error)
        ) as Effect.Effect<A, ScopedError<E>, Exclude<R, ScopedSql>>

      return TenantSql.of({
        read: (scope, effect) => scoped("ledger_reader", scope.tenant_id, scope.workspace_id, scope.user_id, scope.role, effect),
        write: (scope, effect) => scoped("ledger_builder", scope.tenant_id, scope.workspace_id, NIL, NIL, effect),
        control: (effect) => scoped("ledger_control", NIL, NIL, NIL, NIL, effect)
      })
    })
  )
}
