/**
 * Once per `npm test`: installs the test-only tools — the real agent clients (Claude Code, Codex) the end-to-end tests
 * drive, and a Chromium for the browser tests (`@sparticuz/chromium`) — into test/tools from its own lockfile, so
 * that someone who only runs the service never downloads them.
 * Skipped when that install is current (a stamp of the lockfile it was made from).
 */
import { execFileSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

const TOOLS = Path.resolve(import.meta.dirname, "../tools")
const STAMP = Path.join(TOOLS, "node_modules", ".installed-from")

export default function setup(): void {
  const lock = Fs.readFileSync(Path.join(TOOLS, "package-lock.json"))
  const hash = Crypto.createHash("sha256").update(lock).digest("hex")
  if (Fs.existsSync(STAMP) && Fs.readFileSync(STAMP, "utf8") === hash) return
  const started = Date.now()
  console.log("installing the test-only tools: agent clients and a browser (test/tools)…")
  execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: TOOLS, stdio: "inherit" })
  Fs.writeFileSync(STAMP, hash)
  console.log(`test-only tools installed in ${Math.round((Date.now() - started) / 1000)} s`)
}
