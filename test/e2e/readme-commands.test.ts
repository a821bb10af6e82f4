/**
 * The commands in the docs run (docs/testing.md, "The commands in the docs"). Every fenced block marked `sh` in
 * README.md, CHANGELOG.md and docs/*.md runs in bash against a real `ledger serve`, in order per file, as a reader
 * would paste them into one shell: each block must exit 0. README.md's blocks run against a fresh embedded serve
 * (what `npm start` runs), whose data directory is `.ledger` in the blocks' working directory; the other files' blocks
 * against a serve on the test PostgreSQL and Redis, with the keys of the README's first-run user already set. The
 * model providers are the local fakes; nothing reaches the internet.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { testDatabase } from "../support/db.ts"
import { TEST_REDIS_URL } from "../support/redis.ts"
import { type ServeProcess, serveProcess } from "../support/serve-process.ts"

const ROOT = Path.resolve(import.meta.dirname, "../..")
const DOCUMENTS = [
  "README.md",
  "CHANGELOG.md",
  ...Fs.readdirSync(Path.join(ROOT, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]
const README_MAX_BYTES = 12_288
/** info strings that leave it unclear whether a block is run: a shell block is `sh` (run) or `console` (not run) */
const AMBIGUOUS = new Set(["", "bash", "shell", "zsh", "shell-session", "sh-session"])

interface Block {
  readonly file: string
  /** the line of its opening fence */
  readonly line: number
  readonly info: string
  readonly code: string
}

/** The fenced code blocks of a Markdown file (``` or ~~~ fences, indented ones included). */
const blocksOf = (file: string): ReadonlyArray<Block> => {
  const lines = Fs.readFileSync(Path.join(ROOT, file), "utf8").split("\n")
  const blocks: Array<Block> = []
  let open: { line: number; info: string; fence: string; indent: number; body: Array<string> } | undefined
  lines.forEach((text, index) => {
    const fence = /^( *)(`{3,}|~{3,})(.*)$/.exec(text)
    if (open === undefined) {
      if (fence !== null) open = { line: index + 1, info: fence[3]!.trim().split(/\s+/)[0] ?? "", fence: fence[2]!, indent: fence[1]!.length, body: [] }
    } else if (fence !== null && fence[2]![0] === open.fence[0] && fence[2]!.length >= open.fence.length && fence[3]!.trim() === "") {
      blocks.push({ file, line: open.line, info: open.info, code: open.body.join("\n") })
      open = undefined
    } else {
      const indent = Math.min(open.indent, /^ */.exec(text)![0].length)
      open.body.push(text.slice(indent))
    }
  })
  assert.isUndefined(open, `${file}:${open?.line}: a code fence is never closed`)
  return blocks
}

const runnable = (file: string) => blocksOf(file).filter((block) => block.info === "sh")

/** A scratch directory inside the repository (so that `npx ledger` finds this package), removed with the scope. */
const scratchDir = Effect.acquireRelease(
  Effect.sync(() => {
    const artifacts = Path.join(ROOT, "test/artifacts")
    Fs.mkdirSync(artifacts, { recursive: true })
    return Fs.mkdtempSync(Path.join(artifacts, "doc-commands-"))
  }),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/**
 * The environment of a reader's fresh shell: this process's, without the service's settings, npm's script variables
 * or node_modules/.bin on PATH (a reader's `node` is their system Node; `npx` and `npm` find the pinned one). HOME is
 * a scratch directory, so `ledger watch` reads no real transcripts; npm stays offline and checks for no update.
 */
const readerEnv = (home: string, settings: Record<string, string>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (name.startsWith("LEDGER_") || name.startsWith("npm_") || name.startsWith("NPM_CONFIG_")) continue
    if (["DATABASE_URL", "DATABASE_READ_URL", "REDIS_URL", "INIT_CWD", "NODE", "NODE_OPTIONS"].includes(name)) continue
    env[name] = value
  }
  env.PATH = (process.env.PATH ?? "").split(Path.delimiter)
    .filter((dir) => !dir.includes(`node_modules${Path.sep}.bin`) && !dir.includes("node-gyp-bin"))
    .join(Path.delimiter)
  return {
    ...env,
    HOME: home,
    NPM_CONFIG_OFFLINE: "true",
    NPM_CONFIG_UPDATE_NOTIFIER: "false",
    NPM_CONFIG_FUND: "false",
    NPM_CONFIG_AUDIT: "false",
    // the fake providers take any key
    OPENAI_API_KEY: "sk-test-openai",
    ANTHROPIC_API_KEY: "sk-ant-test",
    ...settings
  }
}

/** The ports and URLs of a running serve, as the reader's shell names them. */
const serviceSettings = (serve: ServeProcess): Record<string, string> => ({
  LEDGER_GATEWAY_URL: serve.gatewayUrl,
  LEDGER_API_URL: serve.apiUrl,
  LEDGER_GATEWAY_PORT: new URL(serve.gatewayUrl).port,
  LEDGER_API_PORT: new URL(serve.apiUrl).port
})

const SHELL_OWN = new Set(["PWD", "OLDPWD", "SHLVL", "_"])

/** Exported variables carry from one block to the next, as in one shell; env -0 keeps any value intact. */
const readEnv = (file: string): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const entry of Fs.readFileSync(file, "utf8").split("\0")) {
    const eq = entry.indexOf("=")
    if (eq > 0 && !SHELL_OWN.has(entry.slice(0, eq))) env[entry.slice(0, eq)] = entry.slice(eq + 1)
  }
  return env
}

const tail = (text: string, chars = 4_000) => (text.length > chars ? `…${text.slice(-chars)}` : text)

/** Runs one file's `sh` blocks in order in `cwd`: each must exit 0. */
const runDocument = (file: string, cwd: string, startEnv: Record<string, string>, serve: ServeProcess) =>
  Effect.gen(function*() {
    const blocks = runnable(file)
    let env = startEnv
    const stateFile = Path.join(Os.tmpdir(), `doc-commands-env-${process.pid}-${Date.now()}`)
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(stateFile, { force: true })))
    for (const block of blocks) {
      const script = `set -euo pipefail\n${block.code}\nenv -0 > "$DOC_COMMANDS_STATE"\n`
      const result = yield* Effect.callback<{ code: number; stdout: string; stderr: string }>((resume) => {
        execFile("bash", ["-c", script], { cwd, env: { ...env, DOC_COMMANDS_STATE: stateFile }, timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
          resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })))
      })
      assert.strictEqual(
        result.code,
        0,
        `${block.file}:${block.line}: the sh block exited ${result.code}\n--- block ---\n${block.code}\n--- stdout ---\n${tail(result.stdout)}\n--- stderr ---\n${
          tail(result.stderr)
        }\n--- ledger serve ---\n${tail(serve.output(), 3_000)}`
      )
      const { DOC_COMMANDS_STATE: _, ...next } = readEnv(stateFile)
      env = next
    }
    return { blocks: blocks.length, env }
  }).pipe(Effect.scoped)

describe("the docs' code blocks", () => {
  it("every fence says whether it runs; README.md stays short", () => {
    for (const file of DOCUMENTS) {
      for (const block of blocksOf(file)) {
        assert.isFalse(
          AMBIGUOUS.has(block.info),
          `${file}:${block.line}: fence with info string "${block.info}": mark commands \`sh\` (run by this test) or \`console\` (not run), output \`text\``
        )
      }
    }
    const size = Fs.statSync(Path.join(ROOT, "README.md")).size
    assert.isAtMost(size, README_MAX_BYTES, `README.md is ${size} bytes; move detail into docs/`)
  })

  it("docs/configuration.md names every setting LedgerConfig reads", () => {
    const source = Fs.readFileSync(Path.join(ROOT, "src/config/LedgerConfig.ts"), "utf8")
    const names = new Set([...source.matchAll(/Config\.\w+\("([A-Z][A-Z0-9_]*)"/g)].map((match) => match[1]!))
    assert.isAbove(names.size, 40)
    const doc = Fs.readFileSync(Path.join(ROOT, "docs/configuration.md"), "utf8")
    for (const name of names) assert.include(doc, `\`${name}\``, `docs/configuration.md: ${name}`)
  })
})

