/**
 * The house's rules, read from the code: every import under src/ (type imports and re-exports included) goes to a
 * folder on an earlier line of docs/ARCHITECTURE.md's dependency order, that order names every folder, and no file
 * imports itself around a cycle. A service's key names the folder it lives in.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const SRC = Path.resolve("src")

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(Path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [Path.join(dir, entry.name)] : []
  )

const SPECIFIER = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g

/** The files each file imports (relative imports only: packages are not parts). */
const importGraph = (): Map<string, Array<string>> => {
  const graph = new Map<string, Array<string>>()
  for (const file of sourceFiles(SRC)) {
    const text = Fs.readFileSync(file, "utf8")
    const targets = [...text.matchAll(SPECIFIER)].map((match) => Path.resolve(Path.dirname(file), match[1] ?? match[2]!))
    graph.set(file, targets.filter((target) => target.startsWith(SRC + Path.sep)))
  }
  return graph
}

/** The folder a file belongs to, or undefined for the entry files directly in src/. */
const folderOf = (file: string): string | undefined => {
  const [first, ...rest] = Path.relative(SRC, file).split(Path.sep)
  return rest.length === 0 ? undefined : first
}

/** docs/ARCHITECTURE.md's dependency order: each folder's line number. */
const dependencyOrder = (): Map<string, number> => {
  const doc = Fs.readFileSync("docs/ARCHITECTURE.md", "utf8")
  const section = /<!-- dependency order -->\n([\s\S]*?)<!-- end dependency order -->/.exec(doc)
  assert.isNotNull(section, "docs/ARCHITECTURE.md has its dependency order between the markers")
  const order = new Map<string, number>()
  for (const line of section![1]!.trim().split("\n")) {
    const rank = /^(\d+)\. /.exec(line)
    assert.isNotNull(rank, `a numbered line: ${line}`)
    for (const [, folder] of line.matchAll(/`([^`]+)`/g)) order.set(folder!, Number(rank![1]))
  }
  return order
}

/** The strongly connected components of more than one file (Tarjan). */
const cycles = (graph: Map<string, Array<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  let next = 0
  const visit = (file: string) => {
    index.set(file, next)
    low.set(file, next++)
    stack.push(file)
    onStack.add(file)
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target)
        low.set(file, Math.min(low.get(file)!, low.get(target)!))
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!))
    }
    if (low.get(file) === index.get(file)) {
      const component: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(Path.relative(SRC, member))
      } while (member !== file)
      if (component.length > 1) found.push(component)
    }
  }
  for (const file of graph.keys()) if (!index.has(file)) visit(file)
  return found
}

describe("architecture", () => {
  const graph = importGraph()
  const order = dependencyOrder()

  it("the dependency order names every folder under src/, and only those", () => {
    const folders = Fs.readdirSync(SRC, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort()
    assert.deepStrictEqual([...order.keys()].sort(), folders)
  })

  it("every import goes to the same folder or one on an earlier line", () => {
    const upward: Array<string> = []
    for (const [file, targets] of graph) {
      const from = folderOf(file)
      if (from === undefined) continue
      for (const target of targets) {
        const to = folderOf(target)
        if (to === undefined || to === from) continue
        if (!(order.get(to)! < order.get(from)!)) upward.push(`${Path.relative(SRC, file)} → ${Path.relative(SRC, target)}`)
      }
    }
    assert.deepStrictEqual(upward, [])
  })

  it("no import cycle, type imports included", () => {
    assert.deepStrictEqual(cycles(graph), [])
  })

  it("every service key names its own folder", () => {
    const misnamed: Array<string> = []
    for (const file of graph.keys()) {
      for (const [, folder, name] of Fs.readFileSync(file, "utf8").matchAll(/\("ledger\/([\w-]+)\/(\w+)"\)/g)) {
        if (folder !== folderOf(file)) misnamed.push(`${Path.relative(SRC, file)}: ledger/${folder}/${name}`)
      }
    }
    assert.deepStrictEqual(misnamed, [])
  })
})
