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

const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* LedgerConfig
  return Layer.mergeAll(
    Logger.layer([Logger.withConsoleError(Logger.formatJson)]),
    Layer.succeed(References.MinimumLogLevel, LEVELS[config.logLevel.toLowerCase()] ?? "Info")
  )
}))

export const PlatformLive = LoggingLive.pipe(Layer.provideMerge(LedgerConfig.layer))
