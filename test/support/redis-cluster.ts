/**
 * A Redis Cluster of a test's own: three `redis-server --cluster-enabled yes` nodes on loopback (the binary the
 * machine runs its Redis with), joined by `redis-cli --cluster create`, no replicas, no persistence. Ports stay below
 * 32768 and so do their cluster bus ports (port + 10000). Stopped, and its files removed, with `stop`.
 */
import { execFile, type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { promisify } from "node:util"

export interface RedisCluster {
  /** `redis://127.0.0.1:<port>` of each node */
  readonly urls: ReadonlyArray<string>
  readonly stop: () => Promise<void>
}

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** `count` ports from 20000–22767 whose bus ports are free too. */
const clusterPorts = async (count: number) => {
  const ports: Array<number> = []
  for (let attempt = 0; ports.length < count && attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 2_700)
    if (!ports.includes(port) && await isFree(port) && await isFree(port + 10_000)) ports.push(port)
  }
  if (ports.length < count) throw new Error("no free ports for a Redis Cluster below 32768")
  return ports
}

const cli = promisify(execFile)

export const startRedisCluster = async (): Promise<RedisCluster> => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ledger-redis-cluster-"))
  const ports = await clusterPorts(3)
  const servers: Array<ChildProcess> = ports.map((port) =>
    spawn("redis-server", [
      "--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--cluster-enabled", "yes",
      "--cluster-config-file", `nodes-${port}.conf`, "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
      "--protected-mode", "no"
    ], { stdio: "ignore" })
  )
  const stop = async () => {
    await Promise.all(servers.map((server) =>
      server.exitCode !== null ? Promise.resolve() : new Promise<void>((resolve) => {
        server.once("exit", () => resolve())
        server.kill("SIGKILL")
      })
    ))
    Fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    for (const port of ports) {
      const deadline = Date.now() + 10_000
      while ((await cli("redis-cli", ["-p", String(port), "ping"]).catch(() => ({ stdout: "" }))).stdout.trim() !== "PONG") {
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
    await cli("redis-cli", ["--cluster", "create", ...ports.map((port) => `127.0.0.1:${port}`), "--cluster-replicas", "0", "--cluster-yes"])
    const deadline = Date.now() + 20_000
    while (!(await Promise.all(ports.map((port) => cli("redis-cli", ["-p", String(port), "cluster", "info"]))))
      .every(({ stdout }) => stdout.includes("cluster_state:ok"))) {
      if (Date.now() > deadline) throw new Error("the Redis Cluster did not reach cluster_state:ok")
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    return { urls: ports.map((port) => `redis://127.0.0.1:${port}`), stop }
  } catch (error) {
    await stop()
    throw error
  }
}
