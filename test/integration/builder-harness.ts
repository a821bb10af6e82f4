/**
 * Shared by the builder, sessions and fault suites: a builder on a fresh database, captures with explicit times,
 * and a recount that checks every stored rollup against the decisions themselves (read through the owner's pool).
 */
import { Deferred, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type CaptureIdentity, type CaptureOptions, realisticCapture, TEMPLATE_COUNT } from "../../bench/ingest/captures.ts"
import { DecisionBuilder } from "../../src/builder/DecisionBuilder.ts"
import { agentLockKey, lockAgents } from "../../src/store/agentRollups.ts"
import { batchIds, CaptureStream } from "../../src/capture/CaptureStream.ts"
import * as MemoryCaptureStream from "../../src/capture/MemoryCaptureStream.ts"
import type { LedgerSettings } from "../../src/config/LedgerConfig.ts"
import { Credentials } from "../../src/auth/Credentials.ts"
import type { WorkspaceScope } from "../../src/domain/principal.ts"
import { TenantSql } from "../../src/store/TenantSql.ts"
import { eventually } from "../support/eventually.ts"
import { spawnOnFreePorts } from "../support/ports.ts"
import { type Backend, storeWithPoolLayer } from "../support/stack.ts"

/** Store (with the owner's pool for assertions), in-process stream and the builder service. */
export const builderStack = (backend: Backend = "postgres", overrides: Partial<LedgerSettings> = {}) =>
  DecisionBuilder.layer.pipe(
    Layer.provideMerge(MemoryCaptureStream.layer),
    Layer.provideMerge(storeWithPoolLayer(backend, overrides))
  )

/** A fresh tenant and workspace (by unique names) with a member; captures carry its ids. */
export const newWorkspace = (label = "acme") =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const suffix = Crypto.randomBytes(4).toString("hex")
    const created = yield* credentials.bootstrap({
      tenant: `${label}-${suffix}`,
      workspace: "ops",
      email: `dana-${suffix}@example.test`,
      role: "member"
    })
    return {
      tenant_id: created.tenant_id,
      workspace_id: created.workspace_id,
      user_id: created.user_id,
      key_id: Crypto.randomUUID()
    } satisfies CaptureIdentity
  })

export const MINUTE = 60_000
/** 2025-11-03 09:00 UTC: tests place calls at explicit offsets from it */
export const T0 = Date.UTC(2025, 10, 3, 9, 0, 0)

export const captureJson = (identity: CaptureIdentity, options: CaptureOptions) => JSON.stringify(realisticCapture(identity, options))

/**
 * Takes an agent's lock in a transaction of its own, as a builder's batch does from its start to its commit, and holds
 * it until the returned effect releases it (and waits for that transaction to end).
 */
export const holdAgentLock = (scope: WorkspaceScope, agentId: string) =>
  Effect.gen(function*() {
    const locked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* Effect.forkChild(TenantSql.use((tenantSql) => tenantSql.write(scope, Effect.gen(function*() {
      yield* lockAgents([agentLockKey(scope, agentId)])
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(release)
    }))))
    yield* Deferred.await(locked)
    return Deferred.succeed(release, undefined).pipe(Effect.andThen(Fiber.join(holder)))
  })

/** Publishes one batch as a producer of its own (so concurrent test publishers never look like replays). */
export const publish = (payloads: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const stream = yield* CaptureStream
    return (yield* stream.publish(payloads, batchIds()())).ids
  })

/** Publishes payloads and has the builder process them as one consumer would (read, then process). */
export const publishAndBuild = (payloads: ReadonlyArray<string>, consumer = "test-consumer") =>
  Effect.gen(function*() {
    const stream = yield* CaptureStream
    const builder = yield* DecisionBuilder
    yield* publish(payloads)
    const entries = yield* stream.read(consumer, { count: payloads.length, blockMs: 0 })
    return yield* builder.process(consumer, entries)
  })

