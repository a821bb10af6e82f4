/**
 * Ingest benchmark (docs/ARCHITECTURE.md, "One call", steps 3 and 4): realistic captures published straight to the
 * Redis capture stream, consumed by builder processes (`node bin/ledger.js serve --roles builder`) into a fresh
 * PostgreSQL database.
 *
 *   npx node bench/ingest/run.ts [--builders 2] [--consumers 1] [--batch 4000] [--shards 1] [--workspaces 3]
 *                                [--rate 8000] [--seconds 20] [--latency-rate 1000] [--latency-seconds 20]
 *                                [--sustained-only] [--captures realistic|short|conversation] [--warmup 30000]
 *                                [--drain-beside 0]
 *
 * `--captures short` publishes the gateway benchmark's small call instead of the realistic shapes (captures.ts).
 * `--sustained-only` stops after phase 1 (for side-by-side runs of the builder's rate). `--shards N` runs the capture
 * stream in N shards (LEDGER_CAPTURE_SHARDS): captures are published to their workspace's shard and the builders share
 * the shards out by lease; `--workspaces` is how many workspaces the sustained phase spreads its captures over.
 * `BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR"` profiles the builder processes.
 *
 * Phase 1, sustained: captures are published open-loop at `--rate` (above what the builders can take, so they
 * are never idle) for `--seconds`; the committed-decision count is sampled every 250 ms and the sustained rate
 * is the slope over the steady part (once the builders have built `--warmup` decisions and 3 s have passed, until
 * publishing stops), besides the overall drain rate and the backlog drain rate (the slope after publishing stopped,
 * while the builders work off what is left) with the cores the builders and their backends keep busy meanwhile
 * (`backlog_cores_busy`, of the machine's two). The warm-up is counted in decisions: fresh builder processes spend
 * several times more CPU a decision in their first seconds (700, 270, 160 µs a realistic decision in seconds 1–3
 * against ~100–160 once ~30,000 are built), and a window from 3 s measured part of that (bench/notes/builder.md, "Where
 * the rest of a decision's CPU goes"). `--warmup 0` gives the window as it was.
 * The CPU time the builder processes and their PostgreSQL backends spend in the steady part, per decision, gives the
 * rate two otherwise idle cores could sustain — a figure that holds up on a machine shared with other work —, and the
 * same while they drain alone (`backlog_cpu_ms_per_decision`). `--drain-beside R` goes on publishing the same captures
 * at R/s once the sustained publishing stops, to a stream key no builder reads, until the backlog is built: the backlog
 * figures then measure the builders draining beside a publisher that shares the cores but not their work
 * (bench/notes/builder.md, "What the steady phase's extra cost comes with").
 * The machine's other work is reported beside it: this process's CPU a capture published (it publishes as the
 * gateways would, each capture encoded once), and Redis's (`INFO cpu`) a decision, steady and while draining.
 * Between the phases: the analytics materialiser in the builder processes yields while the builders have a backlog
 * (LEDGER_ANALYTICS_YIELD_BACKLOG, LEDGER_ANALYTICS_YIELD_AGE_MS); the time it and then the detectors take to catch up with the burst is reported,
 * and phase 2 starts once they have (at most 5 minutes), so that phase measures a steady pipeline.
 * Phase 2, latency: `--latency-rate` captures/s for `--latency-seconds`, each stamped with its publish time as the
 * end of the call; latency is the decision's `built_at` (clock_timestamp() of its insert, a few ms before commit)
 * minus that time, reported as p50/p95/p99/max.
 *
 * Uses the local PostgreSQL and Redis like the tests: a database and a stream key of its own, removed afterwards.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { createClient } from "redis"
import { StoreLive } from "../../layers/Store.ts"
import { CaptureShards } from "../../src/capture/CaptureShards.ts"
import type { WorkspaceScope } from "../../src/domain/principal.ts"
import { batchIds, captureBytes, type CapturePayload } from "../../src/capture/CaptureStream.ts"
import { LedgerConfig } from "../../src/config/LedgerConfig.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import { DatabaseLive } from "../../src/store/Database.ts"
import { testDatabase } from "../../test/support/db.ts"
import { freePort } from "../../test/support/ports.ts"
import { TEST_REDIS_URL, testKeyPrefix } from "../../test/support/redis.ts"
import { testSettings } from "../../test/support/settings.ts"
import { processesCpu, redisCpuSeconds } from "../support/cpu.ts"
import { CAPTURE_SHAPES, type CaptureIdentity, type CaptureShape, realisticCapture, TEMPLATE_COUNT } from "./captures.ts"

const { values: args } = parseArgs({
  options: {
    builders: { type: "string", default: "2" },
    consumers: { type: "string", default: "1" },
    batch: { type: "string", default: "4000" },
    rate: { type: "string", default: "8000" },
    seconds: { type: "string", default: "20" },
    "latency-rate": { type: "string", default: "1000" },
    "latency-seconds": { type: "string", default: "20" },
    "sustained-only": { type: "boolean", default: false },
    shards: { type: "string", default: "1" },
    workspaces: { type: "string", default: "3" },
    captures: { type: "string", default: "realistic" },
    warmup: { type: "string", default: "30000" },
    "drain-beside": { type: "string", default: "0" }
  }
})
const BUILDERS = Number(args.builders)
const CONSUMERS = Number(args.consumers)
const BATCH = Number(args.batch)
const RATE = Number(args.rate)
const SECONDS = Number(args.seconds)
const LATENCY_RATE = Number(args["latency-rate"])
const LATENCY_SECONDS = Number(args["latency-seconds"])
const SUSTAINED_ONLY = args["sustained-only"]
const SHARDS = Number(args.shards)
const WORKSPACES = Number(args.workspaces)
const SHAPE = args.captures as CaptureShape
const WARMUP = Number(args.warmup)
const DRAIN_BESIDE = Number(args["drain-beside"])
if (!CAPTURE_SHAPES.includes(SHAPE)) throw new Error(`--captures: one of ${CAPTURE_SHAPES.join(", ")}`)
const TICK_MS = 10
/** How long phase 2 waits for analytics to catch up with phase 1 before it starts anyway. */
const CATCH_UP_LIMIT_MS = 300_000
const AGENTS_PER_WORKSPACE = 50
const ROOT = Path.resolve(import.meta.dirname, "../..")

