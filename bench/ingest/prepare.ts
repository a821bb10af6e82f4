/**
 * What the builder does to a capture before its batch's transaction, in process and without a database: decode the
 * stream payload, derive the decision, prepare its row (chain draft, JSON texts) — `DecisionBuilder.prepare` less
 * the Effect plumbing around it. Deterministic enough to compare changes a few percent apart, which the pipeline
 * benchmark (run.ts) cannot resolve on a noisy machine. Each pass holds what it prepared, with the payloads, until
 * the pass ends, as the builder holds a batch until it commits: collecting what a batch holds is part of the cost.
 *
 *   npx node bench/ingest/prepare.ts [--captures realistic|short|conversation] [--rounds 24] [ROOT ...]
 *
 * Each ROOT is a checkout (default: this one), e.g. a worktree of the commit before a change
 * (`git worktree add /tmp/base HEAD~1 && ln -s "$PWD/node_modules" /tmp/base/node_modules`). The captures come from
 * the first root's captures.ts; each round prepares all of them with every root in turn (interleaved), and the
 * result is the median and the best round's CPU time a capture. It also checks that every root prepares the same
 * JSON texts for every capture. Roots in one run share a heap, and one root's held garbage is collected in the next
 * one's pass: to compare changes to what a batch holds, run one root at a time, alternating, with `--trace-gc-nvp`
 * for the collections' pauses and promoted bytes.
 */
import { Effect } from "effect"
import * as Path from "node:path"
import { parseArgs } from "node:util"

const { values, positionals } = parseArgs({
  options: { captures: { type: "string", default: "realistic" }, rounds: { type: "string", default: "24" } },
  allowPositionals: true
})
/** a batch's worth; long conversations (~110 KB each) a tenth of it, so that a pass stays a few seconds */
const CAPTURES = values.captures === "conversation" ? 400 : 4_000
const WARMUP_ROUNDS = 3
const ROUNDS = Number(values.rounds)

const roots = positionals.length > 0 ? positionals.map((root) => Path.resolve(root)) : [Path.resolve(import.meta.dirname, "../..")]
const checkouts = await Promise.all(roots.map(async (root) => ({
  root,
  reconstruct: await import(`${root}/src/builder/reconstruct.ts`),
  // checkouts before the split of store.ts prepare rows there
  prepared: await import(`${root}/src/builder/prepared.ts`).catch(() => import(`${root}/src/builder/store.ts`)),
  policies: await import(`${root}/src/builder/ContentPolicies.ts`),
  captures: await import(`${root}/bench/ingest/captures.ts`)
})))
type Checkout = (typeof checkouts)[number]

const identity = {
  tenant_id: "0194a000-0000-7000-8000-000000000001",
  workspace_id: "0194a000-0000-7000-8000-000000000002",
  user_id: "0194a000-0000-7000-8000-000000000003",
  key_id: "0194a000-0000-7000-8000-000000000004"
}
const startedAt = Date.now() - 1_500
const payloads = Array.from({ length: CAPTURES }, (_, i) =>
  JSON.stringify(checkouts[0]!.captures.realisticCapture(identity, { agent_id: `agent-${i % 50}`, started_at: startedAt, variant: i }, values.captures))
)

const prepare = (checkout: Checkout, payload: string) => {
  const capture = Effect.runSync(checkout.reconstruct.decodeEntry(payload))
  const reconstruction = Effect.runSync(checkout.reconstruct.reconstruct(checkout.policies.beforeDerivation(capture, "full")))
  return checkout.prepared.storable(checkout.policies.afterDerivation(reconstruction, "full"))
}

/** The payloads as they come off the wire: each pass decodes them anew, as the builder's Redis client does. */
const wirePayloads = payloads.map((payload) => Buffer.from(payload))

/** CPU µs a capture over one pass of all of them. */
const pass = (checkout: Checkout) => {
  const start = process.cpuUsage()
  // the builder holds a batch, its stream payloads included, until the batch commits: that garbage is part of the cost
  const held: Array<unknown> = []
  for (const wire of wirePayloads) {
    const payload = wire.toString()
    held.push({ payload, decision: prepare(checkout, payload) })
  }
  const used = process.cpuUsage(start)
  return (used.user + used.system) / CAPTURES
}

for (const checkout of checkouts) for (let round = 0; round < WARMUP_ROUNDS; round++) pass(checkout)
const rounds = checkouts.map(() => [] as Array<number>)
for (let round = 0; round < ROUNDS; round++) checkouts.forEach((checkout, i) => rounds[i]!.push(pass(checkout)))

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const texts = checkouts.map((checkout) =>
  payloads.map((payload) => {
    const { prepared } = prepare(checkout, payload)
    return `${prepared.derivation}\n${prepared.subjects}`
  })
)
console.log(JSON.stringify({
  captures: values.captures,
  per_capture_us: checkouts.map((checkout, i) => ({
    root: checkout.root,
    median: Number(median(rounds[i]!).toFixed(2)),
    best: Number(Math.min(...rounds[i]!).toFixed(2))
  })),
  same_rows: texts.every((rows) => rows.every((row, i) => row === texts[0]![i]))
}, null, 2))
