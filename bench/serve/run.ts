/**
 * The default process under a steady load: the gateway's p99 next to the provider's own, at a fixed rate (500 calls/s)
 * through `ledger serve` with every role — external PostgreSQL and Redis, builders and analytics at work on what the
 * gateway captures.
 *
 *   npx node bench/serve/run.ts [--rate 500] [--rounds 5] [--duration 10] [--warmup 10] [--connections 32]
 *                               [--layouts thread,processes,shared]
 *
 * Layouts, one running at a time (two cores):
 *   thread     `ledger serve` as shipped: builders and analytics in a worker thread of their own
 *   processes  `ledger serve --roles gateway,api` and `ledger serve --roles builder`: the same split, across processes
 *   shared     every role on one event loop (shared-loop.ts): the layout before builders had a thread of their own
 * Each layout gets a fresh database and stream. After a warm-up, each round takes `duration` seconds at `rate` calls/s
 * against the fake provider directly and as long through the gateway (non-streamed chat completions; the order
 * alternating from round to round), the calls started evenly by the clock (pacer.ts) over at most `connections`
 * keep-alive connections. A round's
 * figure is the gateway's p99 minus the provider's own p99 in that round; the layouts are judged on the median round
 * (target: within 2 ms). Each round also gives the decisions built per second (from the database: the builders keep
 * up) and the event-loop delay p99 of each thread from `/metrics`.
 */
import * as Os from "node:os"
import { createClient, type RedisClientType } from "redis"
import { option, type Sample, startChild, stopChildren, summarise } from "../gateway/harness.ts"
import { deploy, LAYOUTS, metricOf, progress, REDIS_URL } from "./deployment.ts"
import { paced } from "./pacer.ts"

const RATE = Number(option("rate", "500"))
const ROUNDS = Math.max(1, Number(option("rounds", "5")))
const DURATION_S = Number(option("duration", "10"))
const WARMUP_S = Number(option("warmup", "10"))
const CONNECTIONS = Number(option("connections", "32"))
const CHOSEN = option("layouts", "thread,processes,shared").split(",").map((layout) => layout.trim())

interface Round {
  readonly layout: string
  readonly round: number
  readonly direct: ReturnType<typeof summarise>
  readonly gateway: ReturnType<typeof summarise>
  readonly decisionsPerSecond: number
  readonly lagMain: number
  readonly lagBuilder: number
}