/**
 * A fresh workspace with `count` decisions a minute apart from T0 over three agents, built by the builder in two
 * batches (so its chain spans transactions).
 */
export const chainedWorkspace = (count: number, label = "chain") =>
  Effect.gen(function*() {
    const identity = yield* newWorkspace(label)
    const payloads = Array.from({ length: count }, (_, i) =>
      captureJson(identity, { agent_id: `agent-${i % 3}`, started_at: T0 + i * MINUTE, variant: i % TEMPLATE_COUNT }))
    yield* publishAndBuild(payloads.slice(0, Math.ceil(count / 2)))
    yield* publishAndBuild(payloads.slice(Math.ceil(count / 2)))
    return identity
  })

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b))

/**
 * Every rollup recounted from the decisions: sessions (counts, cost, tokens, span) and agents (counts, sessions,
 * cost, tokens, confidence, first/last seen). Returns the differences found (empty when all agree).
 */
export const recount = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const problems: Array<string> = []
  const sessions = yield* sql<{
    session_id: string
    stored: boolean
    counted: boolean
    decision_count: number
    n: number
    error_count: number
    errors: number
    total_cost_usd: number
    cost: number
    total_tokens: number
    tokens: number
    started_at: Date
    first: Date
    ended_at: Date
    last: Date
  }>`
    SELECT COALESCE(s.session_id, d.session_id) AS session_id, s.session_id IS NOT NULL AS stored, d.session_id IS NOT NULL AS counted,
      s.decision_count::float8 AS decision_count, d.n, s.error_count::float8 AS error_count, d.errors,
      s.total_cost_usd, d.cost, s.total_tokens::float8 AS total_tokens, d.tokens, s.started_at, d.first, s.ended_at, d.last
    FROM sessions s FULL JOIN (
      SELECT session_id, count(*)::float8 AS n, (count(*) FILTER (WHERE outcome = 'error'))::float8 AS errors,
        COALESCE(sum(cost_usd), 0) AS cost, COALESCE(sum((usage->>'total_tokens')::float8), 0) AS tokens,
        min(created_at) AS first, max(created_at + latency_ms * interval '1 millisecond') AS last
      FROM decisions GROUP BY session_id
    ) d ON d.session_id = s.session_id`
  for (const s of sessions) {
    if (!s.stored) problems.push(`session ${s.session_id}: decisions point at a missing session`)
    else if (!s.counted) problems.push(`session ${s.session_id}: no decisions`)
    else {
      if (s.decision_count !== s.n) problems.push(`session ${s.session_id}: decision_count ${s.decision_count} ≠ ${s.n}`)
      if (s.error_count !== s.errors) problems.push(`session ${s.session_id}: error_count ${s.error_count} ≠ ${s.errors}`)
      if (!close(s.total_cost_usd, s.cost)) problems.push(`session ${s.session_id}: cost ${s.total_cost_usd} ≠ ${s.cost}`)
      if (s.total_tokens !== s.tokens) problems.push(`session ${s.session_id}: tokens ${s.total_tokens} ≠ ${s.tokens}`)
      if (s.started_at.getTime() !== s.first.getTime()) problems.push(`session ${s.session_id}: started_at ${s.started_at.toISOString()} ≠ ${s.first.toISOString()}`)
      if (s.ended_at.getTime() !== s.last.getTime()) problems.push(`session ${s.session_id}: ended_at ${s.ended_at.toISOString()} ≠ ${s.last.toISOString()}`)
    }
  }
  const agents = yield* sql<{
    agent_id: string
    stored: boolean
    counted: boolean
    decision_count: number
    n: number
    session_count: number
    sessions: number
    error_count: number
    errors: number
    total_cost_usd: number
    cost: number
    total_tokens: number
    tokens: number
    confidence_sum: number
    confidence: number
    first_seen_at: Date
    first: Date
    last_seen_at: Date
    last: Date
  }>`
    SELECT COALESCE(a.agent_id, d.agent_id) AS agent_id, a.agent_id IS NOT NULL AS stored, d.agent_id IS NOT NULL AS counted,
      a.decision_count::float8 AS decision_count, d.n, a.session_count::float8 AS session_count, d.sessions,
      a.error_count::float8 AS error_count, d.errors, a.total_cost_usd, d.cost, a.total_tokens::float8 AS total_tokens,
      d.tokens, a.confidence_sum, d.confidence, a.first_seen_at, d.first, a.last_seen_at, d.last
    FROM agents a FULL JOIN (
      SELECT tenant_id, workspace_id, agent_id, count(*)::float8 AS n, count(DISTINCT session_id)::float8 AS sessions,
        (count(*) FILTER (WHERE outcome = 'error'))::float8 AS errors, COALESCE(sum(cost_usd), 0) AS cost,
        COALESCE(sum((usage->>'total_tokens')::float8), 0) AS tokens, sum(confidence) AS confidence,
        min(created_at) AS first, max(created_at + latency_ms * interval '1 millisecond') AS last
      FROM decisions GROUP BY tenant_id, workspace_id, agent_id
    ) d ON d.tenant_id = a.tenant_id AND d.workspace_id = a.workspace_id AND d.agent_id = a.agent_id`
  for (const a of agents) {
    if (!a.stored) problems.push(`agent ${a.agent_id}: decisions without an agent row`)
    else if (!a.counted) problems.push(`agent ${a.agent_id}: no decisions`)
    else {
      if (a.decision_count !== a.n) problems.push(`agent ${a.agent_id}: decision_count ${a.decision_count} ≠ ${a.n}`)
      if (a.session_count !== a.sessions) problems.push(`agent ${a.agent_id}: session_count ${a.session_count} ≠ ${a.sessions}`)
      if (a.error_count !== a.errors) problems.push(`agent ${a.agent_id}: error_count ${a.error_count} ≠ ${a.errors}`)
      if (!close(a.total_cost_usd, a.cost)) problems.push(`agent ${a.agent_id}: cost ${a.total_cost_usd} ≠ ${a.cost}`)
      if (a.total_tokens !== a.tokens) problems.push(`agent ${a.agent_id}: tokens ${a.total_tokens} ≠ ${a.tokens}`)
      if (!close(a.confidence_sum, a.confidence)) problems.push(`agent ${a.agent_id}: confidence_sum ${a.confidence_sum} ≠ ${a.confidence}`)
      if (a.first_seen_at.getTime() !== a.first.getTime()) problems.push(`agent ${a.agent_id}: first_seen_at differs`)
      if (a.last_seen_at.getTime() !== a.last.getTime()) problems.push(`agent ${a.agent_id}: last_seen_at differs`)
    }
  }
  return problems
})

