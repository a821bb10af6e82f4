/**
 * `ledger erase` (docs/integrity.md): a deletion request — the decisions of an agent, of a user or created before a
 * date keep their place in the chain and lose their content, under a signed audit event per workspace (Eraser.ts).
 * It opens the store itself (layers/Cli.ts).
 */
import { Console, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { Eraser, type ErasureCriteria, ErasureCriteriaInvalid } from "./Eraser.ts"
import { parseInstant } from "./exportCommand.ts"

/** The criteria `erase`'s flags name: exactly one of them. */
export const erasureCriteria = Effect.fnUntraced(function*(flags: {
  readonly agent?: string | undefined
  readonly user?: string | undefined
  readonly before?: string | undefined
}): Effect.fn.Return<ErasureCriteria, ErasureCriteriaInvalid> {
  const given = (["agent", "user", "before"] as const).filter((flag) => flags[flag] !== undefined)
  if (given.length !== 1) {
    return yield* new ErasureCriteriaInvalid({
      message: given.length === 0
        ? "say what to erase: --agent ID, --user EMAIL or --before DATE"
        : `give one of --agent, --user and --before, not ${given.map((flag) => `--${flag}`).join(" and ")}`
    })
  }
  if (flags.agent !== undefined) {
    if (flags.agent.trim() === "") return yield* new ErasureCriteriaInvalid({ message: "--agent: an agent id is required" })
    return { kind: "agent", agent_id: flags.agent }
  }
  if (flags.user !== undefined) {
    if (flags.user.trim() === "") return yield* new ErasureCriteriaInvalid({ message: "--user: an email is required" })
    return { kind: "user", email: flags.user.trim() }
  }
  const before = parseInstant(flags.before!)
  if (Option.isNone(before)) {
    return yield* new ErasureCriteriaInvalid({
      message: `--before: "${flags.before}" is not an ISO date (2025-11-03) or date-time (2025-11-03T09:00:00Z; UTC unless an offset is given)`
    })
  }
  return { kind: "before", before: before.value }
})

export const erase = Command.make(
  "erase",
  {
    agent: Flag.String("agent").pipe(Flag.withDescription("erase the decisions of this agent id"), Flag.optional),
    user: Flag.String("user").pipe(Flag.withDescription("erase the decisions made with this user's keys (by email, in every tenant)"), Flag.optional),
    before: Flag.String("before").pipe(
      Flag.withDescription("erase the decisions created before this ISO date or date-time (UTC unless an offset is given)"),
      Flag.optional
    ),
    workspace: Flag.String("workspace").pipe(Flag.withDescription("only this workspace (NAME, TENANT/NAME or id); all by default"), Flag.optional),
    json: Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))
  },
  Effect.fn(function*({ agent, user, before, workspace, json }) {
    const criteria = yield* erasureCriteria({
      agent: Option.getOrUndefined(agent),
      user: Option.getOrUndefined(user),
      before: Option.getOrUndefined(before)
    })
    const result = yield* (yield* Eraser).erase({ criteria, workspace: Option.getOrUndefined(workspace) })
    const workspaces = result.workspaces.map(({ tenant, workspace, decisions, event_id }) => ({ tenant, workspace, decisions, event_id }))
    const events = workspaces.length === 0 ? "none" : workspaces.map((w) => w.event_id).join(", ")
    yield* Console.log(json
      ? JSON.stringify({ erased: result.erased, workspaces })
      : `erased ${result.erased} decisions in ${workspaces.length} workspace(s) (audit events: ${events})`)
  })
).pipe(Command.withDescription("erase the content of an agent's, a user's or older decisions; the chain still verifies (signed audit event)"))