const log = (line: string) => Effect.sync(() => console.error(`[ingest] ${line}`))

/** One builder process on the shared group (its pid); stopped (SIGTERM) with the scope. */
const startBuilder = (env: Record<string, string>, index: number) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const port = await freePort()
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), `ledger-bench-${index}-`))
      // BENCH_NODE_FLAGS go to the builders' node, e.g. `--cpu-prof --cpu-prof-dir=DIR`
      const flags = (process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean)
      const child = ChildProcess.spawn(process.execPath, [...flags, Path.join(ROOT, "bin/ledger.js"), "serve", "--roles", "builder"], {
        cwd: ROOT,
        env: { ...process.env, ...env, LEDGER_API_PORT: String(port), LEDGER_DATA_DIR: dataDir },
        stdio: ["ignore", "ignore", "inherit"]
      })
      const stopped = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      const stop = async (signal: NodeJS.Signals) => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal)
        await stopped
        Fs.rmSync(dataDir, { recursive: true, force: true })
      }
      for (let i = 0; i < 300; i++) {
        const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)
        if (ready) return { pid: child.pid!, stop }
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await stop("SIGKILL")
      throw new Error(`builder ${index} did not become ready`)
    }),
    (builder) => Effect.promise(() => builder.stop("SIGTERM"))
  )

/**
 * Publishes `perSecond` captures per second for `seconds`, in ticks, each to its workspace's shard; returns how many
 * were published.
 */
