/**
 * Page cursors: opaque to clients, tamper-evident, and bound to the query that issued them.
 *
 * A cursor carries the keyset position of the last row of a page — its sort value (as Postgres text, so
 * timestamps keep their microseconds and doubles their exact digits) and its id — signed with HMAC-SHA256 under
 * the install's secret. The MAC also covers a binding string (caller scope, list, ordering and filters), so a
 * cursor replayed by another principal or with other parameters is refused instead of paging the wrong list.
 */
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { MAX_CURSOR_LENGTH } from "./params.ts"

const VERSION = "1"
const MAC_BYTES = 16

/** Keyset position: the sort value of the last row (Postgres text of the sort expression) and its id. */
export interface CursorPosition {
  readonly sort: string
  readonly id: string
}

/** The install's secret for signing cursors, created once and shared by every API process of the install. */
export class CursorSecret extends Context.Service<CursorSecret, { readonly key: Uint8Array }>()("ledger/query/CursorSecret") {
  static readonly layer = Layer.effect(
    CursorSecret,
    Effect.gen(function*() {
      const tenantSql = yield* TenantSql
      const key = yield* tenantSql.control(Effect.gen(function*() {
        const sql = yield* ScopedSql
        // first process wins; the others read what it wrote
        yield* sql`INSERT INTO install_secrets (name, secret) VALUES ('cursor', ${Crypto.randomBytes(32)})
          ON CONFLICT (name) DO NOTHING`
        const rows = yield* sql<{ secret: Uint8Array }>`SELECT secret FROM install_secrets WHERE name = 'cursor'`
        return rows[0]!.secret
      }))
      return CursorSecret.of({ key: new Uint8Array(key) })
    }).pipe(Effect.withSpan("CursorSecret.load"))
  )
}

const mac = (key: Uint8Array, binding: string, payload: string): Buffer =>
  Crypto.createHmac("sha256", key).update(binding).update("\n").update(payload).digest().subarray(0, MAC_BYTES)

export const encodeCursor = (key: Uint8Array, binding: string, position: CursorPosition): string => {
  const payload = Buffer.from(JSON.stringify([position.sort, position.id])).toString("base64url")
  return `${VERSION}.${payload}.${mac(key, binding, payload).toString("base64url")}`
}

/** The position a cursor carries, or undefined when it is malformed, forged, or issued for another query. */
export const decodeCursor = (key: Uint8Array, binding: string, cursor: string): CursorPosition | undefined => {
  if (cursor.length > MAX_CURSOR_LENGTH) return undefined
  const [version, payload, signature, ...rest] = cursor.split(".")
  if (version !== VERSION || payload === undefined || signature === undefined || rest.length > 0) return undefined
  const given = Buffer.from(signature, "base64url")
  if (given.length !== MAC_BYTES || !Crypto.timingSafeEqual(given, mac(key, binding, payload))) return undefined
  try {
    const value: unknown = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") {
      return { sort: value[0], id: value[1] }
    }
  } catch {
    // a valid MAC over an unparsable payload cannot come from us; treat it like any bad cursor
  }
  return undefined
}