describe("README.md's commands against a fresh embedded ledger serve", () => {
  it.live("every sh block exits 0, and the README's call is a decision over REST", () =>
    Effect.gen(function*() {
      const cwd = yield* scratchDir
      const home = yield* scratchDir
      // the embedded default: no database or Redis, the data directory `.ledger` where the reader runs commands
      const serve = yield* serveProcess({ dataDir: Path.join(cwd, ".ledger") })
      const { blocks } = yield* runDocument("README.md", cwd, readerEnv(home, serviceSettings(serve)), serve)
      assert.isAtLeast(blocks, 4, "the README's first call, REST, status")

      const credentials = JSON.parse(Fs.readFileSync(Path.join(cwd, ".ledger/credentials.json"), "utf8")) as { pat: string }
      const decisions = yield* Effect.promise(async () => {
        const response = await fetch(`${serve.apiUrl}/v1/decisions?agent_id=hello-agent`, { headers: { authorization: `Bearer ${credentials.pat}` } })
        return ((await response.json()) as { data?: ReadonlyArray<{ agent_id: string }> }).data ?? []
      }).pipe(
        Effect.filterOrFail((data) => data.length > 0, () => "not built yet"),
        Effect.retry({ schedule: Schedule.spaced("250 millis"), times: 80 }),
        Effect.orDie
      )
      assert.strictEqual(decisions[0]!.agent_id, "hello-agent")
    }).pipe(Effect.scoped), 240_000)
})

class DocsServe extends Context.Service<DocsServe, { readonly serve: ServeProcess; readonly settings: Record<string, string> }>()(
  "test/DocsServe"
) {}

/** `ledger serve` on the test PostgreSQL and Redis, with the README's first-run user (admin@localhost in default). */
const DocsServeLive = Layer.effect(
  DocsServe,
  Effect.gen(function*() {
    const database = yield* testDatabase
    const serve = yield* serveProcess({ databaseUrl: database.url, redisUrl: TEST_REDIS_URL })
    const firstRun = JSON.parse(
      yield* serve.ledger(["admin", "bootstrap", "--tenant", "default", "--workspace", "default", "--email", "admin@localhost", "--json"])
    ) as { gateway_key: string; pat: string }
    const settings = {
      ...serviceSettings(serve),
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      LEDGER_STREAM_KEY: serve.streamKey,
      LEDGER_DATA_DIR: serve.dataDir,
      LEDGER_GATEWAY_KEY: firstRun.gateway_key,
      LEDGER_PAT: firstRun.pat
    }
    return { serve, settings }
  })
)

describe("the commands of CHANGELOG.md and docs/*.md against ledger serve on PostgreSQL and Redis", () => {
  layer(DocsServeLive, { timeout: 240_000, excludeTestServices: true })((it) => {
    for (const file of DOCUMENTS.filter((name) => name !== "README.md" && runnable(name).length > 0)) {
      it.effect(`${file}: ${runnable(file).length} sh block(s) exit 0`, () =>
        Effect.gen(function*() {
          const { serve, settings } = yield* DocsServe
          const cwd = yield* scratchDir
          const home = yield* scratchDir
          yield* runDocument(file, cwd, readerEnv(home, settings), serve)
        }).pipe(Effect.scoped), 240_000)
    }
  })
})
