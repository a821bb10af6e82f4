#!/usr/bin/env node
// The `ledger` command. Node >= 24 runs the TypeScript sources directly (type stripping), so there is no build step.
const [major] = process.versions.node.split(".").map(Number)
if (major < 24) {
  console.error(`ledger needs Node >= 24 (this is ${process.version}); run it through npm (npm start / npx ledger), which uses the pinned Node from devDependencies.`)
  process.exit(1)
}
// the watcher runs for days on a person's machine: it loads its own command alone (src/watchMain.ts)
await import(process.argv[2] === "watch" ? "../src/watchMain.ts" : "../src/main.ts")
