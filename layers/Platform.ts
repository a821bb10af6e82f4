/**
 * Process-wide services: configuration and structured JSON logs (to stderr, so `--json` output on stdout
 * stays machine-readable).
 */
import { Effect, Layer, Logger, References } from "effect"
import type { LogLevel } from "effect/LogLevel"
import { LedgerConfig } from "../src/config/LedgerConfig.ts"

const LEVELS: Record<string, LogLevel> = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  warning: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
}

/**
 * JSON lines to stderr, written in batches: stderr is a pipe under supervisors and containers, and Node writes to
 * pipes synchronously, so a write per line (an access log line per request) cost the API ~30 % of its throughput.
 * A line waits at most the window; what is buffered is written when the logger's scope closes (shutdown).
 */
const JsonLinesToStderr = Logger.batched(Logger.formatJson, {
  window: "25 millis",
  flush: (lines) => Effect.sync(() => void process.stderr.write(`${lines.join("\n")}\n`))
})

const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* LedgerConfig
  return Layer.mergeAll(
    Logger.layer([JsonLinesToStderr]),
    Layer.succeed(References.MinimumLogLevel, LEVELS[config.logLevel.toLowerCase()] ?? "Info")
  )
}))

export const PlatformLive = LoggingLive.pipe(Layer.provideMerge(LedgerConfig.layer))
