/**
 * The integrity commands (README, "Integrity"): `ledger checkpoint`, `ledger verify` and `ledger admin content-policy`.
 * Each opens the store itself (layers/Cli.ts).
 */
import { Console, Effect, FileSystem, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { ContentPolicies } from "../builder/ContentPolicies.ts"
import { progressBar } from "../builder/RebuildProgress.ts"
import { CONTENT_POLICIES } from "../domain/contentPolicy.ts"
import { listWorkspaces } from "./workspaces.ts"
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

export const contentPolicy = Command.make(
  "content-policy",
  {
    workspace: Flag.String("workspace").pipe(Flag.withDescription("the workspace (NAME, TENANT/NAME or id)")),
    set: Flag.Literals("set", CONTENT_POLICIES).pipe(
      Flag.withDescription("keep the full exchange, a redacted one, or metadata only (applies to calls built from now on)"),
      Flag.optional
    ),
    json
  },
  Effect.fn(function*({ workspace, set, json }) {
    const policies = yield* ContentPolicies
    const results = []
    for (const scope of yield* listWorkspaces(workspace)) {
      if (Option.isSome(set)) yield* policies.set(scope, set.value)
      results.push({ tenant: scope.tenant, workspace: scope.workspace, workspace_id: scope.workspace_id, content_policy: yield* policies.get(scope) })
    }
    yield* Console.log(json ? JSON.stringify(results) : results.map((r) => `${r.tenant}/${r.workspace}  ${r.content_policy}`).join("\n"))
  })
).pipe(Command.withDescription("show or set what a workspace keeps of each call: full, redacted or metadata"))
