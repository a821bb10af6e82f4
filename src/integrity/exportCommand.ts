/**
 * `ledger export` (docs/integrity.md): the decisions with their chain fields as JSON lines, to a file or stdout, for
 * auditors (Exporter.ts). Progress and the summary go to stderr, since stdout may be the export. It opens the store
 * itself (layers/Cli.ts).
 */
import { Console, Effect, FileSystem, Option, Runtime, Schema, Stdio } from "effect"
import { Command, Flag } from "effect/cli"
import { progressBar } from "../supervision/progress.ts"
import { Exporter } from "./Exporter.ts"

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?$/

/**
 * An ISO date (midnight UTC) or date-time (UTC unless it gives an offset). Stricter than `Date.parse`, which takes
 * "2025-02-30" for March 2nd and many forms that are not ISO.
 */
export const parseInstant = (text: string): Option.Option<Date> => {
  const match = ISO.exec(text.trim())
  if (match === null) return Option.none()
  const [, year, month, day, hour = "00", minute = "00", second = "00", fraction = "", zone = "Z"] = match
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)))
  const calendar = date.getUTCFullYear() === Number(year) && date.getUTCMonth() === Number(month) - 1 && date.getUTCDate() === Number(day)
  if (!calendar || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return Option.none()
  const millis = fraction.padEnd(3, "0").slice(0, 3)
  return Option.some(new Date(`${year}-${month}-${day}T${hour}:${minute}:${second}.${millis}${zone}`))
}

/**
 * The export failed, and said why on stderr: the runtime would report it on stdout, which may be the export itself.
 * The exit code stays non-zero.
 */
export class ExportFailed extends Schema.TaggedError<ExportFailed>()("ExportFailed", {
  message: Schema.String,
  cause: Schema.Defect()
}) {
  override readonly [Runtime.errorReported] = false
}

const instant = (name: string, description: string) =>
  Flag.String(name).pipe(
    Flag.filterMap(
      parseInstant,
      () => "an ISO date (2025-11-03) or date-time (2025-11-03T09:00:00Z; UTC unless an offset is given)"
    ),
    Flag.withDescription(description),
    Flag.optional
  )

export const exportDecisions = Command.make(
  "export",
  {
    since: instant("since", "only decisions created at or after this ISO date or date-time (UTC unless an offset is given)"),
    until: instant("until", "only decisions created before this ISO date or date-time (exclusive)"),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("only this workspace (NAME, TENANT/NAME or id)"), Flag.optional),
    format: Flag.Literals("format", ["jsonl"]).pipe(Flag.withDescription("jsonl: one JSON object a line, a decision each")),
    out: Flag.String("out").pipe(Flag.withDescription("write the export to this file (default: stdout)"), Flag.optional)
  },
  Effect.fn(function*({ since, until, workspace, out }) {
    const exporter = yield* Exporter
    const sink = Option.isSome(out) ? (yield* FileSystem.FileSystem).sink(out.value) : (yield* Stdio.Stdio).stdout()
    const bar = progressBar("export")
    const result = yield* exporter.run({
      out: sink,
      workspace: Option.getOrUndefined(workspace),
      since: Option.getOrUndefined(since),
      until: Option.getOrUndefined(until),
      onProgress: bar.update
    }).pipe(Effect.ensuring(bar.finish))
    yield* Console.error(`exported ${result.decisions} decisions from ${result.workspaces} workspace(s)`)
  }, Effect.catch((error) => {
    // a platform or database failure names its operation; what went wrong underneath (EPIPE, ECONNREFUSED) is its cause
    const cause = "cause" in error && error.cause instanceof Error ? ` (${error.cause.message})` : ""
    const message = `${error.message}${cause}`
    return Console.error(`ledger export: ${message}`).pipe(Effect.andThen(Effect.fail(new ExportFailed({ message, cause: error }))))
  }))
).pipe(Command.withDescription("write the decisions with their chain fields as JSON lines, for auditors (progress on stderr)"))
