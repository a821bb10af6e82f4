/**
 * A gateway with a decision builder, the query layer and `ledger rebuild` on the same services: calls made through it
 * become decisions that tests read back as REST and MCP serve them.
 *
 *   const stack = yield* recordingStack()
 *   const decision = yield* stack.decision(ledgerId)   // waits until it is built
 */
import { Context, Effect, Layer, Schedule, type Scope } from "effect"
import { BuilderLive } from "../../layers/Builder.ts"
import { Rebuilder } from "../../src/builder/Rebuild.ts"
import { Authenticator } from "../../src/auth/Authenticator.ts"
import type { Decision } from "../../src/domain/decision.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { LedgerQuery } from "../../src/query/LedgerQuery.ts"
import { LedgerQueryLive } from "../../src/query/ReadModel.ts"
import { type GatewayStack, gatewayStack, type GatewayStackOptions } from "./gateway-stack.ts"

export interface RecordingStack extends GatewayStack<LedgerQuery | Rebuilder> {
  /** the PAT's principal, for reads */
  readonly reader: Principal
  readonly query: LedgerQuery["Service"]
  /** `ledger rebuild` over the stack's database */
  readonly rebuilder: Rebuilder["Service"]
  /** The ledger id of the last call whose request contains `text` (streams read through SDK helpers hide the header). */
  ledgerIdOf(text: string): Effect.Effect<string>
  /** The decision with this id, waiting up to 10 s for the builder to build it (and for `until` to hold). */
  decision(ledgerId: string, until?: (decision: Decision) => boolean): Effect.Effect<Decision>
}

export const recordingStack = (
  options: Omit<GatewayStackOptions, "layer"> = {}
): Effect.Effect<RecordingStack, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const stack = yield* gatewayStack({ ...options, layer: Layer.mergeAll(BuilderLive, LedgerQueryLive, Rebuilder.layer) })
    const reader = yield* Context.get(stack.context, Authenticator).authenticate(stack.pat, "pat")
    const query = Context.get(stack.context, LedgerQuery)
    const decision = (ledgerId: string, until: (decision: Decision) => boolean = () => true) =>
      query.getDecision(reader, ledgerId).pipe(
        Effect.flatMap((found) => (until(found) ? Effect.succeed(found) : Effect.fail("not yet" as const))),
        Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 200 }),
        Effect.orDie
      )
    const ledgerIdOf = (text: string) =>
      stack.captureWhere((capture) => capture.request.includes(text)).pipe(Effect.map((capture) => capture.ledger_id))
    return { ...stack, reader, query, rebuilder: Context.get(stack.context, Rebuilder), decision, ledgerIdOf }
  })
