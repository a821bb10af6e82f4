/**
 * SQL failures inside `TenantSql` transactions become `DatabaseUnavailable` at run time (TenantSql maps them);
 * `asUnavailable` says so to the type checker where analytics code surfaces those errors.
 */
import { SqlError } from "effect/sql"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import { unavailable } from "../store/TenantSql.ts"

export const asUnavailable = <E>(error: E): Exclude<E, SqlError.SqlError> | DatabaseUnavailable =>
  SqlError.isSqlError(error) ? unavailable(error) : error as Exclude<E, SqlError.SqlError>
