/**
 * Reads of an API process that started on a small ledger which then grew: are its plans those of the grown tables?
 * Postgres plans a prepared statement's first five runs for their parameters, then may keep a generic plan — one
 * made while the tables were small would stay.
 *
 *   npx node bench/reads/grow.ts [--decisions 1000000] [--database ledger_bench_reads_grow] [--connections 8] [--seconds 10]
 *
 * Recreates the database, seeds `--small` decisions (default 2,000), starts `ledger serve --roles api` on it and drives
 * every endpoint for 2 s (each statement runs far more than five times on every pooled connection), then seeds on to
 * `--decisions` while one connection keeps using every endpoint (a live API; its pool keeps its connections and their
 * statements), analyses the database as autovacuum would, and measures every endpoint on that process and on a
 * process started on the grown ledger, one after the other per endpoint (same ids and pages). Results also in
 * bench/reads/grow.json.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Fiber, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import type { Authenticator } from "../../src/auth/Authenticator.ts"
import type { Credentials } from "../../src/auth/Credentials.ts"
import type { TenantSql } from "../../src/store/TenantSql.ts"
import { apiProcess } from "./apiProcess.ts"
import { measure, type Measured, memberToken, sampleScenarios } from "./scenarios.ts"
import { analyseDatabase, benchDatabase, benchStore, seedReadsLedger } from "./seed.ts"

const { values } = parseArgs({
  options: {
    decisions: { type: "string", default: "1000000" },
    small: { type: "string", default: "2000" },
    database: { type: "string", default: "ledger_bench_reads_grow" },
    connections: { type: "string", default: "8" },
    seconds: { type: "string", default: "10" }
  }
})

const program = Effect.gen(function*() {
  const target = Number(values.decisions)
  const connections = Number(values.connections)
  const seconds = Number(values.seconds)
  const logLevel = process.env.LEDGER_LOG_LEVEL ?? "info"
  const databaseUrl = yield* benchDatabase(values.database!, true)
  const rows = yield* Effect.gen(function*() {
    const context = yield* Effect.context<Credentials | TenantSql | Authenticator | Scope.Scope>()
    let grown: { readonly baseUrl: string; readonly pat: string; readonly keepBusy: Fiber.Fiber<never> } | undefined
    const started = performance.now()
    yield* seedReadsLedger({
      decisions: target,
      pauseAt: {
        decisions: Number(values.small),
        run: () =>
          Effect.gen(function*() {
            const member = yield* memberToken("bench/reads grow")
            const api = yield* apiProcess(databaseUrl, { name: "reads-grown", logLevel })
            const small = yield* sampleScenarios(member.principal, api.baseUrl, member.pat)
            for (const scenario of small) yield* measure(api.baseUrl, member.pat, scenario, connections, 2)
            console.log(`API started on ${values.small} decisions and used; seeding on to ${target}`)
            const keepBusy = yield* Effect.forkScoped(Effect.forever(Effect.forEach(small, (scenario) => measure(api.baseUrl, member.pat, scenario, 1, 1))))
            grown = { baseUrl: api.baseUrl, pat: member.pat, keepBusy }
          }).pipe(Effect.provide(context), Effect.orDie)
      },
      onProgress: (done, total) => {
        if (done % 100_000 < 5_000 || done === total) process.stderr.write(`\rseeded ${done.toLocaleString()} / ${total.toLocaleString()}`)
      }
    })
    process.stderr.write("\n")
    if (grown === undefined) return yield* Effect.die(new Error(`--small ${values.small} must be below --decisions ${target}`))
    yield* Fiber.interrupt(grown.keepBusy)
    console.log(`seeded in ${Math.round((performance.now() - started) / 1000)} s; analysing`)
    yield* analyseDatabase(databaseUrl)

    const member = yield* memberToken("bench/reads fresh")
    const fresh = yield* apiProcess(databaseUrl, { name: "reads-fresh", logLevel })
    const scenarios = yield* sampleScenarios(member.principal, fresh.baseUrl, member.pat)
    const results: Array<{ readonly grown: Measured; readonly fresh: Measured }> = []
    for (const scenario of scenarios) {
      yield* measure(grown.baseUrl, grown.pat, scenario, connections, 2)
      yield* measure(fresh.baseUrl, member.pat, scenario, connections, 2)
      const onGrown = yield* measure(grown.baseUrl, grown.pat, scenario, connections, seconds)
      const onFresh = yield* measure(fresh.baseUrl, member.pat, scenario, connections, seconds)
      console.log(JSON.stringify({ grown: onGrown, fresh: onFresh }))
      results.push({ grown: onGrown, fresh: onFresh })
    }
    return results
  }).pipe(Effect.scoped, Effect.provide(benchStore(databaseUrl)))

  const table = [
    `| endpoint | started small, grown: req/s · p50 / p95 / p99 ms | started on the grown ledger: req/s · p50 / p95 / p99 ms | target p95 |`,
    `|---|---|---|---|`,
    ...rows.map(({ fresh, grown }) =>
      `| ${grown.endpoint} | ${grown.rps} · ${grown.p50} / **${grown.p95}** / ${grown.p99}${grown.pass ? "" : " ✗"} | ${fresh.rps} · ${fresh.p50} / **${fresh.p95}** / ${fresh.p99}${fresh.pass ? "" : " ✗"} | ≤ ${grown.target_p95} |`
    )
  ].join("\n")
  console.log(`\n${values.small} → ${target} decisions; ${connections} connections, ${seconds} s per endpoint, ${Os.cpus().length} CPUs, load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}\n${table}`)
  Fs.writeFileSync(
    Path.join(import.meta.dirname, "grow.json"),
    JSON.stringify({ at: new Date().toISOString(), small: Number(values.small), decisions: target, connections, seconds, loadavg: Os.loadavg(), rows }, null, 2) + "\n"
  )
})

NodeRuntime.runMain(program)