const publishAt = (perSecond: number, seconds: number, make: (i: number, now: number) => { readonly scope: WorkspaceScope; readonly payload: string }) =>
  Effect.gen(function*() {
    const shards = yield* CaptureShards
    const nextBatch = shards.streams.map(() => batchIds())
    const started = Date.now()
    let published = 0
    while (Date.now() - started < seconds * 1000) {
      const due = Math.floor(((Date.now() - started) / 1000) * perSecond) - published
      if (due > 0) {
        const now = Date.now()
        const count = Math.min(due, 2_000)
        const byShard = shards.streams.map((): Array<CapturePayload> => [])
        for (let i = 0; i < count; i++) {
          const { payload, scope } = make(published + i, now)
          // encoded once, as the gateway's publisher does (node-redis would join a batch's strings into one)
          byShard[shards.shardOf(scope)]!.push(captureBytes(payload))
        }
        for (const [shard, payloads] of byShard.entries()) {
          if (payloads.length > 0) yield* shards.streams[shard]!.publish(payloads, nextBatch[shard]!())
        }
        published += count
      } else {
        yield* Effect.sleep(Duration.millis(TICK_MS))
      }
    }
    return published
  })

/**
 * Committed decisions, from the agents' rollups (updated in the builder's transaction with the decisions it inserts):
 * exact and cheap — a count(*) of the growing table every 250 ms took ~0.1 s of Postgres time each (pg_stat_statements).
 */
const countDecisions = (workspaces: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`
      SELECT coalesce(sum(decision_count), 0)::int AS n FROM agents WHERE workspace_id = ANY(${workspaces}::uuid[])`
    return row!.n
  })

/** Whether the detectors have looked at every materialised decision of the workspaces. */
const detectorsCaughtUp = (workspaces: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ done: boolean }>`
      SELECT coalesce(bool_and(p.detected_seq >= (SELECT coalesce(max(s.seq), 0) FROM decision_search s
        WHERE s.tenant_id = p.tenant_id AND s.workspace_id = p.workspace_id)), false) AS done
      FROM analytics_progress p WHERE p.workspace_id = ANY(${workspaces}::uuid[])`
    return row!.done
  })

/** Decisions the analytics materialiser has processed, from its hourly rollups (each decision counted once). */
const countMaterialized = (workspaces: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`
      SELECT coalesce(sum(decisions), 0)::int AS n FROM hourly_rollups WHERE workspace_id = ANY(${workspaces}::uuid[])`
    return row!.n
  })

