import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // the real agent clients (Claude Code, Codex) the end-to-end tests drive, installed into test/tools
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // integration suites each create their own database; keep parallelism within the 2-core budget
    maxWorkers: 2,
    // the default report, then the slowest files
    reporters: ["default", "./test/support/slowest-files.ts"]
  }
})