/** The sessions of an agent as sets of ledger ids, in a canonical order (to compare partitions). */
export const sessionPartition = (agentId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ session_id: string; ledger_id: string }>`
      SELECT session_id, ledger_id FROM decisions WHERE agent_id = ${agentId} ORDER BY created_at, ledger_id`
    const groups = new Map<string, Array<string>>()
    for (const row of rows) groups.set(row.session_id, [...(groups.get(row.session_id) ?? []), row.ledger_id])
    return [...groups.values()].map((ids) => ids.join(",")).sort()
  })

// --- builder processes (`node bin/ledger.js serve --roles builder`), as operators run them

const ROOT = Path.resolve(import.meta.dirname, "../..")
const LEDGER = Path.join(ROOT, "bin/ledger.js")

/** The environment of a ledger process on the given settings' database and stream. */
export const ledgerEnv = (settings: LedgerSettings, overrides: Record<string, string> = {}): Record<string, string> => ({
  ...Option.match(settings.databaseUrl, { onNone: () => ({}), onSome: (url) => ({ DATABASE_URL: Redacted.value(url) }) }),
  ...Option.match(settings.redisUrl, { onNone: () => ({}), onSome: (url) => ({ REDIS_URL: Redacted.value(url) }) }),
  ...(settings.redisCluster.length === 0 ? {} : { LEDGER_REDIS_CLUSTER: settings.redisCluster.map(Redacted.value).join(",") }),
  LEDGER_STREAM_KEY: settings.streamKey,
  LEDGER_STREAM_GROUP: settings.streamGroup,
  LEDGER_LOG_LEVEL: "warn",
  ...overrides
})

