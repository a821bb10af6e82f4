/**
 * Gateway benchmark: autocannon against the fake provider directly, and through the gateway (capture on, Redis
 * stream), in the same run, at 1 and 32 connections — for each API surface asked for: chat completions, the
 * Responses API (a bare model, to OpenAI) and Anthropic Messages (a bare model, to Anthropic), each passed through.
 *
 *   npx node bench/gateway/run.ts [--rounds 5] [--duration 5] [--slices 5] [--warmup 10] [--connections 1,32] [--stream]
 *                                 [--routes chat,responses,messages] [--gateway-workers N] [--conversation]
 *
 * Four processes: the fake provider (child), the gateway as shipped (`ledger serve --roles gateway` as a child,
 * embedded database, REDIS_URL or the local Redis, a stream key of its own), a bare Node proxy (bare-proxy.ts: what
 * any proxy costs on this machine) and autocannon here. The direct and bare-proxy baselines are measured the same
 * way (same autocannon process, same fake provider process), so every run pays the same load-generator cost. Latency at 1 connection is the mean of per-request times autocannon reports (its
 * histogram has 1 ms resolution, so the times are taken from its response events).
 *
 * Rounds: on a shared 2-core VM one 10 s figure of the same code varies by ±15 % from minute to minute (other
 * tenants, scheduling of four busy processes on two cores), and the machine's speed drifts within seconds (the fake
 * provider's own CPU per call moved by up to 40 % between 5 s windows), so a ratio of two figures taken even
 * seconds apart is noisy. Each round gives every target `duration` seconds, taken in `slices` interleaved slices
 * (direct, bare proxy, gateway, the order rotating from slice to slice and round to round), so a drift slower than a
 * few seconds weighs on the three alike; a round's figures pool its slices (calls over time, latency over all calls),
 * the ratios are taken within a round, and the targets are judged on the median round.
 *
 * CPU per call: each process's CPU time (Linux /proc, Redis's INFO) over a measurement, divided by the calls made.
 * Absolute figures drift with the VM, so the gateway's CPU per call is also given relative to the fake provider's
 * in the same measurement: the steadiest figure for comparing two versions of the gateway.
 *
 * Targets (2-core machine): throughput at 32 connections >= 0.30 x direct; added latency at 1 connection <= 0.30 ms
 * (set where a bare Node proxy kept 0.39 x and added 0.23 ms).
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Effect } from "effect"
import { createClient } from "redis"
import { agentConversation } from "../ingest/captures.ts"
import { benchDatabase } from "../reads/seed.ts"
import {
  mainThreadCpu,
  type Measured,
  measure,
  option,
  processCpu,
  redisCpuSeconds,
  type Sample,
  sample,
  startChild,
  startGateway,
  stopChildren,
  summarise
} from "./harness.ts"

const ROUNDS = Math.max(1, Number(option("rounds", "5")))
const DURATION_S = Number(option("duration", "5"))
/** interleaved slices per target and round (each DURATION_S / SLICES seconds) */
const SLICES = Math.max(1, Number(option("slices", "5")))
/** per target and connection count: long enough for V8 to finish optimising the gateway (2 s left round 1 slowest) */
const WARMUP_S = Number(option("warmup", "10"))
const CONNECTIONS = option("connections", "1,32").split(",").map(Number)
const ROUTES = option("routes", "chat").split(",").map((route) => route.trim())
const STREAM = process.argv.includes("--stream")
/** chat completions carry a coding agent's conversation 120 messages in (~110 KB) instead of a one-line ask */
const CONVERSATION = process.argv.includes("--conversation")
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
/** `ledger serve --gateway-workers N` for the gateway under test (over a database of the benchmark's own) */
const GATEWAY_WORKERS = Number(option("gateway-workers", "1"))

