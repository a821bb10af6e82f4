/**
 * What one detector pass costs as a session grows: one agent's session (one execution) grows to each size in turn;
 * at each size, `--fresh` new decisions arrive in that session and the detector pass over them is timed (median of
 * `--repeats`). The session rules (loops, low-quality streaks) should cost the same at every size. Sessions of three
 * shapes, each in a tenant of its own:
 *
 *   mixed   every third answer truncated (short low-quality streaks, as a real session has)
 *   streak  every answer truncated: the whole session is one low-quality streak
 *   loop    the same tool call over and over: the whole session is one loop
 *
 *   npx node bench/analytics/detector-pass.ts [--sizes 10,1000,10000] [--shapes mixed,streak,loop] [--fresh 20] [--repeats 5]
 *
 * Calls go through the gateway and builder of the workload pipeline (a fresh local PostgreSQL database, removed after).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Context, Effect } from "effect"
import { parseArgs } from "node:util"
import { Detectors } from "../../src/analytics/Detectors.ts"
import { Materializer } from "../../src/analytics/Materializer.ts"
import { workloadPipeline } from "../workload/pipeline.ts"
import { planWorkload, type Workload, WORKLOAD_START, type WorkloadCall } from "../workload/scenario.ts"

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10,1000,10000" },
    shapes: { type: "string", default: "mixed,streak,loop" },
    fresh: { type: "string", default: "20" },
    repeats: { type: "string", default: "5" }
  }
})
const SIZES = values.sizes.split(",").map(Number)
const FRESH = Number(values.fresh)
const REPEATS = Number(values.repeats)
const SHAPES = values.shapes.split(",") as Array<Shape>

type Shape = "mixed" | "streak" | "loop"

/** Letters for a number: call signatures ignore digits, and the calls should not all be one repeated call. */
const letters = (n: number): string => (n < 26 ? "" : letters(Math.floor(n / 26) - 1)) + String.fromCharCode(97 + (n % 26))

const program = Effect.gen(function*() {
  const pipeline = yield* workloadPipeline()
  const detectors = Context.get(pipeline.stack.context, Detectors)
  const materializer = Context.get(pipeline.stack.context, Materializer)
  const template = planWorkload("planted").calls.find((c) => c.pattern === "low-quality")!
  const rows: Array<string> = []
  for (const shape of SHAPES) {
    let made = 0
    const askOf = (i: number) =>
      shape === "loop"
        ? "[[tool]] Check whether the nightly ledger export job has finished."
        : `Summarize the churn interview of customer ${letters(i)}.${shape === "streak" || i % 3 === 0 ? " [[truncate]]" : ""}`
    const calls = (count: number): Array<WorkloadCall> =>
      Array.from({ length: count }, () => {
        const i = made++
        return { ...template, key: `session/${i}`, execution_id: "long-run", at: WORKLOAD_START + i * 20_000, messages: [{ role: "user", content: askOf(i) }] }
      })
    const workload = (batch: Array<WorkloadCall>): Workload => ({ variant: "planted", start: WORKLOAD_START, end: WORKLOAD_START + made * 20_000, calls: batch })

    let tenant: string | undefined
    for (const size of SIZES) {
      const grown = yield* pipeline.run(workload(calls(Math.max(0, size - made))), `detector-pass-${shape}`, tenant === undefined ? {} : { into: tenant })
      tenant = grown.tenant
      const times: Array<number> = []
      for (let r = 0; r < REPEATS; r++) {
        yield* pipeline.run(workload(calls(FRESH)), `detector-pass-${shape}`, { into: tenant, analyse: false })
        yield* materializer.catchUp
        const started = performance.now()
        const looked = yield* detectors.catchUp
        times.push(performance.now() - started)
        if (looked !== FRESH) return yield* Effect.die(new Error(`the pass looked at ${looked} decisions, not ${FRESH}`))
      }
      times.sort((a, b) => a - b)
      const median = times[Math.floor(times.length / 2)]!
      rows.push(`| ${shape} | ${made} | ${FRESH} | ${median.toFixed(1)} (${times.map((t) => t.toFixed(1)).join(", ")}) | ${(median / FRESH).toFixed(2)} |`)
      yield* Effect.logInfo(rows.at(-1))
    }
  }
  console.log([
    "",
    "| session | decisions after the pass | new decisions in the pass | detector pass ms, median (all) | ms per new decision |",
    "|---|---|---|---|---|",
    ...rows
  ].join("\n"))
})

NodeRuntime.runMain(Effect.scoped(program))
