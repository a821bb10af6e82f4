/**
 * Two builds of the gateway, A and B, side by side: the instrument for a change to the hot path.
 *
 *   npx node bench/gateway/ab.ts --a <checkout> [--b <checkout>] [--rounds 20] [--duration 3] [--connections 32]
 *                                [--conversation]
 *
 * `<checkout>` is a directory holding the repository at some commit (`git worktree add /tmp/old HEAD~1`, with
 * node_modules linked or installed); B defaults to this one. Both gateways run at once against one fake provider
 * process, each with its own embedded database and stream key on the local Redis (REDIS_URL), and autocannon
 * drives them in alternation, a short run each, A first in odd rounds and B first in even ones.
 *
 * Why not two runs of run.ts: on a shared 2-core VM a 5 s figure of the same code moves by ±15 % from minute to
 * minute, more than most changes are worth. Alternating short rounds puts both builds in the same minutes, and
 * the figures are medians over many rounds: throughput, the CPU per call of each gateway's main thread and of the
 * whole process (the difference is its helper threads, mostly GC), each also relative to the fake provider's
 * CPU per call in the same run. `--conversation` sends a coding agent's call deep into its session (~110 KB, the
 * ingest benchmark's `conversation` capture) instead of a one-line ask.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { createClient } from "redis"
import { agentConversation } from "../ingest/captures.ts"
import { type GatewayProcess, mainThreadCpu, measure, option, processCpu, ROOT, startChild, startGateway, stopChildren } from "./harness.ts"

const A = Path.resolve(option("a", ""))
const B = Path.resolve(option("b", ROOT))
const ROUNDS = Math.max(1, Number(option("rounds", "20")))
const DURATION_S = Number(option("duration", "3"))
const CONNECTIONS = Number(option("connections", "32"))
const WARMUP_S = 5
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const CONVERSATION = process.argv.includes("--conversation")

interface Round {
  readonly rps: number
  /** CPU µs per call: the gateway process, its main thread, the fake provider */
  readonly total: number
  readonly main: number
  readonly fake: number
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const main = async () => {
  if (!Fs.existsSync(Path.join(A, "bin/ledger.js"))) throw new Error("--a must name a checkout of this repository")
  const redis = await createClient({ url: REDIS_URL }).connect()
  const streamKey = (name: string) => `bench:gateway-ab:${process.pid}:${name}`
  const dataDirs: Array<string> = []
  try {
    const fake = await startChild(["bench/gateway/fake-provider.ts"], process.env)
    const fakeUrl = JSON.parse(fake.line).url as string
    const gateways: Array<{ name: string; gateway: GatewayProcess; rounds: Array<Round> }> = []
    for (const [name, root] of [["A", A], ["B", B]] as const) {
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-bench-ab-"))
      dataDirs.push(dataDir)
      const gateway = await startGateway({ root, dataDir, fakeUrl, env: { LEDGER_STREAM_KEY: streamKey(name), REDIS_URL } })
      gateways.push({ name, gateway, rounds: [] })
    }
    // no builder reads these streams: keep them short
    const trimmer = setInterval(() => {
      for (const { name } of gateways) void redis.xTrim(streamKey(name), "MAXLEN", 10_000, { strategyModifier: "~" }).catch(() => undefined)
    }, 500)

    const body = JSON.stringify({
      model: "openai/gpt-4o-mini",
      stream: false,
      messages: CONVERSATION
        ? agentConversation(20)
        : [{ role: "user", content: "Summarise the incident report for the payments outage in two sentences." }]
    })
    const run = async ({ gateway }: (typeof gateways)[number], seconds: number): Promise<Round> => {
      const pid = gateway.child.pid
      const [total0, main0, fake0] = [processCpu(pid), mainThreadCpu(pid), processCpu(fake.child.pid)]
      const measured = await measure(
        `${gateway.url}/v1/chat/completions?agent_id=bench-agent`,
        { "content-type": "application/json", authorization: `Bearer ${gateway.key}`, "x-service-provider-api-key": "sk-bench" },
        body,
        CONNECTIONS,
        seconds
      )
      if (measured.errors > 0) throw new Error(`gateway answered with errors: ${measured.errorKinds}\n${gateway.stderr().slice(-2000)}`)
      const perCall = (before: number | undefined, after: number | undefined) =>
        before === undefined || after === undefined ? NaN : ((after - before) * 1e6) / Math.max(1, measured.requests)
      return {
        rps: measured.rps,
        total: perCall(total0, processCpu(pid)),
        main: perCall(main0, mainThreadCpu(pid)),
        fake: perCall(fake0, processCpu(fake.child.pid))
      }
    }

    for (const gateway of gateways) await run(gateway, WARMUP_S)
    for (let round = 0; round < ROUNDS; round++) {
      for (const gateway of round % 2 === 0 ? gateways : [...gateways].reverse()) gateway.rounds.push(await run(gateway, DURATION_S))
    }
    clearInterval(trimmer)

    const fmt = (n: number, digits: number) => n.toFixed(digits)
    const lines = [
      `Gateway A/B (non-streamed chat completions, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${DURATION_S} s)`,
      `A: ${A}`,
      `B: ${B}`,
      `node ${process.version}, ${Os.cpus().length} CPUs (${Os.cpus()[0]?.model ?? "?"})`,
      "",
      "| build | req/s | CPU µs per call: process | main thread | fake provider | process ÷ fake | main thread ÷ fake |",
      "|---|---|---|---|---|---|---|"
    ]
    for (const { name, rounds } of gateways) {
      const m = (figure: (round: Round) => number, digits: number) => fmt(median(rounds.map(figure)), digits)
      lines.push(
        `| ${name} | ${m((r) => r.rps, 0)} | ${m((r) => r.total, 1)} | ${m((r) => r.main, 1)} | ${m((r) => r.fake, 1)} | ${m((r) => r.total / r.fake, 2)} | ${m((r) => r.main / r.fake, 2)} |`
      )
    }
    const [a, b] = gateways as [(typeof gateways)[number], (typeof gateways)[number]]
    const ratios = b.rounds.map((round, i) => round.rps / a.rounds[i]!.rps)
    lines.push(
      "",
      "(medians over the rounds)",
      `B's throughput over A's in the same round: median ${fmt(median(ratios), 2)} (rounds ${ratios.map((r) => fmt(r, 2)).join(", ")})`
    )
    console.log(lines.join("\n"))
  } finally {
    // first, so that no gateway publishes after its stream is deleted
    await stopChildren()
    for (const name of ["A", "B"]) {
      for await (const keys of redis.scanIterator({ MATCH: `${streamKey(name)}*`, COUNT: 100 })) {
        if (keys.length > 0) await redis.del(keys).catch(() => undefined)
      }
    }
    redis.destroy()
    for (const dataDir of dataDirs) Fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
