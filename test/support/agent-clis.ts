/**
 * The real agent clients, run headless through the gateway: Claude Code (`claude -p`) and Codex (`codex exec`), from
 * the test-only install in test/tools (test/support/global-setup.ts), each with a fresh HOME so runs share nothing.
 */
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Effect } from "effect"

const BIN = Path.resolve(import.meta.dirname, "../tools/node_modules/.bin")

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string>, cwd: string) =>
  Effect.callback<Run>((resume) => {
    const child = execFile(command, [...args], {
      cwd,
      env: { PATH: process.env.PATH ?? "", ...env },
      timeout: 90_000,
      maxBuffer: 16 * 1024 * 1024
    }, (error, stdout, stderr) => resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })))
    child.stdin?.end()
  })

const freshHome = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-agent-home-"))),
  (home) => Effect.sync(() => Fs.rmSync(home, { recursive: true, force: true }))
)

export interface ClaudeOptions {
  readonly gatewayUrl: string
  readonly gatewayKey: string
  readonly providerKey: string
  /** more `Name: value` headers for ANTHROPIC_CUSTOM_HEADERS */
  readonly headers?: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
}

/** `claude -p PROMPT --output-format json` with the gateway as its Anthropic base URL. */
export const runClaude = (prompt: string, options: ClaudeOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const home = yield* freshHome
    return yield* run(Path.join(BIN, "claude"), ["-p", prompt, "--output-format", "json", ...(options.args ?? [])], {
      HOME: home,
      ANTHROPIC_BASE_URL: options.gatewayUrl,
      ANTHROPIC_AUTH_TOKEN: options.gatewayKey,
      ANTHROPIC_CUSTOM_HEADERS: [`x-service-provider-api-key: ${options.providerKey}`, ...(options.headers ?? [])].join("\n"),
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1"
    }, home)
  }))

export interface CodexOptions {
  readonly gatewayUrl: string
  readonly gatewayKey: string
  readonly providerKey: string
  readonly model: string
  /** Codex's WebSocket transport for the provider (`supports_websockets`) */
  readonly websockets?: boolean
}

/** `codex exec PROMPT` with a custom provider (`wire_api = "responses"`) at the gateway. */
export const runCodex = (prompt: string, options: CodexOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const home = yield* freshHome
    Fs.mkdirSync(Path.join(home, ".codex"))
    Fs.mkdirSync(Path.join(home, "work"))
    Fs.writeFileSync(Path.join(home, ".codex", "config.toml"), [
      `model = ${JSON.stringify(options.model)}`,
      `model_provider = "ledger"`,
      ``,
      `[model_providers.ledger]`,
      `name = "Agent Decision Ledger"`,
      `base_url = ${JSON.stringify(`${options.gatewayUrl}/v1`)}`,
      `env_key = "LEDGER_GATEWAY_KEY"`,
      `wire_api = "responses"`,
      ...(options.websockets ? [`supports_websockets = true`] : []),
      `http_headers = { "x-service-provider-api-key" = ${JSON.stringify(options.providerKey)} }`
    ].join("\n"))
    return yield* run(Path.join(BIN, "codex"), ["exec", "--skip-git-repo-check", prompt], {
      HOME: home,
      LEDGER_GATEWAY_KEY: options.gatewayKey
    }, Path.join(home, "work"))
  }))