const main = async () => {
  const redis = (await createClient({ url: REDIS_URL }).connect()) as RedisClientType
  const fake = await startChild(["bench/gateway/fake-provider.ts"], process.env)
  const fakeUrl = JSON.parse(fake.line).url as string
  const ask = "Summarise the incident report for the payments outage in two sentences."
  const direct = {
    url: `${fakeUrl}/v1/chat/completions`,
    headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: ask }] })
  }
  const rounds: Array<Round> = []
  const notes: Array<string> = []
  try {
    for (const layout of CHOSEN) {
      const commands = LAYOUTS[layout]
      if (commands === undefined) throw new Error(`--layouts: unknown ${layout}; known: ${Object.keys(LAYOUTS).join(", ")}`)
      progress(`${layout}: starting`)
      const deployment = await deploy({ name: `serve_${layout}`, layout: commands, fakeUrl, redis })
      try {
        const gateway = {
          url: `${deployment.gatewayUrl}/v1/chat/completions?agent_id=bench-agent&execution_id=bench`,
          headers: { "content-type": "application/json", authorization: `Bearer ${deployment.gatewayKey}`, "x-service-provider-api-key": "sk-bench" },
          body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: ask }] })
        }
        const run = (target: typeof direct, seconds: number): Promise<Sample> =>
          paced(target.url, target.headers, target.body, { rate: RATE, seconds, connections: CONNECTIONS })
        progress(`${layout}: warm-up`)
        await run(direct, WARMUP_S)
        await run(gateway, WARMUP_S)
        for (let round = 0; round < ROUNDS; round++) {
          progress(`${layout}: round ${round + 1} of ${ROUNDS}`)
          const before = await deployment.decisions()
          const started = Date.now()
          const order = round % 2 === 0 ? [direct, gateway] : [gateway, direct]
          const taken = new Map<typeof direct, Sample>()
          for (const target of order) taken.set(target, await run(target, DURATION_S))
          const decisionsPerSecond = ((await deployment.decisions()) - before) / ((Date.now() - started) / 1000)
          const metrics = await deployment.metrics()
          rounds.push({
            layout,
            round: round + 1,
            direct: summarise([taken.get(direct)!]),
            gateway: summarise([taken.get(gateway)!]),
            decisionsPerSecond,
            lagMain: metricOf(metrics, 'nodejs_eventloop_lag_p99_seconds\\{thread="main"\\}') * 1000,
            lagBuilder: metricOf(metrics, 'nodejs_eventloop_lag_p99_seconds\\{thread="builder"\\}') * 1000
          })
        }
        const groups = await redis.xInfoGroups(deployment.streamKey).catch(() => [])
        const group = groups[0]
        notes.push(`${layout}: after the rounds the builders' group had ${group?.lag ?? "?"} captures unread and ${group?.pending ?? "?"} pending`)
        const logged = deployment.logged()
        if (logged.length > 0) notes.push(`${layout} log (${logged.length} lines, last 3):`, ...logged.slice(-3))
      } finally {
        await deployment.remove()
      }
    }
  } finally {
    await stopChildren()
    redis.destroy()
  }

  const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "—")
  const median = (values: ReadonlyArray<number>) => {
    const sorted = [...values].sort((a, b) => a - b)
    const mid = Math.floor(sorted.length / 2)
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  }
  const lines = [
    `Default process at a steady ${RATE} calls/s (${ROUNDS} rounds of ${DURATION_S} s per target, after ${WARMUP_S} s warm-up; ${CONNECTIONS} connections)`,
    `node ${process.version}, ${Os.cpus().length} CPUs (${Os.cpus()[0]?.model ?? "?"}), load ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`,
    "",
    "| layout | round | direct p50 / p99 ms | gateway p50 / p99 ms | gateway p99 − direct p99 ms | calls direct / gateway (errors) | decisions/s | event-loop p99 ms main / builder |",
    "|---|---|---|---|---|---|---|---|"
  ]
  for (const r of rounds) {
    lines.push(
      `| ${r.layout} | ${r.round} | ${fmt(r.direct.p50Ms)} / ${fmt(r.direct.p99Ms)} | ${fmt(r.gateway.p50Ms)} / ${fmt(r.gateway.p99Ms)} | ${fmt(r.gateway.p99Ms - r.direct.p99Ms)} | ${r.direct.requests} / ${r.gateway.requests} (${r.direct.errors + r.gateway.errors}) | ${fmt(r.decisionsPerSecond, 0)} | ${fmt(r.lagMain)} / ${fmt(r.lagBuilder)} |`
    )
  }
  lines.push("")
  for (const layout of CHOSEN) {
    const mine = rounds.filter((r) => r.layout === layout)
    if (mine.length === 0) continue
    const added = mine.map((r) => r.gateway.p99Ms - r.direct.p99Ms)
    lines.push(
      `${layout}: gateway p99 − provider p99 (median round) ${fmt(median(added))} ms (rounds ${added.map((a) => fmt(a)).join(", ")}) — ${median(added) <= 2 ? "meets" : "misses"} the target <= 2 ms; ` +
        `provider p99 ${fmt(median(mine.map((r) => r.direct.p99Ms)))} ms, gateway p99 ${fmt(median(mine.map((r) => r.gateway.p99Ms)))} ms; decisions/s ${fmt(median(mine.map((r) => r.decisionsPerSecond)), 0)}`
    )
  }
  lines.push("", ...notes)
  console.log(lines.join("\n"))
}

await main()
