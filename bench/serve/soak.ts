/**
 * The soak: the default `ledger serve` (external PostgreSQL and Redis, builders and analytics in their thread) at a
 * steady rate for half an hour; memory must stay flat and every answered call must become a decision exactly once.
 *
 *   npx node bench/serve/soak.ts [--minutes 30] [--rate 200] [--every 30] [--layout thread]
 *
 * The calls are sent open loop (pacer.ts: by the clock, not one after another's answer) and rotate over the agents' surfaces:
 * chat completions to OpenAI (plain) and Anthropic (streamed), Responses to OpenAI (plain) and translated to
 * Anthropic (streamed; the gateway keeps those chains in memory), Messages to Anthropic (plain and streamed). Each
 * `--every` seconds the run samples the process from `/metrics` (resident memory, each thread's heap and event-loop
 * delay p99, the Responses chains' memory, what the gateway retains on disk), the decisions in the database, the
 * builders' group lag, and the calls' latency over the window. At the end it stops sending, waits for the calls in
 * flight and for the builders, and compares the ledger ids the gateway answered with the decisions' ledger ids:
 * none missing, none extra, none twice.
 *
 * The Responses chains are capped at 4 MB here (LEDGER_RESPONSES_STATE_MB; 256 by default) so that the bounded
 * cache fills in the first minutes and what follows shows whether anything else grows.
 */
import * as Os from "node:os"
import { createClient, type RedisClientType } from "redis"
import { option, startChild, stopChildren } from "../gateway/harness.ts"
import { deploy, LAYOUTS, metricOf, progress, REDIS_URL, sql } from "./deployment.ts"
import { openLoop } from "./pacer.ts"

const MINUTES = Number(option("minutes", "30"))
const RATE = Number(option("rate", "200"))
const EVERY_S = Number(option("every", "30"))
const LAYOUT = option("layout", "thread")
const RESPONSES_STATE_MB = 4

const ASK = "Summarise the incident report for the payments outage in two sentences."

/** The calls, in rotation: path, body, extra headers, and how to tell a complete answer. */
const KINDS: ReadonlyArray<{ readonly name: string; readonly path: string; readonly body: string; readonly headers?: Record<string, string>; readonly stream: boolean }> = [
  { name: "chat openai", path: "/v1/chat/completions", stream: false, body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: ASK }] }) },
  { name: "chat anthropic streamed", path: "/v1/chat/completions", stream: true, body: JSON.stringify({ model: "anthropic/claude-haiku-4-5", stream: true, messages: [{ role: "user", content: ASK }] }) },
  { name: "responses openai", path: "/v1/responses", stream: false, body: JSON.stringify({ model: "gpt-5-mini", input: ASK }) },
  { name: "responses anthropic streamed", path: "/v1/responses", stream: true, body: JSON.stringify({ model: "anthropic/claude-haiku-4-5", stream: true, input: ASK }) },
  { name: "messages", path: "/v1/messages", stream: false, headers: { "anthropic-version": "2023-06-01" }, body: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 256, messages: [{ role: "user", content: ASK }] }) },
  { name: "messages streamed", path: "/v1/messages", stream: true, headers: { "anthropic-version": "2023-06-01" }, body: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 256, stream: true, messages: [{ role: "user", content: ASK }] }) }
]

