/**
 * The integrity commands (docs/integrity.md): `ledger checkpoint` and `ledger verify`.
 * Each opens the store itself (layers/Cli.ts).
 */
import { Console, Effect, FileSystem, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { progressBar } from "../supervision/progress.ts"
import { makeCheckpoint, parseCheckpoint } from "./checkpoint.ts"
import { renderVerification } from "./report.ts"
import { Verifier } from "./Verifier.ts"

const json = Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))

export const checkpoint = Command.make(
  "checkpoint",
  {
    out: Flag.String("out").pipe(Flag.withDescription("write the checkpoint to this file (default: print it)"), Flag.optional),
    json
  },
  Effect.fn(function*({ out, json }) {
    const document = yield* makeCheckpoint()
    const text = JSON.stringify(document, null, 2) + "\n"
    if (Option.isNone(out)) return yield* Console.log(json ? JSON.stringify(document) : text.trimEnd())
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(out.value, text)
    const summary = { out: out.value, created_at: document.created_at, key_id: document.key_id, public_key: document.public_key, workspaces: document.workspaces }
    yield* Console.log(json ? JSON.stringify(summary) : [
      `checkpoint written to ${out.value} (signed with key ${document.key_id}, public key ${document.public_key})`,
      ...document.workspaces.map((w) => `  ${w.tenant}/${w.workspace}  seq ${w.seq}  ${w.hash}`)
    ].join("\n"))
  })
).pipe(Command.withDescription("write the signed head of each workspace's decision chain (keep it outside the database)"))

export const verify = Command.make(
  "verify",
  {
    checkpoint: Flag.String("checkpoint").pipe(Flag.withDescription("a checkpoint file: the chains must still reach its heads"), Flag.optional),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("only this workspace (NAME, TENANT/NAME or id)"), Flag.optional),
    json
  },
  Effect.fn(function*({ checkpoint, workspace, json }) {
    const fs = yield* FileSystem.FileSystem
    const document = Option.isNone(checkpoint) ? undefined : yield* parseCheckpoint(yield* fs.readFileString(checkpoint.value))
    const verifier = yield* Verifier
    const bar = progressBar("verify")
    const result = yield* verifier.run({ workspace: Option.getOrUndefined(workspace), checkpoint: document, onProgress: bar.update }).pipe(
      Effect.ensuring(bar.finish)
    )
    yield* Console.log(json ? JSON.stringify(result) : renderVerification(result))
    // exit 0 only when every chain is intact and complete
    if (!result.ok) process.exitCode = 1
  })
).pipe(Command.withDescription("walk the decision chains: altered decisions by ledger_id, and gaps or a cut tail, reported apart"))
