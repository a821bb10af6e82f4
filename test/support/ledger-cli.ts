/**
 * The `ledger` command line as a user runs it: `node bin/ledger.js …` in a process of its own, with the environment
 * of a fresh shell (no database, Redis or gateway configured unless given); an embedded `ledger serve` beside it.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Path from "node:path"
import { spawnOnFreePorts } from "./ports.ts"

export const LEDGER_BIN = Path.resolve(import.meta.dirname, "../../bin/ledger.js")

/** The environment of a fresh shell: no database or Redis configured unless given. */
export const cleanEnv = (extra: Record<string, string>) => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("LEDGER_") && k !== "DATABASE_URL" && k !== "REDIS_URL") env[k] = v
  }
  return { ...env, LEDGER_LOG_LEVEL: "warn", ...extra }
}

/** Runs `ledger ARGS` to its end. */
export const ledger = (args: ReadonlyArray<string>, env: Record<string, string>, timeoutMs = 60_000) =>
  Effect.callback<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(process.execPath, [LEDGER_BIN, ...args], { env: cleanEnv(env), timeout: timeoutMs }, (error, stdout, stderr) => {
      resume(Effect.succeed({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }))
    })
  })

/** Whether `url` answers 2xx within 3 s. */
export const healthy = (url: string) =>
  Effect.promise(() => fetch(url, { signal: AbortSignal.timeout(3_000) }).then((r) => r.ok, () => false))

/** Signs in with a one-time link's token twice: the statuses of the two attempts. */
export const signInTwice = (link: string) =>
  Effect.promise(async () => {
    const page = await fetch(link)
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!
    const cookie = page.headers.getSetCookie()[0]!.split(";")[0]!
    const token = new URL(link).searchParams.get("token")!
    const signIn = () =>
      fetch(new URL("/signin/link", link), {
        method: "POST",
        redirect: "manual",
        headers: { cookie, origin: new URL(link).origin, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ csrf, token }).toString()
      }).then((response) => {
        if (response.status === 303) assert.strictEqual(response.headers.get("location"), "/account/password")
        return response.status
      })
    return [await signIn(), await signIn()]
  })

/** `ledger serve` with nothing configured (embedded database, in-process stream) on `dataDir`, killed with the scope. */
export const embeddedServe = (dataDir: string) =>
  Effect.acquireRelease(
    spawnOnFreePorts(2, async ([apiPort, gatewayPort]) => {
      const started = Date.now()
      const child = spawn(process.execPath, [LEDGER_BIN, "serve"], {
        env: cleanEnv({ LEDGER_DATA_DIR: dataDir, LEDGER_API_PORT: String(apiPort), LEDGER_GATEWAY_PORT: String(gatewayPort) }),
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (d) => (output += d))
      child.stderr.on("data", (d) => (output += d))
      const up = (port: number) => Effect.runPromise(healthy(`http://127.0.0.1:${port}/healthz`))
      while (!(await up(apiPort) && await up(gatewayPort))) {
        if (child.exitCode !== null) throw new Error(`ledger serve exited:\n${output}`)
        if (Date.now() - started > 30_000) {
          child.kill("SIGKILL")
          throw new Error(`not healthy on both ports within 30 s:\n${output}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      return { apiPort, apiUrl: `http://127.0.0.1:${apiPort}`, gatewayUrl: `http://127.0.0.1:${gatewayPort}`, child, output: () => output }
    }),
    ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
  )

export const exited = (child: ChildProcess) =>
  Effect.callback<number | null>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
  })