interface Point {
  readonly minute: number
  readonly answered: number
  readonly failed: number
  readonly decisions: number
  readonly groupLag: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly rssMb: number
  readonly heapMainMb: number
  readonly heapBuilderMb: number
  readonly lagMainMs: number
  readonly lagBuilderMs: number
  readonly chainsMb: number
  readonly retainedMb: number
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
const median = (values: ReadonlyArray<number>) => quantile([...values].sort((a, b) => a - b), 0.5)
const mb = (bytes: number) => bytes / 1024 / 1024

const main = async () => {
  const redis = (await createClient({ url: REDIS_URL }).connect()) as RedisClientType
  const fake = await startChild(["bench/gateway/fake-provider.ts"], process.env)
  const fakeUrl = JSON.parse(fake.line).url as string
  const layout = LAYOUTS[LAYOUT]
  if (layout === undefined) throw new Error(`--layout: unknown ${LAYOUT}; known: ${Object.keys(LAYOUTS).join(", ")}`)
  const deployment = await deploy({ name: "soak", layout, fakeUrl, redis, env: { LEDGER_RESPONSES_STATE_MB: String(RESPONSES_STATE_MB) } })
  const points: Array<Point> = []
  const answered: Array<string> = []
  const failures: Array<string> = []
  let failed = 0
  let windowTimes: Array<number> = []
  const headers = {
    "content-type": "application/json",
    authorization: `Bearer ${deployment.gatewayKey}`,
    "x-service-provider-api-key": "sk-soak"
  }
  const call = async (n: number) => {
    const kind = KINDS[n % KINDS.length]!
    const started = performance.now()
    try {
      // a session per agent and minute: sessions stay of a realistic length
      const query = `agent_id=soak-agent-${n % 3}&execution_id=soak-${Math.floor(n / (RATE * 60))}`
      const res = await fetch(`${deployment.gatewayUrl}${kind.path}?${query}`, {
        method: "POST",
        headers: { ...headers, ...kind.headers },
        body: kind.body,
        signal: AbortSignal.timeout(30_000)
      })
      const text = await res.text()
      const ledgerId = res.headers.get("x-ledger-id")
      const complete = kind.stream ? /\n\n$/.test(text) && text.includes("data: ") : text.startsWith("{")
      if (res.status === 200 && complete && ledgerId !== null) {
        answered.push(ledgerId)
        windowTimes.push(performance.now() - started)
      } else {
        failed++
        if (failures.length < 5) failures.push(`${kind.name}: ${res.status} ${text.slice(0, 200)}`)
      }
    } catch (error) {
      failed++
      if (failures.length < 5) failures.push(`${kind.name}: ${String(error)}`)
    }
  }

  const sampleNow = async (minute: number) => {
    const metrics = await deployment.metrics()
    const groups = await redis.xInfoGroups(deployment.streamKey).catch(() => [])
    const times = windowTimes.sort((a, b) => a - b)
    windowTimes = []
    const thread = (name: string, thread: string) => metricOf(metrics, `${name}\\{thread="${thread}"\\}`)
    const point: Point = {
      minute,
      answered: answered.length,
      failed,
      decisions: await deployment.decisions(),
      groupLag: Number(groups[0]?.lag ?? Number.NaN),
      p50Ms: quantile(times, 0.5),
      p99Ms: quantile(times, 0.99),
      rssMb: mb(metricOf(metrics, "process_resident_memory_bytes")),
      heapMainMb: mb(thread("nodejs_heap_size_used_bytes", "main")),
      heapBuilderMb: mb(thread("nodejs_heap_size_used_bytes", "builder")),
      lagMainMs: thread("nodejs_eventloop_lag_p99_seconds", "main") * 1000,
      lagBuilderMs: thread("nodejs_eventloop_lag_p99_seconds", "builder") * 1000,
      chainsMb: mb(metricOf(metrics, "ledger_gateway_responses_state_bytes")),
      retainedMb: mb(metricOf(metrics, "ledger_capture_retained_bytes"))
    }
    points.push(point)
    progress(`minute ${minute.toFixed(1)}: ${point.answered} answered, ${point.failed} failed, ${point.decisions} decisions, RSS ${point.rssMb.toFixed(0)} MB, p99 ${point.p99Ms.toFixed(1)} ms`)
  }

  let verdict: Array<string> = []
  try {
    const start = performance.now()
    await sampleNow(0)
    const sampler = setInterval(() => void sampleNow((performance.now() - start) / 60_000), EVERY_S * 1000)
    const sent = await openLoop(RATE, MINUTES * 60, call).finally(() => clearInterval(sampler))
    progress(`stopped after ${sent} calls, every one finished; waiting for the builders`)
    const deadline = Date.now() + 120_000
    while ((await deployment.decisions()) < answered.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 500))
    await sampleNow(MINUTES)
    const built = await sql<{ id: string }>(deployment.databaseUrl, "SELECT ledger_id::text AS id FROM decisions")
    const ids = new Set(built.map((row) => row.id))
    const answeredSet = new Set(answered)
    const missing = answered.filter((id) => !ids.has(id)).length
    const extra = [...ids].filter((id) => !answeredSet.has(id)).length
    verdict = [
      `${sent} calls sent (${(sent / (MINUTES * 60)).toFixed(1)}/s), ${answered.length} answered, ${failed} failed${failures.length > 0 ? `: ${failures.join(" | ")}` : ""}`,
      `decisions: ${built.length} rows, ${ids.size} distinct; answered but not built ${missing}, built but not answered ${extra}, built twice ${built.length - ids.size}`
    ]
  } finally {
    const logged = deployment.logged()
    await deployment.remove()
    await stopChildren()
    redis.destroy()
    if (logged.length > 0) verdict.push(`log (${logged.length} lines, last 3):`, ...logged.slice(-3))
  }

  const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "—")
  const early = points.filter((p) => p.minute >= 5 && p.minute <= 10).map((p) => p.rssMb)
  const late = points.filter((p) => p.minute >= MINUTES - 5 && p.minute < MINUTES).map((p) => p.rssMb)
  const growth = median(late) / median(early) - 1
  // least squares over the second half: the trend in MB per hour once the heaps have found their size
  const settled = points.filter((p) => p.minute >= MINUTES / 2 && p.minute < MINUTES)
  const meanX = settled.reduce((s, p) => s + p.minute, 0) / settled.length
  const meanY = settled.reduce((s, p) => s + p.rssMb, 0) / settled.length
  const slope = settled.reduce((s, p) => s + (p.minute - meanX) * (p.rssMb - meanY), 0) /
    settled.reduce((s, p) => s + (p.minute - meanX) ** 2, 0) * 60
  const lines = [
    `Soak: ${LAYOUT} layout, ${RATE} calls/s for ${MINUTES} min, sampled every ${EVERY_S} s`,
    `node ${process.version}, ${Os.cpus().length} CPUs (${Os.cpus()[0]?.model ?? "?"}), load ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`,
    ...verdict,
    `RSS: median of minutes 5–10 ${fmt(median(early))} MB, of the last 5 minutes ${fmt(median(late))} MB (${growth >= 0 ? "+" : ""}${fmt(growth * 100)} %); ` +
      `trend over the second half ${fmt(slope)} MB/h — ${Math.abs(growth) <= 0.05 ? "flat" : "NOT flat"} (target: within 5 %)`,
    "",
    "minute,answered,failed,decisions,group_lag,p50_ms,p99_ms,rss_mb,heap_main_mb,heap_builder_mb,eventloop_p99_main_ms,eventloop_p99_builder_ms,responses_chains_mb,retained_mb",
    ...points.map((p) =>
      [fmt(p.minute), p.answered, p.failed, p.decisions, p.groupLag, fmt(p.p50Ms, 2), fmt(p.p99Ms, 2), fmt(p.rssMb), fmt(p.heapMainMb), fmt(p.heapBuilderMb), fmt(p.lagMainMs, 2), fmt(p.lagBuilderMs, 2), fmt(p.chainsMb, 2), fmt(p.retainedMb, 2)].join(",")
    )
  ]
  console.log(lines.join("\n"))
}

await main()
