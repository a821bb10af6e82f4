/**
 * `ledger watch` (docs/clients.md, "The watcher"), on its own so that the watcher — a long-running process on a person's
 * machine — loads only what it needs: bin/ledger.js runs src/watchMain.ts for it, which is half the memory and a
 * second less to start than the whole command line (bench/notes/watcher.md, "The watcher's costs").
 */
import { Config, Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Os from "node:os"
import * as Path from "node:path"
import { CallerIdentifier, MAX_ID_LENGTH } from "../domain/identifiers.ts"
import { renderWatchSummary, Watcher } from "./Watcher.ts"
import { BadRequest, InvalidSetting } from "../domain/errors.ts"

export const watch = Command.make(
  "watch",
  {
    once: Flag.Boolean("once").pipe(Flag.withDescription("import what the transcripts hold now, then exit"), Flag.withDefault(false)),
    claude: Flag.String("claude").pipe(Flag.withDescription("Claude Code's transcripts (default ~/.claude/projects)"), Flag.optional),
    codex: Flag.String("codex").pipe(Flag.withDescription("Codex's sessions (default ~/.codex/sessions)"), Flag.optional),
    agentId: Flag.String("agent-id").pipe(Flag.withDescription("record the turns as this agent (default: claude-code, codex)"), Flag.optional),
    agentName: Flag.String("agent-name").pipe(Flag.withDescription("the agent's display name (default: Claude Code, Codex)"), Flag.optional),
    state: Flag.String("state").pipe(Flag.withDescription("where the read positions are kept (default ~/.ledger/watch-state.json)"), Flag.optional),
    json: Flag.Boolean("json").pipe(Flag.withDescription("print the run's figures as JSON"), Flag.withDefault(false))
  },
  Effect.fn(function*({ once, claude, codex, agentId, agentName, state, json }) {
    const gatewayUrl = yield* Config.String("LEDGER_GATEWAY_URL").pipe(Config.withDefault("http://127.0.0.1:4000"))
    const gatewayKey = yield* Config.Redacted("LEDGER_GATEWAY_KEY").pipe(
      Effect.mapError(() => new InvalidSetting({ message: "LEDGER_GATEWAY_KEY is not set: the Gateway Key the turns are recorded with (ldg_gw_…)" }))
    )
    for (const [flag, value] of [["--agent-id", agentId], ["--agent-name", agentName]] as const) {
      if (Option.isSome(value) && !Schema.is(CallerIdentifier)(value.value)) {
        return yield* new BadRequest({ message: `${flag}: 1 to ${MAX_ID_LENGTH} characters, none a control character`, param: flag })
      }
    }
    const home = Os.homedir()
    const watcher = yield* Watcher
    yield* watcher.run({
      gatewayUrl,
      gatewayKey,
      roots: [
        { client: "claude-code", dir: Path.resolve(Option.getOrElse(claude, () => Path.join(home, ".claude", "projects"))) },
        { client: "codex", dir: Path.resolve(Option.getOrElse(codex, () => Path.join(home, ".codex", "sessions"))) }
      ],
      statePath: Path.resolve(Option.getOrElse(state, () => Path.join(home, ".ledger", "watch-state.json"))),
      agentId,
      agentName,
      once,
      report: (summary) => Console.log(json ? JSON.stringify(summary) : renderWatchSummary(summary))
    })
  })
).pipe(
  Command.withDescription("record Claude Code's and Codex's turns from their local transcripts through the gateway (LEDGER_GATEWAY_URL, LEDGER_GATEWAY_KEY)"),
  Command.provide(Watcher.layer)
)

