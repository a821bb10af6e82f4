/**
 * The ledger both read surfaces' tests probe (REST and MCP must answer alike): tenant acme with ann (member, three
 * agents × two sessions) and rex (restricted, two sessions of "coder"), and tenant globex with bob, whose agent
 * reuses acme's agent id "planner". Six decisions per session, a few minutes apart.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { decodeEntry, reconstruct } from "../../src/builder/reconstruct.ts"
import { storable } from "../../src/builder/prepared.ts"
import { byWorkspace, storeBatch } from "../../src/builder/writes.ts"
import type { Capture } from "../../src/domain/capture.ts"
import type { Principal } from "../../src/domain/principal.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import type { ApiStackInfo } from "./api-stack.ts"
import { insertDecisions, makeCapture, type SeedDecision, seedDecision, type SeedScope, TEMPLATES } from "./seed.ts"

export const MINUTE = 60_000

export interface Member {
  readonly principal: Principal
  readonly scope: SeedScope
  readonly pat: string
}

export interface FixtureSession {
  readonly id: string
  readonly agent: string
  readonly owner: Member
}

export interface TwoTenantLedger {
  readonly ann: Member
  readonly rex: Member
  readonly bob: Member
  readonly sessions: ReadonlyArray<FixtureSession>
  readonly rows: Array<SeedDecision>
}

/** Runs an effect against the stack's services; failures are defects (fixtures must not fail). */
export const withStack = (stack: ApiStackInfo) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.orDie(Effect.provide(effect, stack.context)) as Effect.Effect<A>

/** Bootstraps a member of workspace "ops" in the tenant, with a PAT. */
export const memberOf = (stack: ApiStackInfo, tenant: string, email: string, role: "member" | "restricted") =>
  withStack(stack)(Effect.gen(function*() {
    const boot = yield* Credentials.use((credentials) => credentials.bootstrap({ tenant, workspace: "ops", email, role }))
    const principal: Principal = { ...boot, role, kind: "pat", token_id: Crypto.randomUUID() }
    return { principal, scope: { ...boot, key_id: Crypto.randomUUID() }, pat: boot.pat } satisfies Member
  }))

/**
 * Stores calls as the decision builder does — decoded, derived, placed in sessions and chained in their workspace —
 * as one batch, a transaction a workspace (seeded rows are inserted as they are, unchained). Yields the ids inserted.
 */
export const buildDecisions = (stack: ApiStackInfo, captures: ReadonlyArray<Capture>) =>
  withStack(stack)(Effect.gen(function*() {
    const batch = yield* Effect.forEach(captures, (capture) => Effect.flatMap(decodeEntry(JSON.stringify(capture)), reconstruct))
    const inserted = new Set<string>()
    for (const { scope, items } of byWorkspace(batch.map(storable), (decision) => decision.reconstruction.capture)) {
      const stored = yield* storeBatch(scope, items, { gapMs: stack.settings.sessionGapMinutes * MINUTE, consumer: "test-builder" })
      for (const id of stored.inserted) inserted.add(id)
    }
    return { inserted: inserted as ReadonlySet<string> }
  }))

export const seedTwoTenantLedger = (stack: ApiStackInfo) =>
  Effect.gen(function*() {
    const ann: Member = { principal: stack.principal, scope: { ...stack.principal, key_id: Crypto.randomUUID() }, pat: stack.pat }
    const rex = yield* memberOf(stack, "acme", "rex@acme.test", "restricted")
    const bob = yield* memberOf(stack, "globex", "bob@globex.test", "member")
    const now = Date.now()
    const rows: Array<SeedDecision> = []
    const sessions: Array<FixtureSession> = [
      ...["planner", "coder", "reviewer"].flatMap((agent, a) =>
        [0, 1].map((s) => ({ id: Crypto.randomUUID(), agent, owner: ann, start: now - (a * 2 + s + 1) * 90 * MINUTE }))
      ),
      { id: Crypto.randomUUID(), agent: "coder", owner: rex, start: now - 30 * MINUTE },
      { id: Crypto.randomUUID(), agent: "coder", owner: rex, start: now - 20 * MINUTE },
      { id: Crypto.randomUUID(), agent: "planner", owner: bob, start: now - 40 * MINUTE }
    ].map(({ start, ...session }, index) => {
      for (let i = 0; i < 6; i++) {
        rows.push(seedDecision(
          makeCapture({
            scope: session.owner.scope,
            agent_id: session.agent,
            agent_name: `${session.agent} agent`,
            at: start + i * 20_000,
            template: TEMPLATES[(index + i) % TEMPLATES.length],
            ask: `step ${i} of task ${index}`,
            latency_ms: 800 + 37 * i
          }),
          session.id
        ))
      }
      return session
    })
    yield* withStack(stack)(insertDecisions(rows))
    return { ann, rex, bob, sessions, rows } satisfies TwoTenantLedger
  })
