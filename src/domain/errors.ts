/**
 * Domain errors shared by the surfaces. Each surface maps them to its own wire shape
 * (REST `{"error":{"code","message"}}`, MCP `isError` results, gateway chat-completions errors).
 */
import { Schema } from "effect"

/** The database cannot be reached or failed; surfaces answer 503. */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** Unknown — or not visible to the caller, which must look the same. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  message: Schema.String
}) {}

/** A parameter the caller sent is invalid. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", {
  message: Schema.String,
  param: Schema.optional(Schema.String)
}) {}

/** A setting (an environment variable, a key file) the service cannot run with; the message names it. */
export class InvalidSetting extends Schema.TaggedError<InvalidSetting>()("InvalidSetting", {
  message: Schema.String
}) {}

/** A role thread (the builder's, a gateway worker) that exited; its supervisor starts it again. */
export class ThreadExited extends Schema.TaggedError<ThreadExited>()("ThreadExited", {
  message: Schema.String
}) {}

/** Too many refused credentials from the caller's address: refused before any lookup, for `retryAfter` seconds. */
export class TooManyAttempts extends Schema.TaggedError<TooManyAttempts>()("TooManyAttempts", {
  message: Schema.String,
  retryAfter: Schema.Number
}) {}

/** Missing, unknown, revoked, expired or wrong-kind credential. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String
}) {}
