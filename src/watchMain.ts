/**
 * `ledger watch` alone (see src/watcher/command.ts): the same command as in `ledger`, without the rest of the
 * command line's modules.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { Command } from "effect/cli"
import { watch } from "./watcher/command.ts"

Command.make("ledger").pipe(
  Command.withSubcommands([watch]),
  Command.run({ version: "0.1.0" }),
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain
)
