/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, run as a child process on this Node)
 * against the real API server. Its server scenarios connect without credentials, so they go through a small
 * loopback proxy that adds the member's Personal Access Token and forwards everything else untouched — the Host
 * and Origin headers included, which is what the DNS-rebinding scenario probes.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { ApiStack } from "../support/api-stack.ts"
import { tempDir } from "../support/stack.ts"

const CLI = Path.resolve("node_modules/@modelcontextprotocol/conformance/dist/index.js")
const SCENARIOS = ["server-initialize", "ping", "tools-list", "logging-set-level", "dns-rebinding-protection"] as const

/** Forwards to `target`, adding `Authorization: Bearer <token>`; closed with the scope. */
const authProxy = (target: URL, token: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Http.Server>((resolve) => {
        const server = Http.createServer((incoming, outgoing) => {
          const upstream = Http.request({
            host: target.hostname,
            port: target.port,
            method: incoming.method,
            path: incoming.url,
            headers: { ...incoming.headers, authorization: `Bearer ${token}` }
          }, (response) => {
            outgoing.writeHead(response.statusCode ?? 502, response.headers)
            response.pipe(outgoing)
          })
          upstream.on("error", () => outgoing.destroy())
          incoming.pipe(upstream)
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

interface Run {
  readonly scenario: string
  readonly code: number
  readonly output: string
  readonly checks: ReadonlyArray<{ readonly id: string; readonly status: string; readonly errorMessage?: string }>
}

const runScenario = (url: string, scenario: string, cwd: string) =>
  Effect.promise(() =>
    new Promise<Run>((resolve) => {
      const args = [CLI, "server", "--url", url, "--scenario", scenario, "--output-dir", cwd]
      execFile(process.execPath, args, { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
        const checksFile = Fs.readdirSync(cwd, { recursive: true, encoding: "utf8" })
          .map((file) => Path.join(cwd, file))
          .find((file) => Path.basename(file) === "checks.json")
        resolve({
          scenario,
          code: error === null ? 0 : typeof error.code === "number" ? error.code : 1,
          output: stdout + stderr,
          checks: checksFile !== undefined && Fs.existsSync(checksFile) ? JSON.parse(Fs.readFileSync(checksFile, "utf8")) : []
        })
      })
    })
  )

describe("MCP conformance", () => {
  layer(ApiStack.layer(), { timeout: 180_000, excludeTestServices: true })("official server scenarios", (it) => {
    it.effect("server-initialize, ping, tools-list, logging-set-level and dns-rebinding-protection pass", () =>
      Effect.gen(function*() {
        const stack = yield* ApiStack
        const proxy = yield* authProxy(new URL(stack.baseUrl), stack.pat)
        const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`
        const cwd = yield* tempDir
        // each run in its own directory, where the CLI writes its checks
        const runs = yield* Effect.forEach(SCENARIOS, (scenario) =>
          Effect.suspend(() => {
            const dir = Path.join(cwd, scenario)
            Fs.mkdirSync(dir)
            return runScenario(url, scenario, dir)
          }), { concurrency: SCENARIOS.length })
        for (const run of runs) {
          assert.strictEqual(run.code, 0, `${run.scenario} exited ${run.code}:\n${run.output}`)
          assert.isAbove(run.checks.length, 0, `${run.scenario} recorded its checks:\n${run.output}`)
          for (const check of run.checks) {
            assert.strictEqual(check.status, "SUCCESS", `${run.scenario} / ${check.id}: ${check.errorMessage ?? ""}\n${run.output}`)
          }
        }
        assert.sameMembers(
          runs.find((run) => run.scenario === "dns-rebinding-protection")!.checks.map((check) => check.id),
          ["localhost-host-rebinding-rejected", "localhost-host-valid-accepted"]
        )
      }))
  })
})