const program = Effect.gen(function*() {
  const database = yield* testDatabase
  const prefix = yield* testKeyPrefix("bench-ingest")
  const streamKey = `${prefix}captures`
  const settings = testSettings({
    databaseUrl: Option.some(Redacted.make(database.url)),
    redisUrl: Option.some(Redacted.make(TEST_REDIS_URL)),
    streamKey,
    captureShards: SHARDS
  })
  const context = yield* Layer.build(Layer.mergeAll(StoreLive, CaptureShards.redis, DatabaseLive).pipe(Layer.provideMerge(LedgerConfig.layerFrom(settings))))
  // Redis's own CPU (INFO cpu), the machine's third consumer while builders drain
  const redis = yield* Effect.acquireRelease(
    Effect.promise(() => createClient({ url: TEST_REDIS_URL }).connect()),
    (client) => Effect.promise(() => client.quit().catch(() => undefined))
  )
  return yield* Effect.gen(function*() {
    const credentials = yield* Credentials
    const identities: Array<CaptureIdentity> = []
    // the sustained phase's workspaces, and one more for the latency phase
    for (let i = 0; i <= WORKSPACES; i++) {
      const created = yield* credentials.bootstrap({ tenant: `bench-${i}`, workspace: "ops", email: `bench-${i}@example.test`, role: "member" })
      identities.push({ tenant_id: created.tenant_id, workspace_id: created.workspace_id, user_id: created.user_id, key_id: Crypto.randomUUID() })
    }
    const latencyIdentity = identities.pop()!
    const sustainedWorkspaces = identities.map((identity) => identity.workspace_id)

    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      LEDGER_STREAM_KEY: streamKey,
      LEDGER_BUILDER_CONSUMERS: String(CONSUMERS),
      LEDGER_BUILDER_BATCH_SIZE: String(BATCH),
      LEDGER_CAPTURE_SHARDS: String(SHARDS),
      LEDGER_LOG_LEVEL: "warn"
    }
    yield* log(`machine: ${Os.cpus().length} cores, load ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
    yield* log(`starting ${BUILDERS} builder processes × ${CONSUMERS} consumers, batch ${BATCH}, ${SHARDS} shard${SHARDS === 1 ? "" : "s"}`)
    const builders = yield* Effect.forEach(Array.from({ length: BUILDERS }, (_, i) => i), (i) => startBuilder(env, i), { concurrency: "unbounded" })
    const sql = yield* SqlClient.SqlClient
    const pipelinePids = Effect.map(
      sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = ${database.name} AND pid <> pg_backend_pid()`,
      (rows) => [...builders.map((builder) => builder.pid), ...rows.map((row) => row.pid)]
    )

    // --- phase 1: sustained throughput
    yield* log(`sustained: publishing ${RATE}/s for ${SECONDS} s`)
    const samples: Array<{ t: number; n: number; cpu: Map<number, number>; redis: number }> = []
    const started = Date.now()
    const publisherCpuBefore = process.cpuUsage()
    const sampler = yield* Effect.forkChild(
      Effect.gen(function*() {
        const cpu = processesCpu(yield* pipelinePids)
        const redisCpu = redisCpuSeconds(yield* Effect.promise(() => redis.info("cpu")))
        samples.push({ t: Date.now() - started, n: yield* countDecisions(sustainedWorkspaces), cpu, redis: redisCpu })
        yield* Effect.sleep("250 millis")
      }).pipe(Effect.forever)
    )
    const sustainedCapture = (i: number, now: number) => {
      const identity = identities[i % identities.length]!
      const agent = Math.floor(i / identities.length) % AGENTS_PER_WORKSPACE
      const capture = realisticCapture(identity, { agent_id: `agent-${agent}`, agent_name: `Agent ${agent}`, started_at: now - 1_500, variant: i % TEMPLATE_COUNT }, SHAPE)
      return { scope: capture, payload: JSON.stringify(capture) }
    }
    const published = yield* publishAt(RATE, SECONDS, sustainedCapture)
    const publishedFor = (Date.now() - started) / 1000
    const publisherCpu = process.cpuUsage(publisherCpuBefore)
    // the same publishing on, to a stream no builder reads, until the backlog is built (interrupted then)
    const beside = DRAIN_BESIDE === 0 ? undefined : yield* Effect.forkChild(
      publishAt(DRAIN_BESIDE, CATCH_UP_LIMIT_MS / 1000, sustainedCapture).pipe(
        Effect.provide(CaptureShards.redis.pipe(Layer.provide(LedgerConfig.layerFrom({ ...settings, streamKey: `${prefix}beside`, captureShards: 1 }))))
      )
    )
    while ((yield* countDecisions(sustainedWorkspaces)) < published) yield* Effect.sleep("100 millis")
    const drainedAt = (Date.now() - started) / 1000
    if (beside !== undefined) yield* Fiber.interrupt(beside)
    yield* Fiber.interrupt(sampler)
    const whilePublishing = (s: (typeof samples)[number]) => s.t >= 3_000 && s.t <= publishedFor * 1000
    const warm = samples.filter((s) => whilePublishing(s) && s.n >= WARMUP)
    // 8 samples: 2 s of the 250 ms sampling
    if (warm.length < 8) yield* log(`fewer than ${WARMUP} decisions built 2 s before publishing stopped: the steady window starts at 3 s`)
    const steady = warm.length >= 8 ? warm : samples.filter(whilePublishing)
    const [first, last] = [steady[0]!, steady.at(-1)!]
    const slope = ((last.n - first.n) / (last.t - first.t)) * 1000
    // CPU of the processes present at both ends of a window (a backend that came or went is left out)
    const builderPids = new Set(builders.map((builder) => builder.pid))
    const cpuBetween = (from: typeof first, to: typeof first) => {
      let all = 0
      let ofBuilders = 0
      for (const [pid, seconds] of to.cpu) {
        const used = seconds - (from.cpu.get(pid) ?? seconds)
        all += used
        if (builderPids.has(pid)) ofBuilders += used
      }
      return { all, ofBuilders }
    }
    const { all: cpu, ofBuilders: builderCpu } = cpuBetween(first, last)
    // after publishing stops the builders drain the backlog with the machine to themselves (no publisher)
    const draining = samples.filter((s) => s.t >= publishedFor * 1000 + 1_000 && s.n < published)
    const backlogRate = draining.length < 2
      ? null
      : Math.round(((draining.at(-1)!.n - draining[0]!.n) / (draining.at(-1)!.t - draining[0]!.t)) * 1000)
    // how much of the machine the builders and their backends keep busy while draining alone: what overlapping their
    // work raises, whatever the VM's speed at the time
    const backlogCpu = draining.length < 2 ? null : cpuBetween(draining[0]!, draining.at(-1)!)
    const backlogCoresBusy = backlogCpu === null
      ? null
      : Number((backlogCpu.all / ((draining.at(-1)!.t - draining[0]!.t) / 1000)).toFixed(2))
    const perDecision = (seconds: number) => Number(((seconds * 1000) / (last.n - first.n)).toFixed(3))
    const perBacklogDecision = (seconds: number) => Number(((seconds * 1000) / (draining.at(-1)!.n - draining[0]!.n)).toFixed(3))
    const cpuMsPerDecision = perDecision(cpu)
    yield* log(`published ${published} in ${publishedFor.toFixed(1)} s; all committed after ${drainedAt.toFixed(1)} s`)
    const sustained = {
      published,
      steady_rate: Math.round(slope),
      steady_window_s: [Number((first.t / 1000).toFixed(1)), Number((last.t / 1000).toFixed(1))],
      drain_rate: Math.round(published / drainedAt),
      backlog_drain_rate: backlogRate,
      backlog_cores_busy: backlogCoresBusy,
      cpu_ms_per_decision: { total: cpuMsPerDecision, builders: perDecision(builderCpu), postgres: perDecision(cpu - builderCpu) },
      // the same while draining alone (or beside `--drain-beside`): the steady figure above shares the cores with the
      // publisher and Redis
      drain_beside: DRAIN_BESIDE,
      backlog_cpu_ms_per_decision: backlogCpu === null ? null : {
        total: perBacklogDecision(backlogCpu.all),
        builders: perBacklogDecision(backlogCpu.ofBuilders),
        postgres: perBacklogDecision(backlogCpu.all - backlogCpu.ofBuilders)
      },
      capacity_on_two_idle_cores: Math.round(2_000 / cpuMsPerDecision),
      // the machine's other work: this process publishing (the gateways' part; with its sampling), and Redis
      publisher_cpu_ms_per_capture: Number(((publisherCpu.user + publisherCpu.system) / 1000 / published).toFixed(3)),
      redis_cpu_ms_per_decision: {
        steady: perDecision(last.redis - first.redis),
        backlog: draining.length < 2
          ? null
          : Number((((draining.at(-1)!.redis - draining[0]!.redis) * 1000) / (draining.at(-1)!.n - draining[0]!.n)).toFixed(3))
      }
    }
    if (SUSTAINED_ONLY) {
      console.log(JSON.stringify({ builders: BUILDERS, consumers_per_builder: CONSUMERS, batch: BATCH, shards: SHARDS, sustained }, null, 2))
      return
    }

    // analytics yielded while the builders were behind (LEDGER_ANALYTICS_YIELD_*): time its catch-up, so
    // phase 2 measures a steady pipeline rather than that catch-up
    const materializedDuringBurst = yield* countMaterialized(sustainedWorkspaces)
    const catchUpStarted = Date.now()
    let materialized = materializedDuringBurst
    while (materialized < published && Date.now() - catchUpStarted < CATCH_UP_LIMIT_MS) {
      yield* Effect.sleep("1 second")
      materialized = yield* countMaterialized(sustainedWorkspaces)
    }
    const catchUpSeconds = (Date.now() - catchUpStarted) / 1000
    // the detectors follow the materialiser: let them finish the burst too
    while (!(yield* detectorsCaughtUp(sustainedWorkspaces)) && Date.now() - catchUpStarted < CATCH_UP_LIMIT_MS) {
      yield* Effect.sleep("1 second")
    }
    const detectorsSeconds = (Date.now() - catchUpStarted) / 1000
    yield* log(`analytics: ${materializedDuringBurst} materialised while the builders had a backlog; ${materialized} after ${catchUpSeconds.toFixed(1)} s more`)
    const analytics = {
      materialized_during_burst: materializedDuringBurst,
      caught_up: materialized >= published,
      seconds_after_burst: Number(catchUpSeconds.toFixed(1)),
      catch_up_rate: Math.round((materialized - materializedDuringBurst) / catchUpSeconds),
      detectors_done_after_seconds: Number(detectorsSeconds.toFixed(1))
    }

    // --- phase 2: latency at a moderate rate
    yield* log(`latency: publishing ${LATENCY_RATE}/s for ${LATENCY_SECONDS} s`)
    const latencyPublished = yield* publishAt(LATENCY_RATE, LATENCY_SECONDS, (i, now) => {
      const capture = realisticCapture(latencyIdentity, { agent_id: `agent-${i % AGENTS_PER_WORKSPACE}`, started_at: now - 1_500, duration_ms: 1_500, variant: i % TEMPLATE_COUNT }, SHAPE)
      return { scope: capture, payload: JSON.stringify(capture) }
    })
    while ((yield* countDecisions([latencyIdentity.workspace_id])) < latencyPublished) yield* Effect.sleep("100 millis")
    // analytics' freshness meanwhile (it yields while ingest is behind): how much of the phase it had materialised when
    // the last decision was built, and how long it took to finish
    const lastBuiltAt = Date.now()
    const materializedAtLastBuild = yield* countMaterialized([latencyIdentity.workspace_id])
    let latencyMaterialized = materializedAtLastBuild
    while (latencyMaterialized < latencyPublished && Date.now() - lastBuiltAt < CATCH_UP_LIMIT_MS) {
      yield* Effect.sleep("200 millis")
      latencyMaterialized = yield* countMaterialized([latencyIdentity.workspace_id])
    }
    const analyticsFollowedAfter = (Date.now() - lastBuiltAt) / 1000
    const [latency] = yield* sql<{ p50: number; p95: number; p99: number; max: number }>`
      SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95,
             percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99, max(ms) AS max
      FROM (SELECT extract(epoch FROM built_at - captured_at) * 1000 AS ms FROM decisions WHERE workspace_id = ${latencyIdentity.workspace_id}::uuid) l`

    const result = {
      builders: BUILDERS,
      consumers_per_builder: CONSUMERS,
      batch: BATCH,
      shards: SHARDS,
      sustained,
      analytics,
      latency: {
        rate: LATENCY_RATE,
        captures: latencyPublished,
        p50_ms: Math.round(latency!.p50),
        p95_ms: Math.round(latency!.p95),
        p99_ms: Math.round(latency!.p99),
        max_ms: Math.round(latency!.max),
        analytics_materialized_at_last_build: materializedAtLastBuild,
        analytics_done_after_last_build_s: Number(analyticsFollowedAfter.toFixed(1))
      },
      machine: { cores: Os.cpus().length, load_after: Os.loadavg().map((l) => Number(l.toFixed(2))) }
    }
    console.log(JSON.stringify(result, null, 2))
  }).pipe(Effect.provide(context))
})

NodeRuntime.runMain(Effect.scoped(program))
