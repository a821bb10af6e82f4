/**
 * The real agent clients, run headless through the gateway or straight at a fake provider: Claude Code (`claude -p`)
 * and Codex (`codex exec`), from the test-only install in test/tools (test/support/global-setup.ts), each with a
 * fresh HOME so runs share nothing — or with a HOME the test keeps, to read the transcripts they write.
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

/** Where a client sends its calls: through the gateway (with the caller's provider key), or straight to a provider. */
export type Destination =
  | { readonly gatewayUrl: string; readonly gatewayKey: string; readonly providerKey: string }
  | { readonly providerUrl: string; readonly providerKey: string }

const throughGateway = (to: Destination): to is Extract<Destination, { gatewayUrl: string }> => "gatewayUrl" in to

/** A HOME for one run, or the one the test keeps (whose transcripts it reads afterwards). */
const homeFor = (home: string | undefined) => (home === undefined ? freshHome : Effect.succeed(home))

export type ClaudeOptions = Destination & {
  /** more `Name: value` headers for ANTHROPIC_CUSTOM_HEADERS */
  readonly headers?: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
  /** a HOME of the test's own, kept after the run (default: a fresh one, removed after) */
  readonly home?: string
}

/** `claude -p PROMPT --output-format json`, with the gateway (or a provider) as its Anthropic base URL. */
export const runClaude = (prompt: string, options: ClaudeOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const home = yield* homeFor(options.home)
    const to: Record<string, string> = throughGateway(options)
      ? {
        ANTHROPIC_BASE_URL: options.gatewayUrl,
        ANTHROPIC_AUTH_TOKEN: options.gatewayKey,
        ANTHROPIC_CUSTOM_HEADERS: [`x-service-provider-api-key: ${options.providerKey}`, ...(options.headers ?? [])].join("\n")
      }
      : { ANTHROPIC_BASE_URL: options.providerUrl, ANTHROPIC_API_KEY: options.providerKey, ANTHROPIC_CUSTOM_HEADERS: (options.headers ?? []).join("\n") }
    return yield* run(Path.join(BIN, "claude"), ["-p", prompt, "--output-format", "json", ...(options.args ?? [])], {
      HOME: home,
      ...to,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1"
    }, home)
  }))

export type CodexOptions = Destination & {
  readonly model: string
  /** Codex's WebSocket transport for the gateway (`supports_websockets`) */
  readonly websockets?: boolean
  /** a HOME of the test's own, kept after the run (default: a fresh one, removed after) */
  readonly home?: string
}

/**
 * `codex exec PROMPT`: through the gateway as a custom provider (`wire_api = "responses"`), or straight to a provider
 * as Codex's built-in OpenAI provider at another base URL (its WebSocket transport first, as people run it).
 */
export const runCodex = (prompt: string, options: CodexOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const home = yield* homeFor(options.home)
    Fs.mkdirSync(Path.join(home, ".codex"), { recursive: true })
    Fs.mkdirSync(Path.join(home, "work"), { recursive: true })
    Fs.writeFileSync(Path.join(home, ".codex", "config.toml"), [
      `model = ${JSON.stringify(options.model)}`,
      ...(throughGateway(options)
        ? [
          `model_provider = "ledger"`,
          ``,
          `[model_providers.ledger]`,
          `name = "Agent Decision Ledger"`,
          `base_url = ${JSON.stringify(`${options.gatewayUrl}/v1`)}`,
          `env_key = "LEDGER_GATEWAY_KEY"`,
          `wire_api = "responses"`,
          ...(options.websockets ? [`supports_websockets = true`] : []),
          `http_headers = { "x-service-provider-api-key" = ${JSON.stringify(options.providerKey)} }`
        ]
        : [`openai_base_url = ${JSON.stringify(options.providerUrl)}`])
    ].join("\n"))
    return yield* run(Path.join(BIN, "codex"), ["exec", "--skip-git-repo-check", prompt], {
      HOME: home,
      ...(throughGateway(options) ? { LEDGER_GATEWAY_KEY: options.gatewayKey } : { CODEX_API_KEY: options.providerKey })
    }, Path.join(home, "work"))
  }))
