/**
 * The `ledger` command line as a user runs it: `node bin/ledger.js …` in a process of its own, with the environment
 * of a fresh shell (no database, Redis or gateway configured unless given).
 */
import { execFile } from "node:child_process"
import * as Path from "node:path"
import { Effect } from "effect"

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
