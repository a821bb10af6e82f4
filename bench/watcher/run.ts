/**
 * The watcher's costs: how fast `ledger watch --once` imports a large transcript history, and what `ledger watch`
 * takes while the transcripts are quiet.
 *
 *   npx node bench/watcher/run.ts [--claude-sessions 200] [--codex-sessions 100] [--exchanges 20] [--idle 60]
 *
 * A HOME of its own gets Claude Code and Codex sessions written as the clients write them (test/support/transcripts.ts:
 * each exchange a prompt, a shell command and its output, an answer; every request the whole conversation before
 * it). A `ledger serve` deployment (bench/serve/deployment.ts, the default process: gateway, builders and API) takes
 * the turns. Measured: the `--once` run's wall time and CPU (turns/s sent and accepted), the time until every turn
 * is a decision, then `ledger watch` following the same, now quiet, history for `--idle` seconds: its CPU and
 * resident memory.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { createClient, type RedisClientType } from "redis"
import { claudeSession, codexSession, type Exchange, writeTranscript } from "../../test/support/transcripts.ts"
import { option, processCpu, ROOT, startChild, stopChildren } from "../gateway/harness.ts"
import { deploy, LAYOUTS, progress, REDIS_URL } from "../serve/deployment.ts"

const CLAUDE_SESSIONS = Number(option("claude-sessions", "200"))
const CODEX_SESSIONS = Number(option("codex-sessions", "100"))
const EXCHANGES = Number(option("exchanges", "20"))
const IDLE_S = Number(option("idle", "60"))

const exchanges = (session: number): ReadonlyArray<Exchange> =>
  Array.from({ length: EXCHANGES }, (_, n) => ({
    prompt: `Session ${session}, step ${n}: look at src/module-${n}.ts and tell me why the retry in PAY-${100 + n} fails.`,
    command: { run: `grep -n retry src/module-${n}.ts`, output: Array.from({ length: 20 }, (_, line) => `${line + 1}: retry(${line}) // attempt`).join("\n") },
    answer: `The retry in PAY-${100 + n} gives up after one attempt because the backoff is computed before the first failure. ${"Details follow. ".repeat(20)}`
  }))

/** Writes the history; returns the number of model turns in it. */
const writeHistory = (home: string): number => {
  const start = Date.now() - 7 * 24 * 3_600_000
  let turns = 0
  for (let i = 0; i < CLAUDE_SESSIONS; i++) {
    const session = claudeSession({ cwd: `/home/dev/project-${i % 7}`, start: start + i * 600_000, exchanges: exchanges(i) })
    writeTranscript(home, "claude-code", session)
    turns += session.messageIds.length
  }
  for (let i = 0; i < CODEX_SESSIONS; i++) {
    const session = codexSession({ cwd: `/home/dev/project-${i % 5}`, start: start + i * 600_000, exchanges: exchanges(i) })
    writeTranscript(home, "codex", session)
    turns += session.responseIds.length
  }
  return turns
}

const bytesUnder = (dir: string): number =>
  Fs.readdirSync(dir, { withFileTypes: true, recursive: true }).reduce((sum, entry) =>
    entry.isFile() ? sum + Fs.statSync(Path.join(entry.parentPath, entry.name)).size : sum, 0)

const rssMb = (pid: number | undefined): number => {
  const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
  return Number(line?.split(/\s+/)[1] ?? Number.NaN) / 1024
}

const watchArgs = (home: string, state: string) => [
  Path.join(ROOT, "bin/ledger.js"), "watch", "--json",
  "--claude", Path.join(home, ".claude", "projects"), "--codex", Path.join(home, ".codex", "sessions"), "--state", state
]

const main = async () => {
  const redis = (await createClient({ url: REDIS_URL }).connect()) as RedisClientType
  const fake = await startChild(["bench/gateway/fake-provider.ts"], process.env)
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-bench-watch-"))
  const state = Path.join(home, "watch-state.json")
  const deployment = await deploy({ name: "watcher", layout: LAYOUTS.thread!, fakeUrl: JSON.parse(fake.line).url, redis })
  const env = { ...process.env, LEDGER_GATEWAY_URL: deployment.gatewayUrl, LEDGER_GATEWAY_KEY: deployment.gatewayKey, LEDGER_LOG_LEVEL: "warn" }
  try {
    progress("writing the history")
    const turns = writeHistory(home)
    const files = CLAUDE_SESSIONS + CODEX_SESSIONS
    const historyMb = bytesUnder(home) / 1024 / 1024

    progress(`ledger watch --once over ${turns} turns in ${files} files (${historyMb.toFixed(0)} MB)`)
    const started = performance.now()
    const once = await new Promise<{ stdout: string; cpu: number }>((resolve, reject) => {
      const child: ChildProcess = execFile(process.execPath, watchArgs(home, state).toSpliced(2, 0, "--once"), { env, maxBuffer: 1 << 24 }, (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`${error.message}\n${stderr}`))
        else resolve({ stdout, cpu })
      })
      let cpu = 0
      const sample = setInterval(() => (cpu = processCpu(child.pid) ?? cpu), 100)
      child.once("exit", () => clearInterval(sample))
    })
    const onceSeconds = (performance.now() - started) / 1000
    const summary = JSON.parse(once.stdout.trim().split("\n").at(-1)!) as { accepted: number; rejected: number }
    let decisions = await deployment.decisions()
    while (decisions < summary.accepted) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      decisions = await deployment.decisions()
    }
    const builtSeconds = (performance.now() - started) / 1000

    progress(`ledger watch following the quiet history for ${IDLE_S} s`)
    const follower = spawn(process.execPath, watchArgs(home, state), { env, stdio: "ignore" })
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    const cpuBefore = processCpu(follower.pid) ?? Number.NaN
    const rss: Array<number> = []
    for (let s = 0; s < IDLE_S; s += 5) {
      await new Promise((resolve) => setTimeout(resolve, 5_000))
      rss.push(rssMb(follower.pid))
    }
    const idleCpu = ((processCpu(follower.pid) ?? Number.NaN) - cpuBefore) / IDLE_S
    follower.kill("SIGTERM")

    console.log([
      `ledger watch, ${Os.cpus().length} CPUs (${Os.cpus()[0]?.model ?? "?"}), node ${process.version}; the default ledger serve on the same machine`,
      "",
      `history: ${files} transcripts (${CLAUDE_SESSIONS} Claude Code, ${CODEX_SESSIONS} Codex), ${turns} model turns, ${historyMb.toFixed(1)} MB`,
      `--once: ${summary.accepted} accepted, ${summary.rejected} refused in ${onceSeconds.toFixed(1)} s — ${(summary.accepted / onceSeconds).toFixed(0)} turns/s; ` +
      `the watcher's CPU ${once.cpu.toFixed(1)} s (${((once.cpu / onceSeconds) * 100).toFixed(0)} % of a core)`,
      `every turn a decision after ${builtSeconds.toFixed(1)} s — ${(turns / builtSeconds).toFixed(0)} turns/s end to end`,
      `following the quiet history (${IDLE_S} s): CPU ${(idleCpu * 1000).toFixed(1)} ms/s (${(idleCpu * 100).toFixed(2)} % of a core), ` +
      `RSS ${Math.min(...rss).toFixed(0)}–${Math.max(...rss).toFixed(0)} MB`
    ].join("\n"))
  } finally {
    await deployment.remove()
    await stopChildren()
    redis.destroy()
    Fs.rmSync(home, { recursive: true, force: true })
  }
}

await main()