export interface BuilderProcess {
  readonly pid: number
  /** the process's ops port (/readyz, /metrics) */
  readonly port: number
  /** what it wrote to stderr so far (its JSON logs) */
  readonly logs: () => string
  readonly exited: () => boolean
  /** Sends the signal and waits for the process to exit. */
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  /**
   * Kills it (SIGKILL) while it holds delivered, unacknowledged captures — `pending` counts them — and answers how
   * many it left. It is stopped (SIGSTOP) before each look, so it cannot acknowledge between the look and the kill.
   */
  readonly killHolding: <E, R>(pending: Effect.Effect<number, E, R>) => Effect.Effect<number, E, R>
  /** A sample of its /metrics without labels (undefined when absent). */
  readonly metric: (name: string) => Effect.Effect<number | undefined>
}

/** Starts a builder process and waits until it is ready; stopped with the scope. */
export const spawnBuilder = (env: Record<string, string>) =>
  Effect.acquireRelease(
    spawnOnFreePorts(1, async ([port]): Promise<BuilderProcess> => {
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-builder-"))
      const child = ChildProcess.spawn(process.execPath, [LEDGER, "serve", "--roles", "builder"], {
        cwd: ROOT,
        env: { ...process.env, ...env, LEDGER_API_PORT: String(port), LEDGER_DATA_DIR: dataDir },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let logs = ""
      child.stderr!.on("data", (chunk: Buffer) => {
        logs = (logs + chunk.toString()).slice(-200_000)
      })
      const exit = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      const process_: BuilderProcess = {
        pid: child.pid!,
        port,
        logs: () => logs,
        exited: () => child.exitCode !== null || child.signalCode !== null,
        kill: (signal) =>
          Effect.promise(async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal)
            await exit
            Fs.rmSync(dataDir, { recursive: true, force: true })
          }),
        killHolding: (pending) =>
          Effect.gen(function*() {
            let held = 0
            yield* eventually("the builder holding a batch", Effect.gen(function*() {
              child.kill("SIGSTOP")
              // a failed look leaves it running (a stopped process would not stop on the scope's SIGTERM)
              held = yield* pending.pipe(Effect.tapCause(() => Effect.sync(() => child.kill("SIGCONT"))))
              if (held === 0) child.kill("SIGCONT")
              return held > 0
            }), 30)
            yield* process_.kill("SIGKILL")
            return held
          }),
        metric: (name) =>
          Effect.promise(async () => {
            const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => "")
            const line = text.split("\n").find((l) => l.startsWith(`${name} `))
            return line === undefined ? undefined : Number(line.split(" ")[1])
          })
      }
      for (let i = 0; i < 300; i++) {
        if (process_.exited()) {
          Fs.rmSync(dataDir, { recursive: true, force: true })
          throw new Error(`builder exited at start:\n${logs}`)
        }
        if (await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)) return process_
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await Effect.runPromise(process_.kill("SIGKILL"))
      throw new Error(`builder not ready after 30 s:\n${logs}`)
    }),
    (builder) => builder.kill("SIGTERM")
  )

/** Runs a `ledger` command to completion (the CLI as operators use it). */
export const runLedger = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
      const child = ChildProcess.spawn(process.execPath, [LEDGER, ...args], { cwd: ROOT, env: { ...process.env, ...env } })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      child.once("exit", (code) => resolve({ code, stdout, stderr }))
    })
  )

export const decisionCount = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM decisions`
  return row!.n
})
