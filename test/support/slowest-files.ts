/**
 * A vitest reporter that prints the ten slowest test files at the end of a run, so whoever waits for `npm test`
 * sees where the time goes (the default reporter lists files in the order they finished).
 */
import * as Path from "node:path"
import type { Reporter, TestModule } from "vitest/node"

const SHOWN = 10

export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    if (modules.length <= 1) return
    const timed = modules.map((module) => ({ file: Path.relative(process.cwd(), module.moduleId), ms: module.diagnostic().duration }))
    timed.sort((a, b) => b.ms - a.ms)
    const lines = timed.slice(0, SHOWN).map(({ file, ms }) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`)
    process.stdout.write(`\nslowest test files:\n${lines.join("\n")}\n`)
  }
}