const main = async () => {
  const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-bench-gateway-"))
  const streamKey = `bench:gateway:${process.pid}:captures`
  const redis = await createClient({ url: REDIS_URL }).connect()
  try {
    const fake = await startChild(["bench/gateway/fake-provider.ts"], process.env)
    const fakeUrl = JSON.parse(fake.line).url as string
    const bare = await startChild(["bench/gateway/bare-proxy.ts", fakeUrl], process.env)
    const bareUrl = JSON.parse(bare.line).url as string
    // gateway workers share no embedded database: a database of the benchmark's own (recreated each run)
    const databaseUrl = GATEWAY_WORKERS > 1 ? await Effect.runPromise(benchDatabase("ledger_bench_gateway", true)) : undefined
    const gateway = await startGateway({ dataDir, fakeUrl, env: { LEDGER_STREAM_KEY: streamKey, REDIS_URL }, workers: GATEWAY_WORKERS, databaseUrl })
    const gatewayUrl = gateway.url
    const gatewayKey = gateway.key

    // no builder reads this stream: keep it short so the benchmark does not fill the shared Redis
    const trimmer = setInterval(() => void redis.xTrim(streamKey, "MAXLEN", 10_000, { strategyModifier: "~" }).catch(() => undefined), 500)

    const ask = "Summarise the incident report for the payments outage in two sentences."
    const chatMessages = CONVERSATION ? agentConversation(20) : [{ role: "user", content: ask }]
    const gatewayHeaders = {
      "content-type": "application/json",
      authorization: `Bearer ${gatewayKey}`,
      "x-service-provider-api-key": "sk-bench"
    }
    /** Each surface: its path, the provider's own request (direct and through the bare proxy), and the gateway's. */
    const surfaces: Record<string, { path: string; direct: { headers: Record<string, string>; body: string }; gatewayBody: string; gatewayHeaders?: Record<string, string> }> = {
      chat: {
        path: "/v1/chat/completions",
        direct: {
          headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
          body: JSON.stringify({ model: "gpt-4o-mini", stream: STREAM, messages: chatMessages })
        },
        gatewayBody: JSON.stringify({ model: "openai/gpt-4o-mini", stream: STREAM, messages: chatMessages })
      },
      responses: {
        path: "/v1/responses",
        direct: {
          headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
          body: JSON.stringify({ model: "gpt-5-mini", stream: STREAM, input: ask })
        },
        gatewayBody: JSON.stringify({ model: "gpt-5-mini", stream: STREAM, input: ask })
      },
      messages: {
        path: "/v1/messages",
        direct: {
          headers: { "content-type": "application/json", "x-api-key": "sk-bench", "anthropic-version": "2023-06-01" },
          body: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 256, stream: STREAM, messages: [{ role: "user", content: ask }] })
        },
        gatewayBody: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 256, stream: STREAM, messages: [{ role: "user", content: ask }] }),
        gatewayHeaders: { "anthropic-version": "2023-06-01" }
      }
    }
    const unknown = ROUTES.filter((route) => !(route in surfaces))
    if (unknown.length > 0) throw new Error(`--routes: unknown ${unknown.join(", ")}; known: ${Object.keys(surfaces).join(", ")}`)
    const targetsOf = (route: string) => {
      const surface = surfaces[route]!
      const direct = { url: `${fakeUrl}${surface.path}`, ...surface.direct }
      return [
        direct,
        { ...direct, url: `${bareUrl}${surface.path}` },
        {
          url: `${gatewayUrl}${surface.path}?agent_id=bench-agent&execution_id=bench`,
          headers: { ...gatewayHeaders, ...surface.gatewayHeaders },
          body: surface.gatewayBody
        }
      ]
    }

    const redisCpu = async () => redisCpuSeconds(await redis.info("cpu"))
    /** CPU seconds used so far by each process (Redis through INFO) */
    const cpuNow = async () => ({
      fake: processCpu(fake.child.pid) ?? NaN,
      bare: processCpu(bare.child.pid) ?? NaN,
      gateway: processCpu(gateway.child.pid) ?? NaN,
      gatewayMain: mainThreadCpu(gateway.child.pid) ?? NaN,
      redis: await redisCpu()
    })
    type Cpu = Awaited<ReturnType<typeof cpuNow>>
    const noCpu = (): Cpu => ({ fake: 0, bare: 0, gateway: 0, gatewayMain: 0, redis: 0 })
    /** One slice of a target: its sample, and the CPU each process used meanwhile added to `cpu` */
    const slice = async (target: ReturnType<typeof targetsOf>[number], connections: number, seconds: number, cpu: Cpu): Promise<Sample> => {
      const before = await cpuNow()
      const taken = await sample(target.url, target.headers, target.body, connections, seconds)
      const after = await cpuNow()
      for (const name of Object.keys(cpu) as Array<keyof Cpu>) cpu[name] += after[name] - before[name]
      return taken
    }
    /** CPU µs per call of each process over a target's slices in a round */
    const perCall = (cpu: Cpu, calls: number): Cpu => {
      const per = (seconds: number) => (seconds * 1e6) / Math.max(1, calls)
      return { fake: per(cpu.fake), bare: per(cpu.bare), gateway: per(cpu.gateway), gatewayMain: per(cpu.gatewayMain), redis: per(cpu.redis) }
    }

    const rows: Array<{
      route: string
      connections: number
      round: number
      direct: Measured
      bare: Measured
      gateway: Measured
      bareCpu: Cpu
      gatewayCpu: Cpu
      load: string
    }> = []
    for (const connections of CONNECTIONS) for (const route of ROUTES) {
      const targets = targetsOf(route)
      for (const target of targets) await measure(target.url, target.headers, target.body, connections, WARMUP_S)
      for (let round = 0; round < ROUNDS; round++) {
        const load = Os.loadavg().map((l) => l.toFixed(2)).join(" ")
        const samples = targets.map((): Array<Sample> => [])
        const cpu = targets.map(noCpu)
        for (let s = 0; s < SLICES; s++) {
          for (let i = 0; i < targets.length; i++) {
            const at = (round + s + i) % targets.length
            samples[at]!.push(await slice(targets[at]!, connections, DURATION_S / SLICES, cpu[at]!))
          }
        }
        const [d, b, g] = samples.map(summarise) as [Measured, Measured, Measured]
        rows.push({
          route,
          connections,
          round: round + 1,
          direct: d,
          bare: b,
          gateway: g,
          bareCpu: perCall(cpu[1]!, b.requests),
          gatewayCpu: perCall(cpu[2]!, g.requests),
          load
        })
      }
    }
    clearInterval(trimmer)

    const metrics = await (await fetch(`${gatewayUrl}/metrics`)).text()
    // summed over the series (gateway workers label theirs)
    const metric = (name: string) =>
      [...metrics.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce((sum, match) => sum + Number(match[1]), 0)
    const published = metric("ledger_capture_published_total")
    const spooled = metric("ledger_capture_spooled_total") || 0
    const gatewayRequests = rows.reduce((sum, row) => sum + row.gateway.requests, 0)

    const fmt = (n: number, digits = 3) => n.toFixed(digits)
    const median = (values: Array<number>) => {
      const sorted = [...values].sort((a, b) => a - b)
      const mid = Math.floor(sorted.length / 2)
      return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
    }
    /** median over the rounds of a route at `connections`, with the range */
    const summary = (route: string, connections: number, figure: (row: (typeof rows)[number]) => number, digits: number) => {
      const values = rows.filter((row) => row.route === route && row.connections === connections).map(figure)
      return values.length === 0
        ? undefined
        : { median: median(values), text: `${fmt(median(values), digits)} (rounds ${values.map((v) => fmt(v, digits)).join(", ")})` }
    }
    const lines = [
      `Gateway benchmark (${GATEWAY_WORKERS > 1 ? `gateway with ${GATEWAY_WORKERS} workers; ` : ""}${STREAM ? "streamed" : "non-streamed"}: ${ROUTES.join(", ")}; ${ROUNDS} rounds of ${DURATION_S} s per target in ${SLICES} interleaved slices, after ${WARMUP_S} s warm-up)`,
      `node ${process.version}, ${Os.cpus().length} CPUs (${Os.cpus()[0]?.model ?? "?"})`,
      "",
      "| route | connections | round | direct req/s | bare proxy req/s (ratio, added mean ms) | gateway req/s | ratio | direct mean / p50 ms | gateway mean / p50 / p99 ms | added mean / p50 ms | errors | load avg (1/5/15 min) |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|"
    ]
    for (const { bare: b, connections, direct: d, gateway: g, load, round, route } of rows) {
      lines.push(
        `| ${route} | ${connections} | ${round} | ${fmt(d.rps, 0)} | ${fmt(b.rps, 0)} (${fmt(b.rps / d.rps, 2)}, ${fmt(b.meanMs - d.meanMs)}) | ${fmt(g.rps, 0)} | ${fmt(g.rps / d.rps, 2)} | ${fmt(d.meanMs)} / ${fmt(d.p50Ms)} | ${fmt(g.meanMs)} / ${fmt(g.p50Ms)} / ${fmt(g.p99Ms)} | ${fmt(g.meanMs - d.meanMs)} / ${fmt(g.p50Ms - d.p50Ms)} | ${d.errors + b.errors + g.errors} | ${load} |`
      )
    }
    lines.push(
      "",
      "CPU per call, µs (process CPU time over the measurement / calls):",
      "",
      "| route | connections | round | gateway (its main thread) | fake provider (under the gateway) | Redis | gateway ÷ fake | bare proxy | fake provider (under the bare proxy) | bare proxy ÷ fake |",
      "|---|---|---|---|---|---|---|---|---|---|"
    )
    for (const { bareCpu: b, connections, gatewayCpu: g, round, route } of rows) {
      lines.push(
        `| ${route} | ${connections} | ${round} | ${fmt(g.gateway, 1)} (${fmt(g.gatewayMain, 1)}) | ${fmt(g.fake, 1)} | ${fmt(g.redis, 1)} | ${fmt(g.gateway / g.fake, 2)} | ${fmt(b.bare, 1)} | ${fmt(b.fake, 1)} | ${fmt(b.bare / b.fake, 2)} |`
      )
    }
    lines.push("")
    for (const { connections, direct: d, gateway: g, round, route } of rows) {
      if (d.errors + g.errors > 0) lines.push(`errors (${route}) at ${connections} connections, round ${round}: direct ${d.errorKinds || "none"}; gateway ${g.errorKinds || "none"}`)
    }
    lines.push("", `captures published to the Redis stream: ${published} (+${spooled} spooled) for ${gatewayRequests} measured gateway calls plus warm-up`)
    for (const route of ROUTES) {
      lines.push("", `${route}:`)
      const added = summary(route, 1, (row) => row.gateway.meanMs - row.direct.meanMs, 3)
      if (added) {
        const bareAdded = summary(route, 1, (row) => row.bare.meanMs - row.direct.meanMs, 3)!
        lines.push(`added latency at 1 connection (mean per call, median round): ${added.text} ms — ${added.median <= 0.3 ? "meets" : "misses"} the target <= 0.30; bare proxy ${bareAdded.text} ms`)
        const overBare = summary(route, 1, (row) => row.gateway.meanMs - row.bare.meanMs, 3)!
        lines.push(`gateway latency at 1 connection over the bare proxy's in the same round (median round): ${overBare.text} ms`)
      }
      const ratio = summary(route, 32, (row) => row.gateway.rps / row.direct.rps, 2)
      if (ratio) {
        const bareRatio = summary(route, 32, (row) => row.bare.rps / row.direct.rps, 2)!
        lines.push(`throughput at 32 connections (median round): ${ratio.text} x direct — ${ratio.median >= 0.3 ? "meets" : "misses"} the target >= 0.30; bare proxy ${bareRatio.text} x`)
        const againstBare = summary(route, 32, (row) => row.gateway.rps / row.bare.rps, 2)!
        lines.push(`gateway throughput at 32 connections relative to the bare proxy's in the same round (median round): ${againstBare.text}`)
        const relative = summary(route, 32, (row) => row.gatewayCpu.gateway / row.gatewayCpu.fake, 2)!
        const bareRelative = summary(route, 32, (row) => row.bareCpu.bare / row.bareCpu.fake, 2)!
        lines.push(`CPU per call at 32 connections relative to the fake provider's (median round): gateway ${relative.text}; bare proxy ${bareRelative.text}`)
      }
    }
    const warnings = gateway.stderr().split("\n").filter((line) => line.trim() !== "")
    if (warnings.length > 0) lines.push("", `gateway log (${warnings.length} lines, last 5):`, ...warnings.slice(-5))
    console.log(lines.join("\n"))
  } finally {
    // first, so that no gateway publishes after its stream is deleted
    await stopChildren()
    await redis.del(streamKey).catch(() => undefined)
    await redis.del(`${streamKey}:dead`).catch(() => undefined)
    // the publisher's per-producer dedup records (they would otherwise live for LEDGER_CAPTURE_DEDUP_TTL_SECONDS)
    for await (const keys of redis.scanIterator({ MATCH: `${streamKey}:*`, COUNT: 100 })) {
      if (keys.length > 0) await redis.del(keys).catch(() => undefined)
    }
    redis.destroy()
    Fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
